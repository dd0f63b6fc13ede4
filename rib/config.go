package rib

import (
	"net/netip"
	"time"

	"flowzero/internal/config"
)

// Configuration configures the RIB component.
type Configuration struct {
	// Selection is the route used for enrichment among a prefix's paths: first, best or peer
	// (see the package documentation).
	Selection string `yaml:"selection"`
	// Peer is the address of the peer whose routes are preferred with selection "peer".
	Peer string `yaml:"peer"`
	// Snapshot is the file the table is saved to on Stop and every SnapshotInterval, and
	// loaded from at Start ("" disables snapshots). Saves replace it atomically; a truncated
	// or corrupt one is refused whole at Start (the RIB starts empty), reported in /healthz
	// until a snapshot saves again.
	Snapshot string `yaml:"snapshot"`
	// SnapshotInterval is the period of the background saves (0 saves only on Stop).
	SnapshotInterval time.Duration `yaml:"snapshot-interval"`
	// IPv4Array answers IPv4 lookups from an array indexed by the addresses' first 24 bits,
	// kept beside the prefix tree, when the table has more than 65,536 IPv4 prefixes: fewer
	// memory accesses per flow, for 64 MiB and about 75 bytes per distinct route (attributes,
	// peer, prefix length) more, and twice the 64 MiB while it is rebuilt after a large
	// change. Off: the tree alone.
	IPv4Array bool `yaml:"ipv4-array"`
	// IPv6Array answers IPv6 lookups from an array indexed by the addresses' first 24 bits,
	// then 256-entry tables of the next bytes down to /48, kept beside the prefix tree, when
	// the table has more than 65,536 IPv6 prefixes: fewer memory accesses per flow, for
	// 64 MiB, 1 KiB per block of /24, /32 or /40 holding longer prefixes and about 75 bytes
	// per distinct route more, and twice that while it is rebuilt after a large change. Off:
	// the tree alone.
	IPv6Array bool `yaml:"ipv6-array"`
}

// DefaultConfiguration returns the defaults: first peer, no snapshot.
func DefaultConfiguration() Configuration {
	return Configuration{
		Selection:        "first",
		SnapshotInterval: 10 * time.Minute,
		IPv4Array:        true,
		IPv6Array:        true,
	}
}

// Validate checks the configuration and names the bad key.
func (c *Configuration) Validate() error {
	sel, err := parseSelection(c.Selection)
	if err != nil {
		return config.Errorf("selection", "%s", err)
	}
	if sel == SelectPeer && c.Peer == "" {
		return config.Errorf("peer", "required with selection: peer")
	}
	if c.Peer != "" {
		if _, err := netip.ParseAddr(c.Peer); err != nil {
			return config.Errorf("peer", "not an IP address: %q", c.Peer)
		}
	}
	if c.SnapshotInterval < 0 {
		return config.Errorf("snapshot-interval", "negative duration %s", c.SnapshotInterval)
	}
	return nil
}
