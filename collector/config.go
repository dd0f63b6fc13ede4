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
	// PortSharing is what the collector does when another socket is bound to one of its
	// listeners' UDP ports, on an address that overlaps the listener's (another process,
	// or another collector in this one; `ss -ulpn` lists them): with SO_REUSEPORT the
	// kernel would hand it part of every exporter's datagrams. refuse: the collector does
	// not start, and says which socket and process; warn: it starts and logs an error.
	// Either way, such a socket found while running (checked every second) is logged as
	// an error with its process, counted in flowzero_collector_foreign_sockets and
	// reported by /healthz until it goes.
	PortSharing string `yaml:"port-sharing"`
}

// ListenerConfiguration is one UDP port. A listener written without workers or
// receive-buffer gets their defaults (SetDefaults).
type ListenerConfiguration struct {
	// Protocol is netflow (NetFlow v5, v9 and IPFIX) or sflow.
	Protocol string `yaml:"protocol"`
	// Address to bind, host:port: an IPv4 address binds IPv4 only (0.0.0.0 every IPv4
	// address), an IPv6 one IPv6 only, an empty host or [::] every IPv4 and IPv6 address.
	// Two listeners cannot share a port on addresses that overlap: the kernel would split
	// the datagrams between them. With receive: af-packet, the address must be one of this
	// host's (not 0.0.0.0, [::] or empty).
	Address string `yaml:"address"`
	// Workers is the number of sockets bound to the port with SO_REUSEPORT, each read by its
	// own goroutine. The kernel spreads exporters over them by source address and port.
	Workers int `yaml:"workers"`
	// ReceiveBuffer is the socket receive buffer in bytes (SO_RCVBUFFORCE when permitted,
	// else SO_RCVBUF, capped by net.core.rmem_max; a warning says when the kernel capped it).
	ReceiveBuffer int `yaml:"receive-buffer"`
	// Receive is how datagrams are read: socket (UDP sockets) or af-packet (AF_PACKET
	// TPACKET_V3 rings, one per worker, in a fanout group that spreads exporters by flow
	// hash; needs CAP_NET_RAW). af-packet wakes a worker once per ring block instead of once
	// per few datagrams, for less CPU per datagram (docs/design/split.md); receive-buffer is
	// then each ring's size, in blocks of 1 MiB. IPv4 fragments are reassembled by the
	// kernel; IPv6 fragments and IPv6 datagrams with extension headers are not read (the
	// fragments are counted in flowzero_collector_ring_errors_total). The listener's UDP
	// socket holds the port and drops what it gets, which the host's Udp InErrors counts.
	Receive string `yaml:"receive"`
	// Interface is the network interface the af-packet rings read, the one the exporters'
	// datagrams arrive on (required with af-packet: on every interface, a bridge, bond or
	// VLAN device and the ports under it would each show the same datagram).
	Interface string `yaml:"interface"`
	// BlockTimeout is the longest a datagram waits in a partly filled af-packet ring block
	// before the kernel hands the block to the worker (whole milliseconds).
	BlockTimeout time.Duration `yaml:"block-timeout"`
}

// SetDefaults sets the defaults of a listener's optional keys (config.ItemDefaults): 2
// workers, a receive buffer of 8 MiB, UDP sockets, a block timeout of 5 ms.
func (l *ListenerConfiguration) SetDefaults() {
	l.Workers = 2
	l.ReceiveBuffer = 8 << 20
	l.Receive = "socket"
	l.BlockTimeout = 5 * time.Millisecond
}

// listener returns a listener with its defaults.
func listener(protocol, address string) ListenerConfiguration {
	l := ListenerConfiguration{Protocol: protocol, Address: address}
	l.SetDefaults()
	return l
}

// HTTPConfiguration of the HTTP server.
type HTTPConfiguration struct {
	// Listen is the address of the HTTP server; loopback by default. Empty disables it.
	// Bound to loopback, the server only answers requests addressed to localhost or a
	// loopback address (a DNS name re-pointed at 127.0.0.1 by a web page is refused).
	Listen string `yaml:"listen"`
	// Pprof enables /debug/pprof.
	Pprof bool `yaml:"pprof"`
	// MaxConcurrentRequests bounds the API requests (every /api/ route: RIB lookups,
	// exporters, queries) served at once. Lookups and queries are CPU and memory bound:
	// more at once than the machine has cores only adds memory.
	MaxConcurrentRequests int `yaml:"max-concurrent-requests"`
	// MaxQueuedRequests more API requests wait for their turn, up to 10 s (then 503);
	// beyond them a request is answered 429 at once. Both answers carry Retry-After: 1 and
	// are counted in flowzero_collector_http_rejected_total (busy, busy-timeout). /metrics
	// and /healthz are never limited.
	MaxQueuedRequests int `yaml:"max-queued-requests"`
}

// ExporterPolicy restricts exporters.
type ExporterPolicy struct {
	// Allow lists the prefixes exporters may send from; empty allows everyone. Datagrams
	// from elsewhere are dropped and counted in one counter (dropped_total, reason
	// not-allowed), with no per-exporter entry or metric.
	Allow []netip.Prefix `yaml:"allow"`
	// RateLimit is the most flows per second accepted from one exporter; 0 disables it. As in
	// Akvorado, flows beyond it are dropped and the sampling rate of the flows kept is raised
	// in proportion, so volumes stay right. In mode inlet, which decodes nothing, a datagram
	// takes the flows its headers and the exporter's templates announce and is dropped whole
	// when they do not fit (datagrams defining templates always pass); the sampling rate of
	// the flows kept is not raised there.
	RateLimit float64 `yaml:"rate-limit"`
}

// DefaultConfiguration returns the defaults: NetFlow/IPFIX on 2055 and 4739, sFlow on 6343,
// on every address; HTTP on 127.0.0.1:8080.
func DefaultConfiguration() Configuration {
	return Configuration{
		Listeners: []ListenerConfiguration{
			listener("netflow", ":2055"),
			listener("netflow", ":4739"),
			listener("sflow", ":6343"),
		},
		HTTP:          HTTPConfiguration{Listen: "127.0.0.1:8080", MaxConcurrentRequests: 8, MaxQueuedRequests: 64},
		BatchSize:     64 << 10,
		BatchInterval: 200 * time.Millisecond,
		PortSharing:   "refuse",
	}
}

// Validate checks the configuration, naming the bad key.
func (c *Configuration) Validate() error {
	bound := make([]netip.AddrPort, len(c.Listeners))
	for i, l := range c.Listeners {
		key := fmt.Sprintf("listeners[%d]", i)
		switch l.Protocol {
		case "netflow", "sflow":
		default:
			return config.Errorf(key+".protocol", "must be netflow or sflow, not %q", l.Protocol)
		}
		ap, err := netip.ParseAddrPort(withHost(l.Address))
		if err != nil {
			return config.Errorf(key+".address", "%q is not host:port: %v", l.Address, err)
		}
		bound[i] = ap
		for j := range i {
			if sharePort(bound[j], bothFamilies(c.Listeners[j].Address), ap, bothFamilies(l.Address)) {
				return config.Errorf(key+".address", "%q takes port %d of listeners[%d].address (%s %q): "+
					"the kernel would split the datagrams between them; give each listener its own port",
					l.Address, ap.Port(), j, c.Listeners[j].Protocol, c.Listeners[j].Address)
			}
		}
		if l.Workers < 1 || l.Workers > 64 {
			return config.Errorf(key+".workers", "must be in 1..64, not %d", l.Workers)
		}
		if l.ReceiveBuffer < 0 {
			return config.Errorf(key+".receive-buffer", "must not be negative")
		}
		switch l.Receive {
		case "", "socket": // "" in a configuration built in Go without SetDefaults
			if l.Interface != "" {
				return config.Errorf(key+".interface", "is for receive: af-packet only")
			}
		case "af-packet":
			if l.Interface == "" {
				return config.Errorf(key+".interface", "is required with receive: af-packet: the interface the exporters' datagrams arrive on (lo for loopback)")
			}
			if l.BlockTimeout < time.Millisecond || l.BlockTimeout > time.Second || l.BlockTimeout%time.Millisecond != 0 {
				return config.Errorf(key+".block-timeout", "must be whole milliseconds in 1ms..1s, not %s", l.BlockTimeout)
			}
			if ap.Addr().IsUnspecified() {
				// The rings see every frame of the interface: without a destination to
				// check, they would take datagrams routed through the host too.
				return config.Errorf(key+".address", "%q: receive: af-packet needs the address the exporters send to, "+
					"one of this host's (such as 192.0.2.10:%d), not an unspecified one: the rings would also take "+
					"datagrams routed through the host, not addressed to it", l.Address, ap.Port())
			}
			if l.ReceiveBuffer > 1<<30 {
				return config.Errorf(key+".receive-buffer", "is the ring's size with af-packet: at most 1 GiB, not %d", l.ReceiveBuffer)
			}
		default:
			return config.Errorf(key+".receive", "must be socket or af-packet, not %q", l.Receive)
		}
	}
	if c.HTTP.Listen != "" {
		if _, err := netip.ParseAddrPort(withHost(c.HTTP.Listen)); err != nil {
			return config.Errorf("http.listen", "%q is not host:port: %v", c.HTTP.Listen, err)
		}
	}
	for i, p := range c.Exporters.Allow {
		if !p.IsValid() {
			return config.Errorf(fmt.Sprintf("exporters.allow[%d]", i), "a prefix is required")
		}
		if err := config.CheckHostBits(p); err != nil {
			return config.Errorf(fmt.Sprintf("exporters.allow[%d]", i), "%v", err)
		}
	}
	if c.HTTP.MaxConcurrentRequests < 1 {
		return config.Errorf("http.max-concurrent-requests", "must be at least 1, not %d", c.HTTP.MaxConcurrentRequests)
	}
	if c.HTTP.MaxQueuedRequests < 0 {
		return config.Errorf("http.max-queued-requests", "must not be negative")
	}
	switch c.PortSharing {
	case "refuse", "warn":
	default:
		return config.Errorf("port-sharing", "must be refuse or warn, not %q", c.PortSharing)
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

// sharePort tells whether sockets bound to a and b would receive datagrams for the same
// destination: the same port (not 0, which picks a free one), and the same address or one
// that takes the other's (0.0.0.0 every IPv4 address, [::] every IPv6 address, and every
// IPv4 one too when its socket is dual-stack: aDual, bDual).
func sharePort(a netip.AddrPort, aDual bool, b netip.AddrPort, bDual bool) bool {
	if a.Port() != b.Port() || a.Port() == 0 {
		return false
	}
	x, y := a.Addr().Unmap(), b.Addr().Unmap()
	return x == y || takes(x, aDual, y) || takes(y, bDual, x)
}

// takes tells whether a socket bound to the unspecified address x (dual-stack when dual)
// receives datagrams to y.
func takes(x netip.Addr, dual bool, y netip.Addr) bool {
	switch {
	case !x.IsUnspecified():
		return false
	case x.Is4():
		return y.Is4()
	default:
		return dual || y.Is6()
	}
}

// bothFamilies tells whether a listener's address (an empty host, or [::]) binds a
// dual-stack socket, taking IPv4 and IPv6.
func bothFamilies(address string) bool {
	if len(address) > 0 && address[0] == ':' {
		return true
	}
	ap, err := netip.ParseAddrPort(address)
	return err == nil && ap.Addr() == netip.IPv6Unspecified()
}

// withHost turns ":2055" into "[::]:2055" so that it parses as an address and port.
func withHost(a string) string {
	if len(a) > 0 && a[0] == ':' {
		return "[::]" + a
	}
	return a
}
