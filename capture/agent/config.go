package agent

import (
	"net"
	"time"

	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"

	"flowzero/capture/filter"
	"flowzero/capture/wire"
	"flowzero/internal/config"
)

// Configuration configures `flowzero capture agent`.
type Configuration struct {
	// Name names the agent on the server (pcapng interfaces "name:iface", metrics). No ':'.
	Name string `yaml:"name"`
	// Server is the server's host:port.
	Server string `yaml:"server"`
	// Token is the shared secret the server expects (never logged).
	Token string `yaml:"token"`
	// TLS configures the connection's TLS.
	TLS TLSConfiguration `yaml:"tls"`
	// Compress asks for zstd compression of every frame (off by default: on a LAN the CPU,
	// not the bandwidth, is the limit).
	Compress bool `yaml:"compress"`
	// Live captures on network interfaces (exactly one of live.interfaces and replay.files
	// is set).
	Live LiveConfiguration `yaml:"live"`
	// Replay reads capture files instead of capturing.
	Replay ReplayConfiguration `yaml:"replay"`
	// FrameSize is the payload size at which a frame is sent.
	FrameSize int `yaml:"frame-size"`
	// FlushInterval is the longest a packet waits in a partial frame.
	FlushInterval time.Duration `yaml:"flush-interval"`
	// BufferSize bounds the bytes of frames held while disconnected or not yet acknowledged;
	// packets that do not fit are dropped and counted.
	BufferSize int `yaml:"buffer-size"`
	// Heartbeat is the interval of heartbeats and drop reports.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// ReconnectMin is the first wait of the exponential reconnection backoff.
	ReconnectMin time.Duration `yaml:"reconnect-min"`
	// ReconnectMax is the longest wait of the reconnection backoff.
	ReconnectMax time.Duration `yaml:"reconnect-max"`
	// DrainTimeout is how long Stop waits for the server to acknowledge what is buffered.
	DrainTimeout time.Duration `yaml:"drain-timeout"`
	// RetryUnauthorized keeps trying when the server refuses the token, with the reconnection
	// backoff. By default the agent stops with an error instead, since a wrong token does not
	// fix itself; set it while the server's tokens are being changed.
	RetryUnauthorized bool `yaml:"retry-unauthorized"`
}

// LiveConfiguration configures live capture with AF_PACKET.
type LiveConfiguration struct {
	// Interfaces are the network interfaces to capture on.
	Interfaces []string `yaml:"interfaces"`
	// Filter is either a tcpdump-like expression of the built-in subset (see filter.Compile),
	// compiled for each interface's link type (Ethernet or raw IP), or the output of `tcpdump
	// -ddd` (a count line, then "code jt jf k" lines), which fits only interfaces of the link
	// type tcpdump compiled it for.
	Filter string `yaml:"filter"`
	// SnapLength is the most bytes kept of each packet (tcpdump -s).
	SnapLength int `yaml:"snap-length"`
	// Promiscuous puts the interfaces in promiscuous mode.
	Promiscuous bool `yaml:"promiscuous"`
	// RingSize is the AF_PACKET ring size in bytes per interface.
	RingSize int `yaml:"ring-size"`
}

// ReplayConfiguration configures replay of pcap/pcapng files.
type ReplayConfiguration struct {
	// Files are the pcap or pcapng files, replayed one after the other.
	Files []string `yaml:"files"`
	// Speed is "recorded" (the gaps between packets are kept) or "max".
	Speed string `yaml:"speed"`
	// Loop replays the files this many times (≥ 1).
	Loop int `yaml:"loop"`
}

// TLSConfiguration configures the agent's TLS. The server certificate is always verified
// (against CA, or the system roots when CA is empty).
type TLSConfiguration struct {
	// Enable connects to the server over TLS.
	Enable bool `yaml:"enable"`
	// CA is the certificate authority (PEM file) that signed the server's certificate.
	CA string `yaml:"ca"`
	// Cert is the agent's certificate (PEM file), for a server that requires client
	// certificates.
	Cert string `yaml:"cert"`
	// Key is the private key of Cert (PEM file).
	Key string `yaml:"key"`
	// ServerName is the name the server's certificate must hold (default: the host of server).
	ServerName string `yaml:"server-name"`
}

// DefaultConfiguration returns the agent's defaults.
func DefaultConfiguration() Configuration {
	return Configuration{
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
func (c *Configuration) Validate() error {
	if err := wire.CheckAgentName(c.Name); err != nil {
		return config.Errorf("name", "%v", err)
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
		if _, err := filter.Compile(c.Live.Filter, c.Live.SnapLength, layers.LinkTypeEthernet); err != nil {
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

func (c *TLSConfiguration) validate() error {
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

// interfaceFilters compiles live.filter for each interface's link type; errors name the key.
func interfaceFilters(expr string, snapLen int, names []string, links []layers.LinkType) ([][]bpf.RawInstruction, error) {
	progs, err := filter.ForInterfaces(expr, snapLen, names, links)
	if err != nil {
		return nil, config.Errorf("live.filter", "%v", err)
	}
	return progs, nil
}
