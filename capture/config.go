package capture

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/gopacket/gopacket/layers"

	"flowzero/capture/wire"
	"flowzero/internal/config"
)

// AgentConfiguration configures `flowzero capture agent`.
type AgentConfiguration struct {
	// Name names the agent on the server (pcapng interfaces "name:iface", metrics). No ':'.
	Name string `yaml:"name"`
	// Server is the server's host:port.
	Server string `yaml:"server"`
	// Token is the shared secret the server expects (never logged).
	Token string                 `yaml:"token"`
	TLS   TLSClientConfiguration `yaml:"tls"`
	// Compress asks for zstd compression of every frame (off by default: on a LAN the CPU,
	// not the bandwidth, is the limit).
	Compress bool `yaml:"compress"`
	// Live captures on network interfaces; Replay reads capture files. Exactly one is used.
	Live   LiveConfiguration   `yaml:"live"`
	Replay ReplayConfiguration `yaml:"replay"`
	// FrameSize is the payload size at which a frame is sent; FlushInterval the longest a
	// packet waits in a partial frame.
	FrameSize     int           `yaml:"frame-size"`
	FlushInterval time.Duration `yaml:"flush-interval"`
	// BufferSize bounds the bytes of frames held while disconnected or not yet acknowledged;
	// packets that do not fit are dropped and counted.
	BufferSize int `yaml:"buffer-size"`
	// Heartbeat is the interval of heartbeats and drop reports.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// ReconnectMin and ReconnectMax bound the exponential reconnection backoff.
	ReconnectMin time.Duration `yaml:"reconnect-min"`
	ReconnectMax time.Duration `yaml:"reconnect-max"`
	// DrainTimeout is how long Stop waits for the server to acknowledge what is buffered.
	DrainTimeout time.Duration `yaml:"drain-timeout"`
}

// LiveConfiguration configures live capture with AF_PACKET.
type LiveConfiguration struct {
	Interfaces []string `yaml:"interfaces"`
	// Filter is either a tcpdump-like expression of the built-in subset (see bpf.go), compiled
	// for each interface's link type (Ethernet or raw IP), or the output of `tcpdump -ddd` (a
	// count line, then "code jt jf k" lines), which fits only interfaces of the link type
	// tcpdump compiled it for.
	Filter      string `yaml:"filter"`
	SnapLength  int    `yaml:"snap-length"`
	Promiscuous bool   `yaml:"promiscuous"`
	// RingSize is the AF_PACKET ring size in bytes per interface.
	RingSize int `yaml:"ring-size"`
}

// ReplayConfiguration configures replay of pcap/pcapng files.
type ReplayConfiguration struct {
	Files []string `yaml:"files"`
	// Speed is "recorded" (the gaps between packets are kept) or "max".
	Speed string `yaml:"speed"`
	// Loop replays the files this many times (≥ 1).
	Loop int `yaml:"loop"`
}

// TLSClientConfiguration configures the agent's TLS. The server certificate is always
// verified (against CA, or the system roots when CA is empty).
type TLSClientConfiguration struct {
	Enable     bool   `yaml:"enable"`
	CA         string `yaml:"ca"`
	Cert       string `yaml:"cert"`
	Key        string `yaml:"key"`
	ServerName string `yaml:"server-name"`
}

// DefaultAgentConfiguration returns the agent's defaults.
func DefaultAgentConfiguration() AgentConfiguration {
	return AgentConfiguration{
		Server:        "127.0.0.1:4739",
		FrameSize:     256 << 10,
		FlushInterval: 50 * time.Millisecond,
		BufferSize:    64 << 20,
		Heartbeat:     5 * time.Second,
		ReconnectMin:  100 * time.Millisecond,
		ReconnectMax:  30 * time.Second,
		DrainTimeout:  10 * time.Second,
		Live:          LiveConfiguration{SnapLength: 262144, Promiscuous: true, RingSize: 16 << 20},
		Replay:        ReplayConfiguration{Speed: "max", Loop: 1},
	}
}

// Validate checks the agent configuration and names the bad key.
func (c *AgentConfiguration) Validate() error {
	if err := c.validateName(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Server); err != nil {
		return config.Errorf("server", "%q: %v", c.Server, err)
	}
	if len(c.Token) > wire.MaxTokenLen {
		return config.Errorf("token", "longer than %d bytes", wire.MaxTokenLen)
	}
	if err := c.TLS.validate(); err != nil {
		return config.Prefix("tls", err)
	}
	if (len(c.Live.Interfaces) == 0) == (len(c.Replay.Files) == 0) {
		return config.Errorf("live.interfaces", "exactly one of live.interfaces and replay.files must be set")
	}
	if len(c.Live.Interfaces) > 0 {
		if c.Live.SnapLength < 64 || c.Live.SnapLength > 262144 {
			return config.Errorf("live.snap-length", "%d: want 64 to 262144", c.Live.SnapLength)
		}
		if c.Live.RingSize < 1<<20 {
			return config.Errorf("live.ring-size", "%d: want at least 1 MiB", c.Live.RingSize)
		}
		// The syntax is checked here; each interface gets the program for its link type when
		// the capture opens.
		if _, err := CompileFilter(c.Live.Filter, c.Live.SnapLength, layers.LinkTypeEthernet); err != nil {
			return config.Errorf("live.filter", "%v", err)
		}
	}
	if c.Replay.Speed != "max" && c.Replay.Speed != "recorded" {
		return config.Errorf("replay.speed", "%q: want max or recorded", c.Replay.Speed)
	}
	if c.Replay.Loop < 1 {
		return config.Errorf("replay.loop", "%d: want at least 1", c.Replay.Loop)
	}
	if c.FrameSize < 4096 || c.FrameSize > wire.MaxFramePayload/2 {
		return config.Errorf("frame-size", "%d: want 4096 to %d", c.FrameSize, wire.MaxFramePayload/2)
	}
	if c.BufferSize < 2*c.FrameSize {
		return config.Errorf("buffer-size", "%d: want at least twice frame-size", c.BufferSize)
	}
	for key, d := range map[string]time.Duration{"flush-interval": c.FlushInterval, "heartbeat": c.Heartbeat,
		"reconnect-min": c.ReconnectMin, "reconnect-max": c.ReconnectMax, "drain-timeout": c.DrainTimeout} {
		if d <= 0 {
			return config.Errorf(key, "%v: want a positive duration", d)
		}
	}
	if c.ReconnectMax < c.ReconnectMin {
		return config.Errorf("reconnect-max", "%v is below reconnect-min %v", c.ReconnectMax, c.ReconnectMin)
	}
	return nil
}

// validateName checks an agent name: it becomes part of file and interface names.
func (c *AgentConfiguration) validateName() error {
	if c.Name == "" || len(c.Name) > wire.MaxNameLen || strings.ContainsAny(c.Name, ":/\\ \t\n{}") || c.Name[0] == '.' {
		return config.Errorf("name", "%q: want 1 to %d characters without ':', '/', '\\', braces or spaces, not starting with '.'", c.Name, wire.MaxNameLen)
	}
	return nil
}

func (c *TLSClientConfiguration) validate() error {
	if !c.Enable {
		if c.CA != "" || c.Cert != "" || c.Key != "" {
			return config.Errorf("enable", "certificates given but TLS is not enabled")
		}
		return nil
	}
	if (c.Cert == "") != (c.Key == "") {
		return config.Errorf("cert", "cert and key go together")
	}
	return nil
}

// ServerConfiguration configures `flowzero capture server`.
type ServerConfiguration struct {
	// Listen is the TCP address agents connect to.
	Listen string `yaml:"listen"`
	// Tokens are the accepted shared secrets; empty accepts any agent (only with TLS client
	// certificates or on a trusted network).
	Tokens []string `yaml:"tokens"`
	// TLS configures the listener's TLS.
	TLS TLSServerConfiguration `yaml:"tls"`
	// Output says where packets are written.
	Output OutputConfiguration `yaml:"output"`
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

// TLSServerConfiguration configures the server's TLS.
type TLSServerConfiguration struct {
	// Enable serves agents over TLS.
	Enable bool `yaml:"enable"`
	// Cert is the server's certificate chain (PEM file).
	Cert string `yaml:"cert"`
	// Key is the server's private key (PEM file).
	Key string `yaml:"key"`
	// ClientCA, when set, requires agents to present a certificate signed by it.
	ClientCA string `yaml:"client-ca"`
}

// OutputConfiguration says where packets go.
type OutputConfiguration struct {
	// Path of the pcapng file; "-" is stdout. A FIFO is written as is: until a reader opens it,
	// agents' frames wait (like tcpdump -w); when the reader goes away, what could not be
	// written counts as server drops and frames wait for the next reader. It may hold
	// strftime conversions (%Y %m %d %H %M %S), expanded at each time rotation like tcpdump -G.
	Path string `yaml:"path"`
	// PerAgent writes one file per agent: "{agent}" in Path is replaced by the agent's name,
	// or "-name" is inserted before the extension.
	PerAgent bool `yaml:"per-agent"`
	// RotateSize (tcpdump -C, bytes), RotateInterval (-G) and MaxFiles (-W) rotate files;
	// file names are Path, then Path1, Path2... (zero-padded to MaxFiles' width when set,
	// reused as a ring like -C -W; with -G, the oldest file beyond MaxFiles is removed).
	RotateSize int64 `yaml:"rotate-size"`
	// RotateInterval starts a new file after this long (tcpdump -G); 0 disables it.
	RotateInterval time.Duration `yaml:"rotate-interval"`
	// MaxFiles is the number of files kept (tcpdump -W); 0 keeps all.
	MaxFiles int `yaml:"max-files"`
	// FlushInterval bounds how long written packets stay in memory buffers.
	FlushInterval time.Duration `yaml:"flush-interval"`
	// IdleClose, with PerAgent, closes the file of an agent disconnected this long and
	// forgets its counters and metric series, which would otherwise stay until the server
	// stops, one set per agent name ever seen; flows from its packets are exported and its
	// flow table dropped. An agent that comes back appends a new pcapng
	// section to its file (or starts the next one when the name holds a time). 0 keeps them.
	IdleClose time.Duration `yaml:"idle-close"`
}

// DefaultServerConfiguration returns the server's defaults.
func DefaultServerConfiguration() ServerConfiguration {
	return ServerConfiguration{
		Listen:      "127.0.0.1:4739",
		IdleTimeout: 30 * time.Second,
		MaxAgents:   1024,
		// Far more than a capture host has, few enough to keep a file's header small.
		MaxInterfacesPerAgent: 256,
		Output:                OutputConfiguration{Path: "capture.pcapng", FlushInterval: 200 * time.Millisecond, IdleClose: 5 * time.Minute},
	}
}

// Validate checks the server configuration and names the bad key.
func (c *ServerConfiguration) Validate() error {
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
	if err := c.Output.validate(); err != nil {
		return config.Prefix("output", err)
	}
	return nil
}

func (c *OutputConfiguration) validate() error {
	if c.Path == "" {
		return config.Errorf("path", "empty")
	}
	rotating := c.RotateSize > 0 || c.RotateInterval > 0 || c.MaxFiles > 0
	if c.Path == "-" && (rotating || c.PerAgent) {
		return config.Errorf("path", "stdout cannot rotate or be per agent")
	}
	if c.RotateSize < 0 {
		return config.Errorf("rotate-size", "%d: negative", c.RotateSize)
	}
	if c.RotateInterval < 0 || (c.RotateInterval > 0 && c.RotateInterval < time.Second) {
		return config.Errorf("rotate-interval", "%v: want 0 or at least 1s", c.RotateInterval)
	}
	if c.MaxFiles < 0 || (c.MaxFiles > 0 && c.RotateSize == 0 && c.RotateInterval == 0) {
		return config.Errorf("max-files", "%d: needs rotate-size or rotate-interval", c.MaxFiles)
	}
	if c.FlushInterval <= 0 {
		return config.Errorf("flush-interval", "%v: want a positive duration", c.FlushInterval)
	}
	if c.IdleClose < 0 {
		return config.Errorf("idle-close", "%v: want 0 or a positive duration", c.IdleClose)
	}
	return nil
}
