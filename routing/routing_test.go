package routing

import (
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/config"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/rib"
	"flowzero/rib/bmp"
	"flowzero/routing/routingtest"
)

func quiet() Dependencies {
	return Dependencies{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// start runs the component with the real RIPE BGP4MP updates (MRT) and replays the Juniper
// vMX BMP captures into its listener over TCP, returning once the last BMP route is in.
func start(t *testing.T, reg prometheus.Registerer, tweak func(*Configuration)) *Component {
	t.Helper()
	cfg := DefaultConfiguration()
	cfg.RIB.Selection = "best"
	cfg.MRT = []string{testdata.Path(t, "rib", "ripe-bgpdump-updates.20160811.1600.gz")}
	cfg.BMP.Enabled = true
	cfg.BMP.Listen = "127.0.0.1:0"
	cfg.BMP.RDs = []bmp.RD{0} // the global table only: VPN routes stay out
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := New(reg, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	routingtest.ReplayBMP(t, c.BMPAddr(), c.Lookup)
	return c
}

// TestLookup reads MRT and BMP routes through the Lookup interface, as enrichment does.
func TestLookup(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := start(t, reg, nil)
	var l Lookup = c
	// MRT (RIPE updates): 12.231.178.0/24, origin AS 6318.
	if r, ok := l.Lookup(netip.MustParseAddr("12.231.178.10")); !ok || r.Bits != 24 || r.OriginAS != 6318 {
		t.Errorf("12.231.178.10: %+v %v, want a /24 originated by AS 6318", r, ok)
	}
	// BMP: 198.51.100.128/25 via 192.0.2.1, origin AS 396919; as IPv4-mapped IPv6 too.
	for _, a := range []string{"198.51.100.200", "::ffff:198.51.100.200"} {
		if r, ok := l.Lookup(netip.MustParseAddr(a)); !ok || r.Bits != 25 || r.OriginAS != 396919 {
			t.Errorf("%s: %+v %v, want a /25 originated by AS 396919", a, r, ok)
		}
	}
	// BMP Add-Path route with an empty AS path: its origin is its peer's AS (iBGP, 65500).
	r, ok := l.Lookup(netip.MustParseAddr("192.0.2.5"))
	if !ok || len(r.Attrs.ASPath) != 0 || r.OriginAS != 0 {
		t.Fatalf("192.0.2.5: %+v %v, want a route with an empty AS path", r, ok)
	}
	if as := l.PeerAS(r.Peer); as != 65500 {
		t.Errorf("PeerAS of 192.0.2.5's peer = %d, want 65500", as)
	}
	if as := l.PeerAS(rib.PeerID(1 << 20)); as != 0 {
		t.Errorf("PeerAS of an unknown peer = %d, want 0", as)
	}
	if _, ok := l.Lookup(netip.MustParseAddr("10.255.255.1")); ok {
		t.Error("10.255.255.1 found: neither source announces it")
	}
	if a := testing.AllocsPerRun(1000, func() {
		r, _ := l.Lookup(netip.MustParseAddr("198.51.100.200"))
		l.PeerAS(r.Peer)
	}); a != 0 {
		t.Errorf("%v allocations per lookup, want 0", a)
	}
	if n := promtest.ToFloat64(c.metrics.mrtEntries.WithLabelValues(c.cfg.MRT[0])); n == 0 {
		t.Error("flowzero_routing_mrt_entries is 0 for the dump loaded")
	}
}

// TestMRTKeep: with mrt-keep, the MRT peers' routes go once it ends; BMP's stay.
func TestMRTKeep(t *testing.T) {
	c := start(t, prometheus.NewRegistry(), func(c *Configuration) { c.MRTKeep = 300 * time.Millisecond })
	testutil.WaitUntil(t, "the MRT routes to go after mrt-keep", func() bool {
		_, ok := c.Lookup(netip.MustParseAddr("12.231.178.10"))
		return !ok
	})
	if _, ok := c.Lookup(netip.MustParseAddr("198.51.100.200")); !ok {
		t.Error("BMP routes removed with the MRT ones")
	}
	if n := promtest.ToFloat64(c.metrics.mrtExpired); n == 0 {
		t.Error("flowzero_routing_mrt_removed_peers_total is 0 after mrt-keep")
	}
}

// TestMRTCorruptCounted loads a dump whose only record, a BGP4MP message, has an unknown AFI:
// the component counts it in Prometheus.
func TestMRTCorruptCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corrupt.mrt")
	// Header: timestamp, type 16 (BGP4MP), subtype 4 (MESSAGE_AS4), length 12; body: peer AS,
	// local AS, interface index, AFI 9.
	rec := []byte{0, 0, 0, 0, 0, 16, 0, 4, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 9}
	if err := os.WriteFile(path, rec, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.MRT = []string{path}
	reg := prometheus.NewRegistry()
	c, err := New(reg, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	want := `
# HELP flowzero_mrt_corrupt_records_total MRT records skipped because they are malformed, and files whose framing broke (the rest of the file is not read).
# TYPE flowzero_mrt_corrupt_records_total counter
flowzero_mrt_corrupt_records_total 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "flowzero_mrt_corrupt_records_total"); err != nil {
		t.Error(err)
	}
}

// TestMRTMissing: a dump that cannot be read is an error naming it (a typo in the
// configuration), not an empty table.
func TestMRTMissing(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.MRT = []string{filepath.Join(t.TempDir(), "missing.mrt")}
	c, err := New(nil, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.Start(); err == nil || !strings.Contains(err.Error(), cfg.MRT[0]) {
		t.Fatalf("Start with a missing dump: %v, want an error naming %s", err, cfg.MRT[0])
	}
}

func TestConfiguration(t *testing.T) {
	cfg := DefaultConfiguration()
	if cfg.Used() {
		t.Error("the default configuration feeds the RIB")
	}
	err := config.Decode([]byte("mrt-keep: 1m\n"), &cfg)
	if err == nil || err.Error() != "configuration: mrt-keep: needs bmp.enabled: nothing would replace the MRT routes" {
		t.Errorf("mrt-keep without BMP: %v", err)
	}
	cfg = DefaultConfiguration()
	if err := config.Decode([]byte("bmp:\n  enabled: true\n  listen: \"[::]:10179\"\n  rds: [\"0:0\", \"65017:101\"]\n  keep: 10m\nmrt: [a.mrt]\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.BMP.Enabled || cfg.BMP.Listen != "[::]:10179" || len(cfg.BMP.RDs) != 2 || cfg.BMP.RDs[1].String() != "65017:101" ||
		cfg.BMP.Keep != 10*time.Minute || !cfg.Used() {
		t.Errorf("decoded %+v", cfg)
	}
	cfg = DefaultConfiguration()
	if err := config.Decode([]byte("bmp:\n  enabled: true\n  keep: 10ms\n"), &cfg); err == nil || err.Error() != "configuration: bmp.keep: 10ms is below 1s" {
		t.Errorf("bmp.keep 10ms: %v", err)
	}
	cfg = DefaultConfiguration()
	if err := config.Decode([]byte("rib:\n  selection: worst\n"), &cfg); err == nil || !strings.HasPrefix(err.Error(), "configuration: rib.selection:") {
		t.Errorf("rib.selection worst: %v", err)
	}
}
