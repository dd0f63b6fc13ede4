package collector

import (
	"fmt"
	"net/netip"
	"time"

	"flowzero/internal/config"
)

// Configuration of the collector service (the `collector:` key of the configuration file).
type Configuration struct {
	// Listeners are the UDP sockets to read flows from.
	Listeners []ListenerConfiguration `yaml:"listeners"`
	// HTTP serves /metrics, /healthz and the API.
	HTTP HTTPConfiguration `yaml:"http"`
	// Exporters restricts and rate-limits who may send flows.
	Exporters ExporterPolicy `yaml:"exporters"`
	// BatchSize is the size in bytes at which a worker hands its batch of encoded flows to the
	// sinks (one Kafka record, one file write).
	BatchSize int `yaml:"batch-size"`
	// BatchInterval is the longest a flow waits in a worker's batch before it is handed to
	// the sinks.
	BatchInterval time.Duration `yaml:"batch-interval"`
}

// ListenerConfiguration is one UDP port.
type ListenerConfiguration struct {
	// Protocol is netflow (NetFlow v5, v9 and IPFIX) or sflow.
	Protocol string `yaml:"protocol"`
	// Address to bind, host:port; an empty host binds every IPv4 and IPv6 address.
	Address string `yaml:"address"`
	// Workers is the number of sockets bound to the port with SO_REUSEPORT, each read by its
	// own goroutine. The kernel spreads exporters over them by source address and port.
	Workers int `yaml:"workers"`
	// ReceiveBuffer is the socket receive buffer in bytes (SO_RCVBUFFORCE when permitted,
	// else SO_RCVBUF, capped by net.core.rmem_max; a warning says when the kernel capped it).
	ReceiveBuffer int `yaml:"receive-buffer"`
}

// HTTPConfiguration of the HTTP server.
type HTTPConfiguration struct {
	// Listen is the address of the HTTP server; loopback by default. Empty disables it.
	// Bound to loopback, the server only answers requests addressed to localhost or a
	// loopback address (a DNS name re-pointed at 127.0.0.1 by a web page is refused).
	Listen string `yaml:"listen"`
	// Pprof enables /debug/pprof.
	Pprof bool `yaml:"pprof"`
}

// ExporterPolicy restricts exporters.
type ExporterPolicy struct {
	// Allow lists the prefixes exporters may send from; empty allows everyone. Datagrams
	// from elsewhere are dropped and counted in one counter (dropped_total, reason
	// not-allowed), with no per-exporter entry or metric.
	Allow []netip.Prefix `yaml:"allow"`
	// RateLimit is the most flows per second accepted from one exporter; 0 disables it. As in
	// Akvorado, flows beyond it are dropped and the sampling rate of the flows kept is raised
	// in proportion, so volumes stay right.
	RateLimit float64 `yaml:"rate-limit"`
}

// DefaultConfiguration returns the defaults: NetFlow/IPFIX on 2055 and 4739, sFlow on 6343,
// on every address; HTTP on 127.0.0.1:8080.
func DefaultConfiguration() Configuration {
	return Configuration{
		Listeners: []ListenerConfiguration{
			{Protocol: "netflow", Address: ":2055", Workers: 2, ReceiveBuffer: 8 << 20},
			{Protocol: "netflow", Address: ":4739", Workers: 2, ReceiveBuffer: 8 << 20},
			{Protocol: "sflow", Address: ":6343", Workers: 2, ReceiveBuffer: 8 << 20},
		},
		HTTP:          HTTPConfiguration{Listen: "127.0.0.1:8080"},
		BatchSize:     64 << 10,
		BatchInterval: 200 * time.Millisecond,
	}
}

// Validate checks the configuration, naming the bad key.
func (c *Configuration) Validate() error {
	for i, l := range c.Listeners {
		key := fmt.Sprintf("listeners[%d]", i)
		switch l.Protocol {
		case "netflow", "sflow":
		default:
			return config.Errorf(key+".protocol", "must be netflow or sflow, not %q", l.Protocol)
		}
		if _, err := netip.ParseAddrPort(withHost(l.Address)); err != nil {
			return config.Errorf(key+".address", "%q is not host:port: %v", l.Address, err)
		}
		if l.Workers < 1 || l.Workers > 64 {
			return config.Errorf(key+".workers", "must be in 1..64, not %d", l.Workers)
		}
		if l.ReceiveBuffer < 0 {
			return config.Errorf(key+".receive-buffer", "must not be negative")
		}
	}
	if c.HTTP.Listen != "" {
		if _, err := netip.ParseAddrPort(withHost(c.HTTP.Listen)); err != nil {
			return config.Errorf("http.listen", "%q is not host:port: %v", c.HTTP.Listen, err)
		}
	}
	if c.Exporters.RateLimit < 0 {
		return config.Errorf("exporters.rate-limit", "must not be negative")
	}
	if c.BatchSize < 1024 || c.BatchSize > 16<<20 {
		return config.Errorf("batch-size", "must be in 1 KiB..16 MiB, not %d", c.BatchSize)
	}
	if c.BatchInterval <= 0 {
		return config.Errorf("batch-interval", "must be positive")
	}
	return nil
}

// withHost turns ":2055" into "[::]:2055" so that it parses as an address and port.
func withHost(a string) string {
	if len(a) > 0 && a[0] == ':' {
		return "[::]" + a
	}
	return a
}
