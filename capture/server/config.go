package server

import (
	"fmt"
	"net"
	"time"

	"flowzero/capture/pcapng"
	"flowzero/capture/wire"
	"flowzero/internal/config"
)

// Configuration configures `flowzero capture server` and the capture server of the collector.
type Configuration struct {
	// Listen is the TCP address agents connect to.
	Listen string `yaml:"listen"`
	// Tokens are the accepted shared secrets; empty accepts any agent (only with TLS client
	// certificates or on a trusted network).
	Tokens []string `yaml:"tokens"`
	// TLS configures the listener's TLS.
	TLS TLSConfiguration `yaml:"tls"`
	// Output says where packets are written.
	Output pcapng.Configuration `yaml:"output"`
	// IdleTimeout closes an agent's connection after this long without a frame (agents send
	// heartbeats).
	IdleTimeout time.Duration `yaml:"idle-timeout"`
	// MaxAgents bounds the agents connected at once. Another agent is answered "busy" and
	// tries again with its reconnection backoff; an agent already connected may always
	// replace its connection.
	MaxAgents int `yaml:"max-agents"`
	// MaxInterfacesPerAgent bounds the capture interfaces an agent may announce (each one is
	// a pcapng interface description kept until the output closes). Announcements beyond it
	// are refused and counted (errors_total{reason="too-many-interfaces"}); packets on a
	// refused interface are dropped and counted as server drops.
	MaxInterfacesPerAgent int `yaml:"max-interfaces-per-agent"`
}

// TLSConfiguration configures the server's TLS.
type TLSConfiguration struct {
	// Enable serves agents over TLS.
	Enable bool `yaml:"enable"`
	// Cert is the server's certificate chain (PEM file).
	Cert string `yaml:"cert"`
	// Key is the server's private key (PEM file).
	Key string `yaml:"key"`
	// ClientCA, when set, requires agents to present a certificate signed by it.
	ClientCA string `yaml:"client-ca"`
}

// DefaultConfiguration returns the server's defaults.
func DefaultConfiguration() Configuration {
	return Configuration{
		Listen:      "127.0.0.1:4739",
		IdleTimeout: 30 * time.Second,
		MaxAgents:   1024,
		// Far more than a capture host has, few enough to keep a file's header small.
		MaxInterfacesPerAgent: 256,
		Output:                pcapng.DefaultConfiguration(),
	}
}

// Validate checks the server configuration and names the bad key.
func (c *Configuration) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return config.Errorf("listen", "%q: %v", c.Listen, err)
	}
	for i, t := range c.Tokens {
		if t == "" || len(t) > wire.MaxTokenLen {
			return config.Errorf(fmt.Sprintf("tokens[%d]", i), "want 1 to %d bytes", wire.MaxTokenLen)
		}
	}
	if c.TLS.Enable && (c.TLS.Cert == "" || c.TLS.Key == "") {
		return config.Errorf("tls.cert", "TLS needs cert and key")
	}
	if !c.TLS.Enable && (c.TLS.Cert != "" || c.TLS.ClientCA != "") {
		return config.Errorf("tls.enable", "certificates given but TLS is not enabled")
	}
	if c.IdleTimeout <= 0 {
		return config.Errorf("idle-timeout", "%v: want a positive duration", c.IdleTimeout)
	}
	if c.MaxAgents < 1 {
		return config.Errorf("max-agents", "%d: want at least 1", c.MaxAgents)
	}
	if c.MaxInterfacesPerAgent < 1 {
		return config.Errorf("max-interfaces-per-agent", "%d: want at least 1", c.MaxInterfacesPerAgent)
	}
	if err := c.Output.Validate(); err != nil {
		return config.Prefix("output", err)
	}
	return nil
}
