package geoip

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/testdata"
	fztestutil "flowzero/internal/testutil"
)

func open(t testing.TB, name string) *Database {
	t.Helper()
	db, err := Open(testdata.Path(t, "geoip", name))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestLookup checks the values of MaxMind's test databases and IPinfo's samples, as their
// authors document them.
func TestLookup(t *testing.T) {
	cases := []struct {
		db, addr string
		layout   Layout
		want     Info
	}{
		{"GeoLite2-City-Test.mmdb", "81.2.69.142", LayoutMaxMind, Info{Country: "GB", State: "England", City: "London"}},
		{"GeoLite2-City-Test.mmdb", "2.125.160.216", LayoutMaxMind, Info{Country: "GB", State: "England", City: "Boxford"}},
		{"GeoLite2-City-Test.mmdb", "89.160.20.112", LayoutMaxMind, Info{Country: "SE", State: "Östergötland County", City: "Linköping"}},
		{"GeoLite2-City-Test.mmdb", "216.160.83.56", LayoutMaxMind, Info{Country: "US", State: "Washington", City: "Milton"}},
		{"GeoLite2-City-Test.mmdb", "2a02:ff00::1:1", LayoutMaxMind, Info{Country: "IT"}},
		{"GeoLite2-City-Test.mmdb", "::ffff:81.2.69.142", LayoutMaxMind, Info{Country: "GB", State: "England", City: "London"}},
		{"GeoLite2-City-Test.mmdb", "192.0.2.1", LayoutMaxMind, Info{}},
		{"GeoLite2-Country-Test.mmdb", "67.43.156.77", LayoutMaxMind, Info{Country: "BT"}},
		{"GeoLite2-Country-Test.mmdb", "89.160.20.112", LayoutMaxMind, Info{Country: "SE"}},
		{"GeoLite2-ASN-Test.mmdb", "1.0.0.1", LayoutMaxMind, Info{ASN: 15169}},
		{"GeoLite2-ASN-Test.mmdb", "1.128.0.1", LayoutMaxMind, Info{ASN: 1221}},
		{"GeoLite2-ASN-Test.mmdb", "89.160.20.112", LayoutMaxMind, Info{ASN: 29518}},
		{"ip_country_asn_sample.mmdb", "2.19.4.138", LayoutIPinfo, Info{Country: "SG", ASN: 32787}},
		{"ip_country_asn_sample.mmdb", "2a09:bac1:14a0:fd0::a:1", LayoutIPinfo, Info{Country: "CA", ASN: 13335}},
		{"ip_country_asn_sample.mmdb", "213.248.218.137", LayoutIPinfo, Info{Country: "HK", ASN: 43519}},
		{"ip_geolocation_sample.mmdb", "1.0.0.1", LayoutIPinfo, Info{Country: "AU", State: "Queensland", City: "Brisbane"}},
		{"ip_geolocation_sample.mmdb", "1.0.4.9", LayoutIPinfo, Info{Country: "AU", State: "Victoria", City: "Melbourne"}},
	}
	for _, c := range cases {
		t.Run(c.db+"/"+c.addr, func(t *testing.T) {
			db := open(t, c.db)
			if db.Layout != c.layout {
				t.Errorf("layout %s (database type %q), want %s", db.Layout, db.Type, c.layout)
			}
			got, err := db.Lookup(netip.MustParseAddr(c.addr))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Lookup(%s) = %+v, want %+v", c.addr, got, c.want)
			}
		})
	}
}

// TestEach checks that a walk gives every network once, with the value Lookup gives, and
// interns records shared by several networks.
func TestEach(t *testing.T) {
	db := open(t, "GeoLite2-ASN-Test.mmdb")
	n, distinct := 0, map[*Info]bool{}
	err := db.Each(func(p netip.Prefix, info *Info) {
		n++
		distinct[info] = true
		want, err := db.Lookup(p.Addr())
		if err != nil || want != *info {
			t.Errorf("%s: walk gave %+v, lookup %+v (%v)", p, *info, want, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// 412 networks in the file, their records at fewer offsets.
	if n != 412 {
		t.Errorf("%d networks, want 412", n)
	}
	if len(distinct) >= n {
		t.Errorf("%d records for %d networks: not interned", len(distinct), n)
	}
}

// TestLayer checks that the first database with a value wins, attribute by attribute, and
// that a network of one database nested in a network of another gets both.
func TestLayer(t *testing.T) {
	city, asn, ipinfo := open(t, "GeoLite2-City-Test.mmdb"), open(t, "GeoLite2-ASN-Test.mmdb"), open(t, "ip_country_asn_sample.mmdb")
	cases := []struct {
		name string
		dbs  []*Database
		addr string
		want Info
	}{
		{"city+asn", []*Database{city, asn}, "89.160.20.112", Info{Country: "SE", State: "Östergötland County", City: "Linköping", ASN: 29518}},
		{"city+asn/asn-only", []*Database{city, asn}, "1.0.0.1", Info{ASN: 15169}},
		{"city+asn/none", []*Database{city, asn}, "192.0.2.1", Info{}},
		// 23.33.103.241: IPinfo says AS32787 in a /29, MaxMind AS35994 in a larger network.
		{"asn-first", []*Database{asn, ipinfo}, "23.33.103.241", Info{Country: "US", ASN: 35994}},
		{"ipinfo-first", []*Database{ipinfo, asn}, "23.33.103.241", Info{Country: "US", ASN: 32787}},
		{"ipinfo-first/outside", []*Database{ipinfo, asn}, "23.33.103.1", Info{ASN: 35994}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := NewLayer(c.dbs)
			if err != nil {
				t.Fatal(err)
			}
			var got Info
			if v := l.Lookup(netip.MustParseAddr(c.addr)); v != nil {
				got = *v
			}
			if got != c.want {
				t.Errorf("Lookup(%s) = %+v, want %+v", c.addr, got, c.want)
			}
		})
	}
	var nilLayer *Layer
	if nilLayer.Lookup(netip.MustParseAddr("1.0.0.1")) != nil || nilLayer.Size() != 0 {
		t.Error("a nil layer answered")
	}
}

// TestDatabasesReload replaces a database file, then truncates it: the first change gives a
// new layer, the broken file keeps the previous one and counts an error.
func TestDatabasesReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "geo.mmdb")
	country, err := os.ReadFile(testdata.Path(t, "geoip", "GeoLite2-Country-Test.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	city, err := os.ReadFile(testdata.Path(t, "geoip", "GeoLite2-City-Test.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(b []byte, age time.Duration) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		mtime := fztestutil.Now().Add(-age)
		if err := os.Chtimes(path+".tmp", mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(country, time.Hour)
	reg := prometheus.NewRegistry()
	cfg := DefaultConfiguration()
	cfg.Databases = []string{path}
	d, err := New(reg, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var layers []*Layer
	if err := d.Start(func(l *Layer) { layers = append(layers, l) }); err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	london := netip.MustParseAddr("81.2.69.142")
	if len(layers) != 1 || *layers[0].Lookup(london) != (Info{Country: "GB"}) {
		t.Fatalf("after start: %d layers", len(layers))
	}
	if changed, err := d.Check(); changed || err != nil {
		t.Fatalf("unchanged file: Check() = %v, %v", changed, err)
	}

	write(city, 30*time.Minute)
	if changed, err := d.Check(); !changed || err != nil {
		t.Fatalf("changed file: Check() = %v, %v", changed, err)
	}
	if got := *d.Layer().Lookup(london); got != (Info{Country: "GB", State: "England", City: "London"}) {
		t.Errorf("after reload: %+v", got)
	}

	write(city[:len(city)/2], 10*time.Minute)
	if changed, err := d.Check(); changed || err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("truncated file: Check() = %v, %v; want an error naming the file", changed, err)
	}
	if got := d.Layer().Lookup(london).City; got != "London" {
		t.Errorf("after a failed reload, city %q: the previous layer should stay", got)
	}
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Err() = %v after a failed reload, want an error naming the file", err)
	}
	if got := testutil.ToFloat64(d.metrics.errors); got != 1 {
		t.Errorf("errors = %v, want 1", got)
	}
	if got := testutil.ToFloat64(d.metrics.reloads); got != 2 {
		t.Errorf("reloads = %v, want 2", got)
	}
	if len(layers) != 2 {
		t.Errorf("%d layers handed over, want 2", len(layers))
	}
	write(city, 5*time.Minute)
	if changed, err := d.Check(); !changed || err != nil || d.Err() != nil {
		t.Errorf("fixed file: Check() = %v, %v; Err() = %v", changed, err, d.Err())
	}
}

// buildDB writes a GeoIP2-layout database of recs by network.
func buildDB(t *testing.T, typ string, recs map[string]mmdbtype.Map) []byte {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: typ, RecordSize: 24})
	if err != nil {
		t.Fatal(err)
	}
	for p, rec := range recs {
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestInvalidValues checks that a country that is not two ASCII letters and a city past
// MaxValueLen are left out and counted, the record's other values kept.
func TestInvalidValues(t *testing.T) {
	long := strings.Repeat("x", MaxValueLen+1)
	b := buildDB(t, "GeoLite2-City", map[string]mmdbtype.Map{
		"81.2.69.0/24":   {"country": mmdbtype.Map{"iso_code": mmdbtype.String("1!")}, "city": mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String("London")}}},
		"89.160.20.0/24": {"country": mmdbtype.Map{"iso_code": mmdbtype.String("é")}},
		"89.160.21.0/24": {"country": mmdbtype.Map{"iso_code": mmdbtype.String("se")}, "city": mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(long)}}},
	})
	db, err := OpenBytes("x", b)
	if err != nil {
		t.Fatal(err)
	}
	for a, want := range map[string]Info{"81.2.69.1": {City: "London"}, "89.160.20.1": {}, "89.160.21.1": {Country: "SE"}} {
		if got, err := db.Lookup(netip.MustParseAddr(a)); err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", a, got, err, want)
		}
	}
	l, err := NewLayer([]*Database{db})
	if err != nil {
		t.Fatal(err)
	}
	if l.Invalid != 3 || l.Size() != 2 {
		t.Errorf("%d values left out, %d networks; want 3 and 2", l.Invalid, l.Size())
	}
}

// TestDatabasesPoll checks that the background check picks a changed file up.
func TestDatabasesPoll(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "asn.mmdb")
	b, err := os.ReadFile(testdata.Path(t, "geoip", "GeoLite2-ASN-Test.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.Databases, cfg.Optional, cfg.CheckInterval = []string{path}, true, time.Second
	d, err := New(nil, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(nil); err != nil {
		t.Fatalf("a missing optional database should not stop the start: %v", err)
	}
	defer d.Stop()
	if d.Layer().Size() != 0 {
		t.Fatal("a layer from a missing file")
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr("1.0.0.1")
	fztestutil.WaitUntil(t, "the new file is loaded", func() bool {
		l := d.Layer()
		return l.Lookup(a) != nil && l.Lookup(a).ASN == 15169
	})
}

func TestDatabasesMissing(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.Databases = []string{filepath.Join(t.TempDir(), "none.mmdb")}
	d, err := New(nil, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(nil); err == nil || !strings.Contains(err.Error(), "none.mmdb") {
		t.Fatalf("Start() = %v, want an error naming the file", err)
	}
	if _, err := OpenBytes("garbage", bytes.Repeat([]byte{0xab}, 100)); err == nil || !strings.Contains(err.Error(), "garbage") {
		t.Fatalf("OpenBytes(garbage) = %v, want an error naming it", err)
	}
}

func TestConfiguration(t *testing.T) {
	for _, c := range []struct {
		cfg  Configuration
		want string
	}{
		{Configuration{Databases: []string{"a", "a"}, CheckInterval: time.Minute}, "databases[1]: a listed twice"},
		{Configuration{Databases: []string{""}, CheckInterval: time.Minute}, "databases[0]: empty path"},
		{Configuration{CheckInterval: 0}, "check-interval: must be at least 1s"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	d := DefaultConfiguration()
	if err := d.Validate(); err != nil {
		t.Errorf("default: %v", err)
	}
}

func TestParseASN(t *testing.T) {
	for in, want := range map[string]uint32{"AS15169": 15169, "as4200000000": 4200000000} {
		if got, err := parseASN(in); err != nil || got != want {
			t.Errorf("parseASN(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"15169", "AS", "AS99999999999", "ASx"} {
		if _, err := parseASN(in); err == nil {
			t.Errorf("parseASN(%q): no error", in)
		}
	}
}

// FuzzOpen reads arbitrary bytes as a database: an error or networks, never a panic.
func FuzzOpen(f *testing.F) {
	for _, name := range []string{"GeoLite2-ASN-Test.mmdb", "GeoLite2-City-Test.mmdb", "ip_geolocation_sample.mmdb"} {
		if root := testdata.Root(); root != "" {
			if b, err := os.ReadFile(filepath.Join(root, "geoip", name)); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		db, err := OpenBytes("fuzz", b)
		if err != nil {
			return
		}
		_, _ = db.Lookup(netip.MustParseAddr("1.0.0.1"))
		_ = db.Each(func(p netip.Prefix, info *Info) {
			if !p.IsValid() || info == nil || (info.Country != "" && !IsCountryCode(info.Country)) ||
				len(info.State) > MaxValueLen || len(info.City) > MaxValueLen {
				t.Fatalf("bad network %s %+v", p, info)
			}
		})
	})
}
