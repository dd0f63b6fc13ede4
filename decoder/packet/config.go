package packet

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"flowzero/internal/config"
)

// Decapsulation names the tunnel a Parser looks through.
type Decapsulation uint8

const (
	// DecapNone reports the outermost packet.
	DecapNone Decapsulation = iota
	// DecapGRE reports the packet carried in GRE (RFC 2784/2890, with optional checksum,
	// key and sequence number): IPv4, IPv6 or Ethernet (transparent bridging, 0x6558).
	DecapGRE
	// DecapIPIP reports the packet carried in IP-in-IP: IPv4 or IPv6 (protocol 4 or 41) in
	// IPv4 or IPv6.
	DecapIPIP
	// DecapVXLAN reports the Ethernet frame carried in VXLAN (RFC 7348) over UDP to
	// Configuration.VXLANPort.
	DecapVXLAN
	// DecapSRv6 reports the packet carried in SRv6 (RFC 8986 End.DT4, End.DT6, End.DT46):
	// IPv6 with zero or more segment routing headers, then IPv4 or IPv6.
	DecapSRv6
)

var decapNames = [...]string{"none", "gre", "ipip", "vxlan", "srv6"}

// String returns the configuration name of d.
func (d Decapsulation) String() string {
	if int(d) < len(decapNames) {
		return decapNames[d]
	}
	return fmt.Sprintf("Decapsulation(%d)", d)
}

// MarshalText implements encoding.TextMarshaler.
func (d Decapsulation) MarshalText() ([]byte, error) {
	if int(d) >= len(decapNames) {
		return nil, fmt.Errorf("unknown decapsulation %d", d)
	}
	return []byte(decapNames[d]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: one of none, gre, ipip, vxlan, srv6.
func (d *Decapsulation) UnmarshalText(b []byte) error {
	for i, n := range decapNames {
		if string(b) == n {
			*d = Decapsulation(i)
			return nil
		}
	}
	return fmt.Errorf("unknown decapsulation %q (want none, gre, ipip, vxlan or srv6)", b)
}

// UnmarshalYAML implements yaml.Unmarshaler: as UnmarshalText, with an error that gives the
// line and the key, which a TextUnmarshaler's error cannot.
func (d *Decapsulation) UnmarshalYAML(n *yaml.Node) error {
	if err := d.UnmarshalText([]byte(n.Value)); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: decapsulation: %v", n.Line, err)}}
	}
	return nil
}

// Configuration is the configuration of a Parser.
type Configuration struct {
	// Decapsulation is the tunnel to look through: none, gre, ipip, vxlan or srv6.
	Decapsulation Decapsulation `yaml:"decapsulation"`
	// VXLANPort is the UDP destination port that marks VXLAN (IANA: 4789).
	VXLANPort uint16 `yaml:"vxlan-port"`
}

// DefaultConfiguration returns the default configuration: no decapsulation, VXLAN on 4789.
func DefaultConfiguration() Configuration {
	return Configuration{Decapsulation: DecapNone, VXLANPort: 4789}
}

// Validate checks the configuration; errors name the bad key.
func (c Configuration) Validate() error {
	if int(c.Decapsulation) >= len(decapNames) {
		return config.Errorf("decapsulation", "unknown decapsulation %d", c.Decapsulation)
	}
	if c.VXLANPort == 0 {
		return config.Errorf("vxlan-port", "must not be 0")
	}
	return nil
}
