// Package routing is the component that keeps the in-process RIB (flowzero/rib) fed and
// answers enrichment's lookups: it loads the RIB snapshot, then the MRT dumps (rib/mrt), then
// runs the BMP listener (rib/bmp) that keeps the table live, and stops them in reverse order.
//
// # Design
//
// As in Akvorado's routing component, enrichment depends on the Lookup interface, not on how
// routes arrive: a RIB fed by MRT, BMP or both, or a test's own table, all answer it. The
// lookup path is the RIB's: one atomic pointer load and a walk of an immutable trie, no lock
// and no allocation, so the interface costs one indirect call per lookup and nothing else.
// The component itself only runs at start and stop (and once more when mrt-keep ends).
package routing

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/health"
	"flowzero/rib"
	"flowzero/rib/bmp"
	"flowzero/rib/mrt"
)

// Lookup is what enrichment reads routes from. Both methods are called for every flow, from
// several goroutines, while the table changes: they must not block or allocate.
type Lookup interface {
	// Lookup returns the route selected for the longest prefix containing a (IPv4-mapped
	// IPv6 addresses are looked up as IPv4).
	Lookup(a netip.Addr) (rib.Route, bool)
	// PeerAS returns the AS number of the peer a route came from, the origin AS of a route
	// with an empty AS path.
	PeerAS(id rib.PeerID) uint32
}

var (
	_ Lookup = (*rib.RIB)(nil)
	_ Lookup = (*Component)(nil)
)

// Dependencies are what the component needs besides its configuration.
type Dependencies struct {
	// Logger receives the component's, the BMP listener's and the loads' messages
	// (slog.Default() when nil).
	Logger *slog.Logger
}

// Component is the RIB with its feeds.
type Component struct {
	cfg     Configuration
	rib     *rib.RIB
	bmp     *bmp.Server // nil when disabled
	mrt     *mrt.Metrics
	metrics *metrics
	log     *slog.Logger

	mu      sync.Mutex
	mrtDrop *time.Timer // mrt-keep's end
}

// New builds the RIB and the BMP listener (not started); metrics go to reg (nil for none).
func New(reg prometheus.Registerer, cfg Configuration, deps Dependencies) (*Component, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	r, err := rib.New(reg, cfg.RIB)
	if err != nil {
		return nil, err
	}
	m, err := mrt.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("mrt metrics: %w", err)
	}
	own, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("routing metrics: %w", err)
	}
	c := &Component{cfg: cfg, rib: r, mrt: m, metrics: own, log: log}
	if cfg.BMP.Enabled {
		if c.bmp, err = bmp.New(reg, cfg.BMP.Configuration, r, log); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Start loads the snapshot, then the MRT files, then starts the BMP listener. An MRT file
// that cannot be read is an error (a typo in the configuration); corrupt records inside are
// skipped and counted by the loader.
func (c *Component) Start() error {
	if err := c.rib.Start(); err != nil {
		return err
	}
	for _, f := range c.cfg.MRT {
		st, err := mrt.LoadFile(c.rib, f, mrt.Options{Metrics: c.mrt})
		if err != nil {
			return fmt.Errorf("loading MRT %s: %w", f, err)
		}
		c.metrics.mrtEntries.WithLabelValues(f).Set(float64(st.RIBEntries + st.Updates))
		c.metrics.mrtSeconds.WithLabelValues(f).Set(st.Duration.Seconds())
		c.log.Info("MRT loaded", "file", f, "entries", st.RIBEntries, "updates", st.Updates,
			"corrupt", st.Corrupt, "duration", st.Duration.Round(time.Millisecond))
	}
	if c.bmp == nil {
		return nil
	}
	if err := c.bmp.Start(); err != nil {
		return err
	}
	if c.cfg.MRTKeep > 0 {
		c.mu.Lock()
		c.mrtDrop = time.AfterFunc(c.cfg.MRTKeep, c.dropMRT)
		c.mu.Unlock()
	}
	return nil
}

// dropMRT removes the routes of the peers that did not come from BMP (mrt-keep ended).
func (c *Component) dropMRT() {
	peers := c.rib.Peers() // before Begin: it takes the writer lock too
	tx := c.rib.Begin()
	n := 0
	for _, p := range peers {
		if !p.Router.IsValid() && p.Routes > 0 {
			tx.RemovePeer(p.ID)
			n++
		}
	}
	tx.Commit()
	c.metrics.mrtExpired.Add(float64(n))
	c.log.Info("MRT routes removed, BMP only from now on", "peers", n)
}

// Stop stops the BMP listener and saves the RIB snapshot.
func (c *Component) Stop() error {
	c.mu.Lock()
	if c.mrtDrop != nil {
		c.mrtDrop.Stop()
	}
	c.mu.Unlock()
	if c.bmp != nil {
		if err := c.bmp.Stop(); err != nil {
			c.log.Warn("BMP stop", "error", err)
		}
	}
	return c.rib.Stop()
}

// Lookup implements Lookup with the RIB's lock-free lookup.
func (c *Component) Lookup(a netip.Addr) (rib.Route, bool) { return c.rib.Lookup(a) }

// PeerAS implements Lookup.
func (c *Component) PeerAS(id rib.PeerID) uint32 { return c.rib.PeerAS(id) }

// HealthReporters are the parts /healthz asks for their state: the RIB (its snapshot loads
// and saves) and, when enabled, the BMP listener (its routers' sessions).
func (c *Component) HealthReporters() []health.Reporter {
	rs := []health.Reporter{c.rib}
	if c.bmp != nil {
		rs = append(rs, c.bmp)
	}
	return rs
}

// RIB returns the routing table, for what needs more than Lookup (the HTTP lookup API, the
// CLI, tests that add routes).
func (c *Component) RIB() *rib.RIB { return c.rib }

// BMPAddr returns the address the BMP listener is bound to (useful with port 0), or nil when
// BMP is disabled or not started.
func (c *Component) BMPAddr() net.Addr {
	if c.bmp == nil {
		return nil
	}
	return c.bmp.Addr()
}
