package routing

import (
	"time"

	"flowzero/internal/config"
	"flowzero/rib"
	"flowzero/rib/bmp"
)

// Configuration lists what feeds the RIB, in the order Start applies it: the snapshot
// (rib.snapshot), then MRT dumps, then BMP live. MRT and BMP routes coexist: they come from
// different peers (BMP peers carry their router's address), and the RIB's selection picks
// among them.
type Configuration struct {
	// RIB configures the routing table: route selection and snapshot.
	RIB rib.Configuration `yaml:"rib"`
	// MRT are dump files (TABLE_DUMP, TABLE_DUMP_V2 or BGP4MP, optionally gzip or bzip2)
	// loaded at start, in order, before the BMP listener accepts routers.
	MRT []string `yaml:"mrt"`
	// MRTKeep, when not zero, removes the MRT peers' routes that long after the BMP listener
	// started: the dump bridges the time the routers take to send their tables, then BMP's
	// live view alone is used.
	MRTKeep time.Duration `yaml:"mrt-keep"`
	// BMP is the listener routers stream their routes to (RFC 7854).
	BMP BMPConfiguration `yaml:"bmp"`
}

// BMPConfiguration is the BMP listener's configuration with an on/off switch.
type BMPConfiguration struct {
	// Enabled starts the BMP listener.
	Enabled           bool `yaml:"enabled"`
	bmp.Configuration `yaml:",inline"`
}

// DefaultConfiguration returns an empty RIB with BMP disabled.
func DefaultConfiguration() Configuration {
	return Configuration{
		RIB: rib.DefaultConfiguration(),
		BMP: BMPConfiguration{Configuration: bmp.DefaultConfiguration()},
	}
}

// Validate checks the configuration and names the bad key.
func (c *Configuration) Validate() error {
	if err := c.RIB.Validate(); err != nil {
		return config.Prefix("rib", err)
	}
	if c.MRTKeep < 0 {
		return config.Errorf("mrt-keep", "negative duration %s", c.MRTKeep)
	}
	if c.MRTKeep > 0 && !c.BMP.Enabled {
		return config.Errorf("mrt-keep", "needs bmp.enabled: nothing would replace the MRT routes")
	}
	if c.BMP.Enabled {
		if err := c.BMP.Validate(); err != nil {
			return config.Prefix("bmp", err)
		}
	}
	return nil
}

// Used tells whether anything feeds the RIB (a snapshot, MRT dumps or BMP); without it, the
// collector skips routing enrichment altogether.
func (c *Configuration) Used() bool {
	return c.RIB.Snapshot != "" || len(c.MRT) > 0 || c.BMP.Enabled
}
