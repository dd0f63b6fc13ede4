package enrich

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/config"
	"flowzero/rib"
	"flowzero/rib/bmp"
	"flowzero/rib/mrt"
)

// SourcesConfiguration lists what feeds the RIB, in the order Start applies it: the snapshot
// (rib.snapshot), then MRT dumps, then BMP live. MRT and BMP routes coexist: they come from
// different peers (BMP peers carry their router's address), and the RIB's selection picks
// among them.
type SourcesConfiguration struct {
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
	BMP BMPSource `yaml:"bmp"`
}

// BMPSource is the BMP listener's configuration with an on/off switch.
type BMPSource struct {
	// Enabled starts the BMP listener.
	Enabled           bool `yaml:"enabled"`
	bmp.Configuration `yaml:",inline"`
}

// DefaultSourcesConfiguration returns an empty RIB with BMP disabled.
func DefaultSourcesConfiguration() SourcesConfiguration {
	return SourcesConfiguration{
		RIB: rib.DefaultConfiguration(),
		BMP: BMPSource{Configuration: bmp.DefaultConfiguration()},
	}
}

// Validate checks the configuration and names the bad key.
func (c *SourcesConfiguration) Validate() error {
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

// Sources is the RIB with its feeds: what the collector starts and stops, and what Enricher
// and the HTTP lookup API read.
type Sources struct {
	RIB *rib.RIB
	// BMP is nil when disabled.
	BMP *bmp.Server

	cfg  SourcesConfiguration
	mrt  *mrt.Metrics
	log  *slog.Logger
	mu   sync.Mutex
	drop *time.Timer
}

// NewSources builds the RIB and the BMP listener (not started). Metrics go to reg.
func NewSources(reg prometheus.Registerer, cfg SourcesConfiguration, logger *slog.Logger) (*Sources, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	r, err := rib.New(reg, cfg.RIB)
	if err != nil {
		return nil, err
	}
	m, err := mrt.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("mrt metrics: %w", err)
	}
	s := &Sources{RIB: r, cfg: cfg, mrt: m, log: logger}
	if cfg.BMP.Enabled {
		if s.BMP, err = bmp.New(reg, cfg.BMP.Configuration, r, logger); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Start loads the snapshot, then the MRT files, then starts the BMP listener. An MRT file
// that cannot be read is an error (a typo in the configuration); corrupt records inside are
// skipped and counted by the loader.
func (s *Sources) Start() error {
	if err := s.RIB.Start(); err != nil {
		return err
	}
	for _, f := range s.cfg.MRT {
		st, err := mrt.LoadFile(s.RIB, f, mrt.Options{Metrics: s.mrt})
		if err != nil {
			return fmt.Errorf("loading MRT %s: %w", f, err)
		}
		s.log.Info("MRT loaded", "file", f, "entries", st.RIBEntries, "updates", st.Updates,
			"corrupt", st.Corrupt, "duration", st.Duration.Round(time.Millisecond))
	}
	if s.BMP == nil {
		return nil
	}
	if err := s.BMP.Start(); err != nil {
		return err
	}
	if s.cfg.MRTKeep > 0 {
		s.mu.Lock()
		s.drop = time.AfterFunc(s.cfg.MRTKeep, s.dropMRT)
		s.mu.Unlock()
	}
	return nil
}

// dropMRT removes the routes of the peers that did not come from BMP.
func (s *Sources) dropMRT() {
	peers := s.RIB.Peers() // before Begin: it takes the writer lock too
	tx := s.RIB.Begin()
	n := 0
	for _, p := range peers {
		if !p.Router.IsValid() && p.Routes > 0 {
			tx.RemovePeer(p.ID)
			n++
		}
	}
	tx.Commit()
	s.log.Info("MRT routes removed, BMP only from now on", "peers", n)
}

// Stop stops the BMP listener and saves the RIB snapshot.
func (s *Sources) Stop() error {
	s.mu.Lock()
	if s.drop != nil {
		s.drop.Stop()
	}
	s.mu.Unlock()
	if s.BMP != nil {
		if err := s.BMP.Stop(); err != nil {
			s.log.Warn("BMP stop", "error", err)
		}
	}
	return s.RIB.Stop()
}

// Used tells whether anything feeds the RIB (a snapshot, MRT dumps or BMP); without it, the
// collector skips enrichment altogether.
func (c *SourcesConfiguration) Used() bool {
	return c.RIB.Snapshot != "" || len(c.MRT) > 0 || c.BMP.Enabled
}
