package rib_test

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/config"
	"flowzero/internal/health"
	"flowzero/internal/testdata"
	"flowzero/rib"
	"flowzero/rib/bgp"
	"flowzero/rib/mrt"
)

var (
	a = netip.MustParseAddr
	p = netip.MustParsePrefix
)

func attrs(nh string, lp uint32, path ...uint32) *bgp.Attributes {
	return &bgp.Attributes{ASPath: path, ASPathLength: uint16(len(path)), NextHop: a(nh),
		LocalPref: lp, HasLocalPref: lp != 0, Origin: bgp.OriginIGP}
}

func TestSelection(t *testing.T) {
	for _, tc := range []struct {
		cfg  rib.Configuration
		want string // next hop of the selected route for 10.0.0.1
	}{
		{rib.Configuration{Selection: "first"}, "192.0.2.1"},
		{rib.Configuration{Selection: "best"}, "192.0.2.3"}, // highest LOCAL_PREF wins over shorter path
		{rib.Configuration{Selection: "peer", Peer: "192.0.2.2"}, "192.0.2.2"},
	} {
		t.Run(tc.cfg.Selection, func(t *testing.T) {
			r := rib.NewTable(tc.cfg)
			tx := r.Begin()
			p1 := tx.Peer(rib.PeerKey{Address: a("192.0.2.1"), AS: 65001}, netip.Addr{})
			p2 := tx.Peer(rib.PeerKey{Address: a("192.0.2.2"), AS: 65002}, netip.Addr{})
			p3 := tx.Peer(rib.PeerKey{Address: a("192.0.2.3"), AS: 65003}, netip.Addr{})
			tx.Add(p1, p("10.0.0.0/8"), 0, attrs("192.0.2.1", 0, 65001, 1, 2, 3))
			tx.Add(p2, p("10.0.0.0/8"), 0, attrs("192.0.2.2", 0, 65002, 3))
			tx.Add(p3, p("10.0.0.0/8"), 0, attrs("192.0.2.3", 200, 65003, 4, 5, 6, 3))
			tx.Add(p2, p("10.1.0.0/16"), 0, attrs("192.0.2.2", 0, 65002, 7))
			tx.Commit()
			rt, ok := r.Lookup(a("10.0.0.1"))
			if !ok || rt.Attrs.NextHop != a(tc.want) || rt.Bits != 8 {
				t.Errorf("10.0.0.1: %+v", rt)
			}
			// Longest match, only p2 has it.
			rt, ok = r.Lookup(a("10.1.2.3"))
			if !ok || rt.Peer != p2 || rt.Attrs.OriginAS() != 7 || rt.OriginAS != 7 || rt.Prefix(a("10.1.2.3")) != p("10.1.0.0/16") {
				t.Errorf("10.1.2.3: %+v", rt)
			}
		})
	}
}

func TestBestPathSteps(t *testing.T) {
	r := rib.NewTable(rib.Configuration{Selection: "best"})
	p1 := r.Peer(rib.PeerKey{Address: a("192.0.2.9")}, netip.Addr{})
	p2 := r.Peer(rib.PeerKey{Address: a("192.0.2.1")}, netip.Addr{})
	x, y := attrs("192.0.2.9", 0, 1, 2), attrs("192.0.2.1", 0, 3, 2)
	// Tie down to MED: lower MED wins.
	x.MED, x.HasMED, y.MED, y.HasMED = 10, true, 20, true
	r.Add(p1, p("10.0.0.0/8"), 0, x)
	r.Add(p2, p("10.0.0.0/8"), 0, y)
	if rt, _ := r.Lookup(a("10.0.0.1")); rt.Peer != p1 {
		t.Errorf("MED: selected peer %d", rt.Peer)
	}
	// Lower ORIGIN wins over MED.
	x.Origin = bgp.OriginIncomplete
	r.Add(p1, p("10.0.0.0/8"), 0, x)
	if rt, _ := r.Lookup(a("10.0.0.1")); rt.Peer != p2 {
		t.Errorf("ORIGIN: selected peer %d", rt.Peer)
	}
	// Full tie: lowest peer address.
	x.Origin, x.MED = bgp.OriginIGP, 20
	r.Add(p1, p("10.0.0.0/8"), 0, x)
	if rt, _ := r.Lookup(a("10.0.0.1")); rt.Peer != p2 {
		t.Errorf("tie: selected peer %d", rt.Peer)
	}
}

func TestWithdrawAndRemovePeer(t *testing.T) {
	r := rib.NewTable(rib.DefaultConfiguration())
	p1 := r.Peer(rib.PeerKey{Address: a("192.0.2.1")}, netip.Addr{})
	p2 := r.Peer(rib.PeerKey{Address: a("2001:db8::2")}, netip.Addr{})
	shared := attrs("192.0.2.1", 0, 65001, 65100)
	tx := r.Begin()
	for i := range 100 {
		pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)
		tx.Add(p1, pfx, 0, shared)
		tx.Add(p2, pfx, 0, attrs("2001:db8::2", 0, 65002, 65100))
	}
	// Add-Path: a second path of p1 for one prefix.
	tx.Add(p1, p("10.5.0.0/16"), 1, attrs("192.0.2.11", 0, 65001, 65200))
	tx.Add(p1, p("2001:db8:1::/48"), 0, attrs("2001:db8::1", 0, 65001))
	tx.Commit()
	st := r.Stats()
	if st.Prefixes4 != 100 || st.Prefixes6 != 1 || st.Routes != 202 || st.AttributeSets != 4 {
		t.Fatalf("stats %+v", st)
	}
	if got := len(r.Paths(a("10.5.1.1"))); got != 3 {
		t.Errorf("10.5.1.1: %d paths", got)
	}
	r.Withdraw(p1, p("10.5.0.0/16"), 1)
	r.Withdraw(p1, p("10.5.0.0/16"), 7) // unknown path ID: no-op
	if st := r.Stats(); st.Routes != 201 || st.AttributeSets != 3 {
		t.Errorf("after withdraw %+v", st)
	}
	r.RemovePeer(p1)
	st = r.Stats()
	if st.Prefixes4 != 100 || st.Prefixes6 != 0 || st.Routes != 100 || st.AttributeSets != 1 {
		t.Errorf("after peer removal %+v", st)
	}
	if rt, ok := r.Lookup(a("10.7.0.1")); !ok || rt.Peer != p2 || rt.Attrs.NextHop != a("2001:db8::2") {
		t.Errorf("10.7.0.1 after peer removal: %+v", rt)
	}
	if _, ok := r.Lookup(a("2001:db8:1::1")); ok {
		t.Error("IPv6 route of the removed peer still there")
	}
	r.RemovePeer(p2)
	if st := r.Stats(); st.Prefixes4 != 0 || st.Routes != 0 || st.AttributeSets != 0 {
		t.Errorf("empty table %+v", st)
	}
}

func TestLookupZeroAllocs(t *testing.T) {
	r := rib.NewTable(rib.DefaultConfiguration())
	id := r.Peer(rib.PeerKey{Address: a("192.0.2.1")}, netip.Addr{})
	r.Add(id, p("10.0.0.0/8"), 0, attrs("192.0.2.1", 0, 1, 2))
	r.Add(id, p("2001:db8::/32"), 0, attrs("192.0.2.1", 0, 1, 3))
	var sink uint32
	allocs := testing.AllocsPerRun(1000, func() {
		rt, _ := r.Lookup(a("10.1.2.3"))
		sink += rt.Attrs.OriginAS()
		rt, _ = r.Lookup(a("2001:db8::1"))
		sink += rt.Attrs.OriginAS()
	})
	if allocs != 0 || sink == 0 {
		t.Errorf("%v allocations per lookup", allocs)
	}
}

// TestPeerAS: a peer's AS is published with the commit that makes its first route visible,
// so a reader that finds a route also finds its peer's AS, without a lock.
func TestPeerAS(t *testing.T) {
	r := rib.NewTable(rib.DefaultConfiguration())
	if as := r.PeerAS(0); as != 0 {
		t.Fatalf("PeerAS of an empty table = %d", as)
	}
	first := r.Peer(rib.PeerKey{Address: a("192.0.2.1"), AS: 64500}, netip.Addr{})
	if as := r.PeerAS(first); as != 64500 {
		t.Errorf("PeerAS after Peer = %d, want 64500", as)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if rt, ok := r.Lookup(a("10.1.1.1")); ok && r.PeerAS(rt.Peer) != 64501 {
				t.Errorf("route of peer %d found before its AS", rt.Peer)
				return
			}
		}
	})
	tx := r.Begin()
	second := tx.Peer(rib.PeerKey{Address: a("192.0.2.2"), AS: 64501}, netip.Addr{})
	tx.Add(second, p("10.0.0.0/8"), 0, attrs("192.0.2.2", 0))
	tx.Commit()
	stop.Store(true)
	wg.Wait()
	if as := r.PeerAS(second); as != 64501 {
		t.Errorf("PeerAS after the commit = %d, want 64501", as)
	}
	if as := r.PeerAS(second + 1); as != 0 {
		t.Errorf("PeerAS of an unknown ID = %d, want 0", as)
	}
	if n := testing.AllocsPerRun(1000, func() { r.PeerAS(first) }); n != 0 {
		t.Errorf("%v allocations per PeerAS", n)
	}
}

// TestConcurrentLookups runs readers while a writer adds and withdraws (run with -race):
// readers always see a consistent route (its prefix length matches its attributes).
func TestConcurrentLookups(t *testing.T) {
	r := rib.NewTable(rib.DefaultConfiguration())
	id := r.Peer(rib.PeerKey{Address: a("192.0.2.1")}, netip.Addr{})
	r.Add(id, p("10.0.0.0/8"), 0, attrs("192.0.2.1", 0, 8))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var lookups atomic.Int64
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				for i := range 256 {
					rt, ok := r.Lookup(netip.AddrFrom4([4]byte{10, byte(i), 1, 1}))
					if !ok || uint32(rt.Bits) != rt.Attrs.OriginAS() {
						t.Errorf("inconsistent route %+v", rt)
						return
					}
				}
				lookups.Add(256)
			}
		})
	}
	for round := range 10 {
		tx := r.Begin()
		for i := range 256 {
			pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)
			if round%2 == 0 {
				tx.Add(id, pfx, 0, attrs("192.0.2.1", 0, 16))
			} else {
				tx.Withdraw(id, pfx, 0)
			}
		}
		tx.Commit()
	}
	stop.Store(true)
	wg.Wait()
	if lookups.Load() == 0 {
		t.Error("no lookups ran")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	r := rib.NewTable(rib.DefaultConfiguration())
	// Part of the 2002 dump (2-octet paths, communities, MED), then the 2016 updates (IPv6,
	// 40 peers, withdrawals, sessions going down).
	if _, err := mrt.LoadFile(r, testdata.Path(t, "rib", "ripe-bgpdump-bview.20020722.2337.gz"), mrt.Options{MaxRecords: 10000}); err != nil {
		t.Fatal(err)
	}
	if _, err := mrt.LoadFile(r, testdata.Path(t, "rib", "ripe-bgpdump-updates.20160811.1600.gz"), mrt.Options{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rib.snapshot")
	if err := r.SaveSnapshotFile(file); err != nil {
		t.Fatal(err)
	}
	r2 := rib.NewTable(rib.DefaultConfiguration())
	if err := r2.LoadSnapshotFile(file); err != nil {
		t.Fatal(err)
	}
	if s1, s2 := r.Stats(), r2.Stats(); s1 != s2 {
		t.Fatalf("stats %+v after reload, want %+v", s2, s1)
	}
	if !slices.EqualFunc(r.Peers(), r2.Peers(), func(x, y rib.PeerInfo) bool { return x == y }) {
		t.Error("peers differ")
	}
	n := 0
	for pfx, rt := range r.All() {
		rt2, ok := r2.LookupPrefix(pfx)
		if !ok || rt2.Bits != rt.Bits || rt2.Peer != rt.Peer || !rt2.Attrs.Equal(rt.Attrs) || rt2.OriginAS != rt.Attrs.OriginAS() {
			t.Fatalf("%s: %+v after reload, want %+v", pfx, rt2, rt)
		}
		if n%100 == 0 {
			ps1, ps2 := r.Paths(pfx.Addr()), r2.Paths(pfx.Addr())
			if len(ps1) != len(ps2) {
				t.Fatalf("%s: %d paths after reload, want %d", pfx, len(ps2), len(ps1))
			}
		}
		n++
	}
	if st := r.Stats(); n != st.Prefixes4+st.Prefixes6 || n < 10000 {
		t.Errorf("%d prefixes compared", n)
	}
	// A damaged snapshot is an error, not a panic, and leaves a usable table.
	var buf bytes.Buffer
	if err := r.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	for _, cut := range []int{5, 9, 100, len(data) / 2, len(data) - 3} {
		r3 := rib.NewTable(rib.DefaultConfiguration())
		if err := r3.ReadSnapshot(bytes.NewReader(data[:cut])); err == nil {
			t.Errorf("snapshot cut at %d accepted", cut)
		}
	}
}

// snapshotOf returns the snapshot of a table holding the first 20,000 records of the 2002 dump.
func snapshotOf(t *testing.T) (*rib.RIB, []byte) {
	t.Helper()
	r := rib.NewTable(rib.DefaultConfiguration())
	if _, err := mrt.LoadFile(r, testdata.Path(t, "rib", "ripe-bgpdump-bview.20020722.2337.gz"), mrt.Options{MaxRecords: 20000}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return r, buf.Bytes()
}

// TestSnapshotCorruptLeavesTableUntouched checks that a snapshot cut short (a crash during a
// copy, a full disk) or with a flipped bit (found only by zstd's content checksum at the end)
// is refused whole: not one of its routes reaches the table.
func TestSnapshotCorruptLeavesTableUntouched(t *testing.T) {
	_, data := snapshotOf(t)
	fresh := func() (*rib.RIB, rib.Stats) {
		// A table already holding a route: it must keep exactly that.
		r := rib.NewTable(rib.DefaultConfiguration())
		r.Add(r.Peer(rib.PeerKey{Address: a("192.0.2.1")}, netip.Addr{}), p("203.0.113.0/24"), 0, attrs("192.0.2.1", 0, 65001))
		return r, r.Stats()
	}
	for _, cut := range []int{len(data) / 4, len(data) / 2, len(data) * 3 / 4, len(data) - 3} {
		r, before := fresh()
		err := r.ReadSnapshot(bytes.NewReader(data[:cut]))
		if err == nil {
			t.Errorf("snapshot cut at %d of %d accepted", cut, len(data))
		}
		if st := r.Stats(); st != before {
			t.Errorf("snapshot cut at %d (%v): table %+v, want %+v", cut, err, st, before)
		}
	}
	refused := 0
	for i := range 200 {
		d := bytes.Clone(data)
		pos := 20 + (len(d)-40)*i/200
		d[pos] ^= 0x01
		r, before := fresh()
		err := r.ReadSnapshot(bytes.NewReader(d))
		if err == nil {
			continue
		}
		refused++
		if st := r.Stats(); st != before {
			t.Errorf("bit flipped at %d (%v): table %+v, want %+v", pos, err, st, before)
		}
	}
	if refused < 190 {
		t.Errorf("%d of 200 snapshots with a flipped bit refused", refused)
	}
}

// TestCorruptSnapshotStartsEmpty checks what Start documents: a corrupt snapshot is counted
// and the RIB starts empty.
func TestCorruptSnapshotStartsEmpty(t *testing.T) {
	_, data := snapshotOf(t)
	file := filepath.Join(t.TempDir(), "rib.snapshot")
	if err := os.WriteFile(file, data[:len(data)*3/4], 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := rib.DefaultConfiguration()
	cfg.Snapshot = file
	cfg.SnapshotInterval = 0
	reg := prometheus.NewRegistry()
	r, err := rib.New(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Routes != 0 || st.Peers != 0 || st.AttributeSets != 0 {
		t.Errorf("RIB after a truncated snapshot: %+v, want empty", st)
	}
	if v := gathered(t, reg, "flowzero_rib_snapshot_errors_total"); v != 1 {
		t.Errorf("snapshot errors = %v, want 1", v)
	}
	// Degraded in /healthz until a snapshot saves (over the corrupt one).
	if h := r.Health(); h.Status != health.Degraded || !strings.Contains(h.Reason, "snapshot not loaded") || h.Counters["snapshot-errors"] != 1 {
		t.Errorf("health after the corrupt snapshot: %+v", h)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if h := r.Health(); h.Status != health.OK || h.Counters["snapshot-saves"] != 1 {
		t.Errorf("health after a snapshot saved: %+v", h)
	}
}

// gathered returns the value of an unlabelled metric of reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestSaveSnapshotFileReplaces checks that a save over an older snapshot leaves the new one
// complete and nothing else in the directory, and that a failed save is counted.
func TestSaveSnapshotFileReplaces(t *testing.T) {
	r, _ := snapshotOf(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "rib.snapshot")
	if err := os.WriteFile(file, []byte("an older snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.SaveSnapshotFile(file); err != nil {
		t.Fatal(err)
	}
	r2 := rib.NewTable(rib.DefaultConfiguration())
	if err := r2.LoadSnapshotFile(file); err != nil {
		t.Fatal(err)
	}
	if s1, s2 := r.Stats(), r2.Stats(); s1 != s2 {
		t.Errorf("saved snapshot loads as %+v, want %+v", s2, s1)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %v, want the snapshot alone", entries)
	}
	// A directory that cannot be created (a file is in the way): the save fails, and the
	// RIB is degraded until the next save succeeds.
	if err := r.SaveSnapshotFile(filepath.Join(file, "rib.snapshot")); err == nil {
		t.Error("save under a file succeeded")
	}
	if h := r.Health(); h.Status != health.Degraded || !strings.Contains(h.Reason, "snapshot not saved") {
		t.Errorf("health after a failed save: %+v", h)
	}
	if err := r.SaveSnapshotFile(file); err != nil {
		t.Fatal(err)
	}
	if h := r.Health(); h.Status != health.OK {
		t.Errorf("health after a save: %+v", h)
	}
}

func TestConfiguration(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"selection: fastest", "selection"},
		{"selection: peer", "peer"},
		{"selection: peer\npeer: router1", "peer"},
		{"snapshot-interval: -1s", "snapshot-interval"},
	} {
		cfg := rib.DefaultConfiguration()
		err := config.Decode([]byte(tc.yaml), &cfg)
		var ke *config.KeyError
		if err == nil || !errors.As(err, &ke) || ke.Key != tc.key {
			t.Errorf("%q: %v, want an error on %s", tc.yaml, err, tc.key)
		}
	}
	cfg := rib.DefaultConfiguration()
	if err := config.Decode([]byte("selection: best\nsnapshot: /tmp/x\nsnapshot-interval: 1m"), &cfg); err != nil {
		t.Error(err)
	}
}

func TestComponentSnapshot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rib.snapshot")
	cfg := rib.DefaultConfiguration()
	cfg.Snapshot = file
	r, err := rib.New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil { // no snapshot yet: starts empty
		t.Fatal(err)
	}
	r.Add(r.Peer(rib.PeerKey{Address: a("192.0.2.1")}, netip.Addr{}), p("10.0.0.0/8"), 0, attrs("192.0.2.1", 0, 65001))
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	r2, _ := rib.New(nil, cfg)
	if err := r2.Start(); err != nil {
		t.Fatal(err)
	}
	defer r2.Stop()
	if rt, ok := r2.Lookup(a("10.1.1.1")); !ok || rt.Attrs.OriginAS() != 65001 {
		t.Errorf("after restart: %+v", rt)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := rib.New(reg, rib.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	id := r.Peer(rib.PeerKey{Address: a("192.0.2.1")}, netip.Addr{})
	r.Add(id, p("10.0.0.0/8"), 0, attrs("192.0.2.1", 0, 65001))
	r.Add(id, p("2001:db8::/32"), 0, attrs("192.0.2.1", 0, 65001))
	r.Withdraw(id, p("2001:db8::/32"), 0)
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"flowzero_rib_prefixes/ipv4": 1, "flowzero_rib_prefixes/ipv6": 0, "flowzero_rib_routes": 1,
		"flowzero_rib_attribute_sets": 1, "flowzero_rib_peers": 1, "flowzero_rib_adds_total": 2,
		"flowzero_rib_withdraws_total": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func FuzzRIBSnapshot(f *testing.F) {
	r := rib.NewTable(rib.DefaultConfiguration())
	if _, err := mrt.LoadFile(r, testdata.Path(f, "rib", "ripe-bgpdump-updates.20160811.1600.gz"), mrt.Options{MaxRecords: 300}); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.WriteSnapshot(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		r := rib.NewTable(rib.DefaultConfiguration())
		if err := r.ReadSnapshot(bytes.NewReader(data)); err != nil {
			return
		}
		st := r.Stats()
		n := 0
		for _, rt := range r.All() {
			if rt.Attrs == nil || int(rt.Peer) >= st.Peers {
				t.Fatalf("bad route %+v", rt)
			}
			n++
		}
		if n != st.Prefixes4+st.Prefixes6 {
			t.Fatalf("%d routes for %+v", n, st)
		}
	})
}
