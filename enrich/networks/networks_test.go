package networks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/config"
	"flowzero/internal/testdata"
	"flowzero/pbwire"
	"flowzero/schema"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func decodeConfig(t *testing.T, y string) Configuration {
	t.Helper()
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte(y), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newEnricher(t *testing.T, cfg Configuration, s *schema.Schema, opts Options) *Enricher {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	if opts.CacheDir == "" {
		opts.CacheDir = t.TempDir()
	}
	e, err := New(prometheus.NewRegistry(), cfg, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

func mustSchema(t testing.TB, cfg schema.Configuration) *schema.Schema {
	t.Helper()
	s, err := schema.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// columns returns the values of a finalized message by column name.
func columns(t *testing.T, s *schema.Schema, fm *schema.FlowMessage) map[string]any {
	t.Helper()
	msg, _, err := pbwire.SplitDelimited(fm.Finalize())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	if err := s.DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v }); err != nil {
		t.Fatal(err)
	}
	return got
}

func lookup(t *testing.T, e *Enricher, addr string, vrf uint32) Attributes {
	t.Helper()
	a, _ := e.Lookup(netip.MustParseAddr(addr), vrf)
	return a
}

// TestStatic checks that the longest prefix wins per attribute, and the VRF entries.
func TestStatic(t *testing.T) {
	cfg := decodeConfig(t, `
networks:
  10.0.0.0/8: {name: corp, role: internal, site: par1, country: FR}
  10.1.0.0/16: {name: lab, tenant: rnd}
  10.1.2.3: {city: Paris}
  192.0.2.0/24: customers
  "2001:db8::/32": {name: v6, region: eu-west, asn: 64500}
  "::ffff:198.51.100.0/120": {name: mapped}
  10.1.0.0/16@7: {name: cust-a, role: customer}
  10.1.0.0/16@8: {name: cust-b}
  172.16.0.0/12@8: {name: cust-b-private}
`)
	e := newEnricher(t, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{ASN: true})
	for _, c := range []struct {
		addr string
		vrf  uint32
		want Attributes
	}{
		{"10.9.9.9", 0, Attributes{Name: "corp", Role: "internal", Site: "par1", Country: "FR"}},
		{"10.1.9.9", 0, Attributes{Name: "lab", Role: "internal", Site: "par1", Tenant: "rnd", Country: "FR"}},
		{"10.1.2.3", 0, Attributes{Name: "lab", Role: "internal", Site: "par1", Tenant: "rnd", Country: "FR", City: "Paris"}},
		{"::ffff:10.1.2.3", 0, Attributes{Name: "lab", Role: "internal", Site: "par1", Tenant: "rnd", Country: "FR", City: "Paris"}},
		{"192.0.2.77", 0, Attributes{Name: "customers"}},
		{"2001:db8:1::1", 0, Attributes{Name: "v6", Region: "eu-west", ASN: 64500}},
		{"198.51.100.7", 0, Attributes{Name: "mapped"}},
		{"203.0.113.1", 0, Attributes{}},
		// VRF 7: its entry first, then the global ones (longest prefix within each).
		{"10.1.9.9", 7, Attributes{Name: "cust-a", Role: "customer", Site: "par1", Tenant: "rnd", Country: "FR"}},
		{"10.1.2.3", 7, Attributes{Name: "cust-a", Role: "customer", Site: "par1", Tenant: "rnd", Country: "FR", City: "Paris"}},
		{"10.9.9.9", 7, Attributes{Name: "corp", Role: "internal", Site: "par1", Country: "FR"}},
		{"10.1.9.9", 8, Attributes{Name: "cust-b", Role: "internal", Site: "par1", Tenant: "rnd", Country: "FR"}},
		{"172.16.5.5", 8, Attributes{Name: "cust-b-private"}},
		{"172.16.5.5", 7, Attributes{}},
		{"10.1.9.9", 9, Attributes{Name: "lab", Role: "internal", Site: "par1", Tenant: "rnd", Country: "FR"}},
	} {
		if got := lookup(t, e, c.addr, c.vrf); got != c.want {
			t.Errorf("%s in VRF %d: %+v, want %+v", c.addr, c.vrf, got, c.want)
		}
	}
}

// TestEnrich checks the columns a flow gets in each direction, the VRF each address is
// looked up in, the AS numbers, and that the decoder's values are kept.
func TestEnrich(t *testing.T) {
	cfg := decodeConfig(t, `
networks:
  10.0.0.0/8: {name: corp, role: internal, site: par1, region: eu, tenant: t1, country: FR, state: IDF, city: Paris, asn: 64512}
  10.0.0.0/8@5: {name: cust5}
  192.0.2.0/24@6: {name: cust6, asn: 64600}
  198.51.100.0/24: {name: remote, country: DE}
`)
	s := mustSchema(t, schema.DefaultConfiguration())
	e := newEnricher(t, cfg, s, Options{ASN: true})
	fm := s.NewFlowMessage()
	for _, c := range []struct {
		name          string
		src, dst      string
		srcAS, dstAS  uint32
		ingress, egrs uint32
		pre           func(fm *schema.FlowMessage)
		want          map[string]any
	}{
		{name: "both", src: "10.1.1.1", dst: "198.51.100.1", want: map[string]any{
			"SrcNetName": "corp", "SrcNetRole": "internal", "SrcNetSite": "par1", "SrcNetRegion": "eu", "SrcNetTenant": "t1",
			"SrcCountry": "FR", "SrcGeoState": "IDF", "SrcGeoCity": "Paris", "SrcAS": uint64(64512),
			"DstNetName": "remote", "DstCountry": "DE"}},
		{name: "flow-as-kept", src: "10.1.1.1", dst: "198.51.100.1", srcAS: 1, want: map[string]any{
			"SrcNetName": "corp", "SrcNetRole": "internal", "SrcNetSite": "par1", "SrcNetRegion": "eu", "SrcNetTenant": "t1",
			"SrcCountry": "FR", "SrcGeoState": "IDF", "SrcGeoCity": "Paris", "SrcAS": uint64(1),
			"DstNetName": "remote", "DstCountry": "DE"}},
		{name: "decoder-column-kept", src: "198.51.100.1", dst: "203.0.113.1",
			pre:  func(fm *schema.FlowMessage) { fm.AppendString(schema.ColumnSrcNetName, "from-exporter") },
			want: map[string]any{"SrcNetName": "from-exporter", "SrcCountry": "DE"}},
		// Ingress VRF 5 for the source, egress VRF 6 for the destination.
		{name: "vrfs", src: "10.1.1.1", dst: "192.0.2.1", ingress: 5, egrs: 6, want: map[string]any{
			"SrcNetName": "cust5", "SrcNetRole": "internal", "SrcNetSite": "par1", "SrcNetRegion": "eu", "SrcNetTenant": "t1",
			"SrcCountry": "FR", "SrcGeoState": "IDF", "SrcGeoCity": "Paris", "SrcAS": uint64(64512),
			"DstNetName": "cust6", "DstAS": uint64(64600)}},
		// Only the ingress VRF: the destination is taken to be in it too.
		{name: "ingress-only", src: "192.0.2.1", dst: "10.1.1.1", ingress: 6, want: map[string]any{
			"SrcNetName": "cust6", "SrcAS": uint64(64600), "DstNetName": "corp", "DstNetRole": "internal", "DstNetSite": "par1",
			"DstNetRegion": "eu", "DstNetTenant": "t1", "DstCountry": "FR", "DstGeoState": "IDF", "DstGeoCity": "Paris",
			"DstAS": uint64(64512)}},
		{name: "none", src: "203.0.113.1", dst: "203.0.113.2", want: map[string]any{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fm.Reset()
			fm.SrcAddr, fm.DstAddr = netip.MustParseAddr(c.src), netip.MustParseAddr(c.dst)
			fm.SrcAS, fm.DstAS = c.srcAS, c.dstAS
			fm.IngressVRFID, fm.EgressVRFID = c.ingress, c.egrs
			if c.pre != nil {
				c.pre(fm)
			}
			e.Enrich(fm)
			got := columns(t, s, fm)
			delete(got, "SrcAddr")
			delete(got, "DstAddr")
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("columns:\n got %v\nwant %v", got, c.want)
			}
		})
	}
}

// TestNoASN checks that without the "geoip" provider the AS numbers are left alone.
func TestNoASN(t *testing.T) {
	cfg := decodeConfig(t, "networks: {10.0.0.0/8: {name: corp, asn: 64512}}")
	s := mustSchema(t, schema.DefaultConfiguration())
	e := newEnricher(t, cfg, s, Options{})
	fm := s.NewFlowMessage()
	fm.SrcAddr = netip.MustParseAddr("10.0.0.1")
	e.Enrich(fm)
	if fm.SrcAS != 0 {
		t.Errorf("SrcAS = %d without the geoip provider", fm.SrcAS)
	}
}

// TestDisabledColumns checks that attributes of disabled columns do not split leaves.
func TestDisabledColumns(t *testing.T) {
	cfg := decodeConfig(t, `
networks:
  10.0.0.0/24: {name: a, city: Paris}
  10.0.1.0/24: {name: a, city: Lyon}
`)
	s := mustSchema(t, schema.Configuration{Disabled: []string{"SrcGeoCity", "DstGeoCity"}})
	e := newEnricher(t, cfg, s, Options{})
	if n := e.table.Load().leaves; n != 1 {
		t.Errorf("%d leaves, want 1: the cities differ but their columns are off", n)
	}
}

// TestPrecedence checks networks > network sources > GeoIP, per attribute, whatever the
// prefix lengths.
func TestPrecedence(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"net": "81.2.69.128/25", "name": "from-source", "city": "Lyon", "region": "emea"},
			{"net": "81.2.69.142/32", "role": "host"}]`)
	}))
	defer srv.Close()
	cfg := decodeConfig(t, fmt.Sprintf(`
networks:
  81.2.69.0/24: {city: Paris, region: europe}
network-sources:
  ipam:
    url: %s
    fields: {prefix: net, name: name, city: city, region: region, role: role}
geoip:
  databases: [%s, %s]
`, srv.URL, testdata.Path(t, "geoip", "GeoLite2-City-Test.mmdb"), testdata.Path(t, "geoip", "GeoLite2-ASN-Test.mmdb")))
	e := newEnricher(t, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{ASN: true})
	for addr, want := range map[string]Attributes{
		// City and region from networks (a /24) over the source's /25 and GeoIP's /31;
		// name and role from the source; country and state from GeoIP.
		"81.2.69.142": {Name: "from-source", Role: "host", Region: "europe", Country: "GB", State: "England", City: "Paris"},
		"81.2.69.1":   {Region: "europe", City: "Paris"},
		// GeoIP alone, the City and ASN databases merged.
		"89.160.20.112": {Country: "SE", State: "Östergötland County", City: "Linköping", ASN: 29518},
		"1.0.0.1":       {ASN: 15169},
	} {
		if got := lookup(t, e, addr, 0); got != want {
			t.Errorf("%s: %+v, want %+v", addr, got, want)
		}
	}
}

// TestSourceFetch checks a source over HTTP: JSON with several lists, nested fields,
// alternatives and constants, then a refresh, a failing source, its cached copy after a
// restart, and the bounds.
func TestSourceFetch(t *testing.T) {
	var body atomic.Value
	var status atomic.Int32
	status.Store(200)
	var auth atomic.Value
	body.Store(`{"prefixes": [
		{"ip_prefix": "3.5.140.0/22", "region": "ap-northeast-2", "service": "AMAZON", "meta": {"site": "icn"}},
		{"ip_prefix": "not-a-prefix", "region": "x"},
		{"ip_prefix": "52.94.76.0/22", "region": "us-west-2", "service": "EC2"}],
	  "ipv6_prefixes": [{"ipv6_prefix": "2600:1f14::/35", "region": "us-west-2", "service": "EC2"}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.WriteHeader(int(status.Load()))
		fmt.Fprint(w, body.Load().(string))
	}))
	defer srv.Close()
	dir := t.TempDir()
	y := fmt.Sprintf(`
network-sources:
  amazon:
    url: %s/ip-ranges.json
    headers: {Authorization: "Bearer s3cret"}
    interval: 1h
    entries: [prefixes, ipv6_prefixes]
    fields:
      prefix: [ip_prefix, ipv6_prefix]
      region: region
      role: service
      site: meta.site
    values: {tenant: amazon}
    max-size: 2000
`, srv.URL)
	cfg := decodeConfig(t, y)
	s := mustSchema(t, schema.DefaultConfiguration())
	reg := prometheus.NewRegistry()
	e, err := New(reg, cfg, s, Options{Logger: quiet(), CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if got := auth.Load(); got != "Bearer s3cret" {
		t.Errorf("Authorization header %q", got)
	}
	want := map[string]Attributes{
		"3.5.141.1":      {Role: "AMAZON", Region: "ap-northeast-2", Site: "icn", Tenant: "amazon"},
		"52.94.77.1":     {Role: "EC2", Region: "us-west-2", Tenant: "amazon"},
		"2600:1f14:1::1": {Role: "EC2", Region: "us-west-2", Tenant: "amazon"},
	}
	check := func(when string) {
		t.Helper()
		for addr, w := range want {
			if got := lookup(t, e, addr, 0); got != w {
				t.Errorf("%s: %s: %+v, want %+v", when, addr, got, w)
			}
		}
	}
	check("first fetch")
	src := e.sources[0]
	if got := promtest.ToFloat64(src.metrics.invalid); got != 1 {
		t.Errorf("invalid entries = %v, want 1", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "amazon")); err != nil {
		t.Errorf("no cached copy: %v", err)
	}

	// A new answer replaces the entries.
	body.Store(`{"prefixes": [{"ip_prefix": "3.5.140.0/22", "region": "eu-west-3", "service": "S3"}]}`)
	if err := e.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	want = map[string]Attributes{"3.5.141.1": {Role: "S3", Region: "eu-west-3", Tenant: "amazon"}, "52.94.77.1": {}}
	check("refresh")

	// Errors keep the previous entries: HTTP status, too large, no valid entry, bad JSON.
	for _, c := range []struct {
		status int
		body   string
		err    string
	}{
		{503, "down", "HTTP status 503"},
		{200, `[` + strings.Repeat(" ", 3000) + `]`, "larger than max-size"},
		{200, `{"prefixes": [{"prefix": "3.5.140.0/22"}]}`, `prefixes[0]: no prefix field "ip_prefix|ipv6_prefix"`},
		{200, `{"prefixes": `, "JSON: unexpected EOF"},
		{200, `{"prefixes": {}}`, "prefixes is not an array"},
	} {
		status.Store(int32(c.status))
		body.Store(c.body)
		err := e.Refresh(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("answer %d %.20q: error %v, want %q", c.status, c.body, err, c.err)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error shows the header: %v", err)
		}
		check("after an error")
	}
	if got := promtest.ToFloat64(src.metrics.errors); got != 5 {
		t.Errorf("errors = %v, want 5", got)
	}
	e.Stop()

	// A restart while the source is down enriches from the cached copy.
	status.Store(503)
	e2 := newEnricher(t, cfg, s, Options{CacheDir: dir})
	if got := lookup(t, e2, "3.5.141.1", 0); got != want["3.5.141.1"] {
		t.Errorf("after a restart with the source down: %+v", got)
	}
}

// TestSourceCSV reads a CSV source with a VRF column, a BOM and a bad line.
func TestSourceCSV(t *testing.T) {
	cfg := DefaultSourceConfiguration()
	cfg.Format = FormatCSV
	cfg.Fields = FieldMapping{Prefix: FieldNames{"network"}, VRF: FieldNames{"vrf"}, Name: FieldNames{"customer"},
		Country: FieldNames{"cc"}, ASN: FieldNames{"asn"}}
	entries, skip, err := parseSource(&cfg, []byte("\xef\xbb\xbfnetwork, vrf, customer, cc, asn\n"+
		"10.0.0.0/8,12,acme,fr,AS64500\n"+
		"10.0.0.0/8,,corp,,\n"+
		"bad,1,x,,\n"+
		"192.0.2.0/24,,\"quoted, name\",US,64501\n"+
		"198.51.100.0/24,,x,USA,\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), VRF: 12, Attrs: Attributes{Name: "acme", Country: "FR", ASN: 64500}},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Attrs: Attributes{Name: "corp"}},
		{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Attrs: Attributes{Name: "quoted, name", Country: "US", ASN: 64501}},
	}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("entries:\n got %+v\nwant %+v", entries, want)
	}
	if skip.n != 2 || !strings.HasPrefix(skip.first, `line 4: prefix: "bad" is not a prefix`) {
		t.Errorf("skipped %d, first %q", skip.n, skip.first)
	}
	if _, _, err := parseSource(&cfg, []byte("net,name\n1.0.0.0/8,x\n")); err == nil || !strings.Contains(err.Error(), `no prefix column "network"`) {
		t.Errorf("missing prefix column: %v", err)
	}
}

// TestSourceTimeout checks that a source that does not answer is given up after its timeout.
func TestSourceTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := decodeConfig(t, fmt.Sprintf("network-sources: {slow: {url: %s, timeout: 100ms, fields: {prefix: p}}}", srv.URL))
	e, err := New(nil, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{Logger: quiet(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Refresh(context.Background())
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("Refresh() = %v, want a timeout", err)
	}
}

func TestConfigurationErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"networks: {10.0.0.0/33: x}", `networks.10.0.0.0/33: "10.0.0.0/33" is not a prefix or an address`},
		{"networks: {10.0.0.0/8@x: x}", `networks.10.0.0.0/8@x: VRF "x" is not a VRF ID`},
		{"networks: {10.0.0.0/8@0: x}", `networks.10.0.0.0/8@0: VRF "0" is not a VRF ID`},
		{"networks: {10.0.0.0/8: {country: France}}", `networks.10.0.0.0/8.country: "France" is not an ISO 3166-1 alpha-2 code`},
		{"networks: {10.0.0.0/8: x, 10.1.0.0/8: y}", `networks.10.1.0.0/8: same network as "10.0.0.0/8"`},
		{"networks: {10.0.0.0/8: {nmae: x}}", `unknown key "nmae"`},
		{"network-sources: {a: {fields: {prefix: p}}}", "network-sources.a.url: required"},
		{"network-sources: {a: {url: 'ftp://x/y', fields: {prefix: p}}}", `network-sources.a.url: must be an http or https URL`},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, format: xml}}", `network-sources.a.format: must be json or csv`},
		{"network-sources: {a: {url: 'http://x/'}}", "network-sources.a.fields.prefix: required"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p, nmae: x}}}", `unknown key "nmae"`},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, intervall: 1s}}", `unknown key "intervall"`},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, interval: 10ms}}", "network-sources.a.interval: must be at least 1s"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, max-size: 0}}", "network-sources.a.max-size: must be positive"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, values: {country: fr}}}", "network-sources.a.values.country"},
		{"network-sources: {a: {url: 'http://u:pw@x/', format: csv, entries: [a], fields: {prefix: p}}}", "network-sources.a.entries: only for json"},
		{"geoip: {databases: [a, a]}", "geoip.databases[1]: a listed twice"},
	} {
		cfg := DefaultConfiguration()
		err := config.Decode([]byte(c.yaml), &cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestMetrics checks the hit and miss counters per source.
func TestMetrics(t *testing.T) {
	cfg := decodeConfig(t, fmt.Sprintf("networks: {81.2.69.0/24: {name: n}}\ngeoip: {databases: [%s]}",
		testdata.Path(t, "geoip", "GeoLite2-Country-Test.mmdb")))
	s := mustSchema(t, schema.DefaultConfiguration())
	reg := prometheus.NewRegistry()
	e, err := New(reg, cfg, s, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	fm := s.NewFlowMessage()
	for range 3 {
		fm.Reset()
		fm.SrcAddr, fm.DstAddr = netip.MustParseAddr("81.2.69.142"), netip.MustParseAddr("192.0.2.1")
		e.Enrich(fm)
	}
	hit, miss := e.metrics.hits()
	if hit != [3]uint64{3, 0, 3} || miss != [3]uint64{3, 6, 3} {
		t.Errorf("hits %v misses %v", hit, miss)
	}
	if n, err := promtest.GatherAndCount(reg, "flowzero_networks_lookups_total", "flowzero_geoip_reloads_total", "flowzero_networks_prefixes"); err != nil || n != 8 {
		t.Errorf("%d series, %v", n, err)
	}
}

// TestReloadWhileEnriching swaps tables while workers enrich: run with -race.
func TestReloadWhileEnriching(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `[{"p": "192.0.2.0/24", "name": "gen%d"}]`, n.Add(1))
	}))
	defer srv.Close()
	cfg := decodeConfig(t, fmt.Sprintf("network-sources: {s: {url: %s, fields: {prefix: p, name: name}}}", srv.URL))
	s := mustSchema(t, schema.DefaultConfiguration())
	e := newEnricher(t, cfg, s, Options{})
	done := make(chan struct{})
	var flows atomic.Int64
	for range 2 {
		go func() {
			fm := s.NewFlowMessage()
			for {
				select {
				case <-done:
					return
				default:
				}
				fm.Reset()
				fm.SrcAddr = netip.MustParseAddr("192.0.2.1")
				e.Enrich(fm)
				if !fm.IsSet(schema.ColumnSrcNetName) {
					panic("a flow without its network name during a reload")
				}
				flows.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < 20 && time.Now().Before(deadline); i++ {
		if err := e.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if got := lookup(t, e, "192.0.2.1", 0).Name; !strings.HasPrefix(got, "gen") {
		t.Errorf("name %q", got)
	}
}

// FuzzParseSource reads arbitrary answers as JSON and CSV sources: entries or an error,
// never a panic, and every entry valid.
func FuzzParseSource(f *testing.F) {
	f.Add([]byte(`{"prefixes": [{"ip_prefix": "3.5.140.0/22", "region": "ap", "asn": 12}]}`), false)
	f.Add([]byte(`[{"ip_prefix": "2600::/35", "vrf": "7", "cc": "FR"}]`), false)
	f.Add([]byte("ip_prefix,region,asn,vrf,cc\n10.0.0.0/8,eu,AS1,3,fr\n"), true)
	f.Fuzz(func(t *testing.T, b []byte, csv bool) {
		cfg := DefaultSourceConfiguration()
		cfg.Entries = []string{"", "prefixes"}
		cfg.Fields = FieldMapping{Prefix: FieldNames{"ip_prefix"}, Region: FieldNames{"region"}, ASN: FieldNames{"asn"},
			VRF: FieldNames{"vrf"}, Country: FieldNames{"cc"}}
		if csv {
			cfg.Format, cfg.Entries = FormatCSV, nil
		}
		entries, _, err := parseSource(&cfg, b)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.Prefix.IsValid() || e.Prefix != e.Prefix.Masked() || e.Attrs.validate() != nil {
				t.Fatalf("bad entry %+v", e)
			}
		}
	})
}

// TestGeoIPReload replaces the GeoIP file: the enricher's table follows, the networks still
// winning over it.
func TestGeoIPReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "geo.mmdb")
	copyFile := func(name string, age time.Duration) {
		t.Helper()
		b, err := os.ReadFile(testdata.Path(t, "geoip", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		mtime := time.Now().Add(-age)
		if err := os.Chtimes(path+".tmp", mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("GeoLite2-Country-Test.mmdb", time.Hour)
	cfg := decodeConfig(t, fmt.Sprintf("networks: {81.2.69.0/24: {name: office}}\ngeoip: {databases: [%s]}", path))
	e := newEnricher(t, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{})
	if got, want := lookup(t, e, "81.2.69.142", 0), (Attributes{Name: "office", Country: "GB"}); got != want {
		t.Errorf("before: %+v, want %+v", got, want)
	}
	copyFile("GeoLite2-City-Test.mmdb", time.Minute)
	if changed, err := e.GeoIP().Check(); !changed || err != nil {
		t.Fatalf("Check() = %v, %v", changed, err)
	}
	if got, want := lookup(t, e, "81.2.69.142", 0), (Attributes{Name: "office", Country: "GB", State: "England", City: "London"}); got != want {
		t.Errorf("after: %+v, want %+v", got, want)
	}
}
