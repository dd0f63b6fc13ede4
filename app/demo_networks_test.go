package app

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"flowzero/demo"
	"flowzero/enrich/geoip"
	"flowzero/enrich/networks"
	"flowzero/internal/testutil"
	"flowzero/pbwire"
	"flowzero/schema"
)

// buildDemoGeoIP writes demoRemotes as a MaxMind DB, always the same bytes.
func buildDemoGeoIP(t *testing.T) []byte {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: "flowzero-Demo-City-ASN",
		Description:  map[string]string{"en": "flowzero demo: the remote networks of flowzero demo's traffic (invented data)"},
		Languages:    []string{"en"},
		RecordSize:   24,
		BuildEpoch:   1767225600, // 2026-01-01: fixed, so that the file does not change
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range demoRemotes {
		_, n, err := net.ParseCIDR(r.prefix)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{
			"country":                        mmdbtype.Map{"iso_code": mmdbtype.String(r.country)},
			"subdivisions":                   mmdbtype.Slice{mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(r.state)}}},
			"city":                           mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(r.city)}},
			"autonomous_system_number":       mmdbtype.Uint32(r.asn),
			"autonomous_system_organization": mmdbtype.String(r.org),
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

// TestDemoGeoIP keeps demo-geoip.mmdb what demoRemotes says, and checks that it reads back.
func TestDemoGeoIP(t *testing.T) {
	b := buildDemoGeoIP(t)
	if os.Getenv("UPDATE") != "" {
		if err := os.WriteFile("demo-geoip.mmdb", b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(b, demoGeoIP) {
		t.Fatal("demo-geoip.mmdb is stale: run UPDATE=1 go test ./app -run TestDemoGeoIP")
	}
	db, err := geoip.OpenBytes("demo-geoip.mmdb", demoGeoIP)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range demoRemotes {
		p := netip.MustParsePrefix(r.prefix)
		got, err := db.Lookup(p.Addr().Next())
		want := geoip.Info{Country: r.country, State: r.state, City: r.city, ASN: r.asn}
		if err != nil || got != want {
			t.Errorf("%s: %+v (%v), want %+v", r.prefix, got, err, want)
		}
	}
}

// TestDemoNetworkColumns enriches the demo's traffic with its networks and GeoIP database:
// every network and geo column gets values, in each direction.
func TestDemoNetworkColumns(t *testing.T) {
	na, err := DemoNetworkAttributes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	e, err := networks.New(nil, na, s, networks.Options{ASN: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	g := demo.NewGenerator(1)
	seen := map[string]map[any]bool{}
	fm := s.NewFlowMessage()
	now := testutil.Now()
	for range 2000 {
		f := g.Next(now)
		fm.Reset()
		fm.SrcAddr, fm.DstAddr = f.Src, f.Dst
		e.Enrich(fm)
		msg, _, err := pbwire.SplitDelimited(fm.Finalize())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]any{}
		if err := s.DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v }); err != nil {
			t.Fatal(err)
		}
		for k, v := range got {
			if seen[k] == nil {
				seen[k] = map[any]bool{}
			}
			seen[k][v] = true
		}
	}
	for _, dir := range []string{"Src", "Dst"} {
		for _, col := range []string{"NetName", "NetRole", "NetSite", "NetRegion", "NetTenant", "Country", "GeoState", "GeoCity", "AS"} {
			if len(seen[dir+col]) == 0 {
				t.Errorf("no %s%s in the demo's traffic", dir, col)
			}
		}
	}
	if !seen["DstGeoCity"]["Mountain View"] || !seen["SrcGeoCity"]["Paris"] || !seen["SrcCountry"]["IE"] {
		t.Errorf("cities %v, countries %v", seen["DstGeoCity"], seen["SrcCountry"])
	}
}
