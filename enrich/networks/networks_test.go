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

	"flowzero/internal/atomicfile"
	"flowzero/internal/config"
	"flowzero/internal/health"
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
		{"networks: {192.0.2.1: x, 192.0.2.1/32: y}", `networks.192.0.2.1/32: same network as "192.0.2.1"`},
		{"networks: {10.1.2.0/8: lab}", `networks.10.1.2.0/8: 10.1.2.0/8 has host bits set (10.0.0.0/8 or 10.1.2.0/32?)`},
		{"networks: {'::ffff:10.1.2.0/104': lab}", `networks.::ffff:10.1.2.0/104: ::ffff:10.1.2.0/104 has host bits set`},
		{"networks: {10.0.0.0/8: {city: " + strings.Repeat("x", 257) + "}}", "networks.10.0.0.0/8.city: 257 bytes, more than 256"},
		{"networks: {10.0.0.0/8: {name: " + strings.Repeat("x", 5000) + "}}", "networks.10.0.0.0/8.name: 5000 bytes, more than 256"},
		{"networks: {10.0.0.0/8: {nmae: x}}", `unknown key "nmae"`},
		{"network-sources: {a: {fields: {prefix: p}}}", "network-sources.a.url: required"},
		{"network-sources: {a: {url: 'ftp://x/y', fields: {prefix: p}}}", `network-sources.a.url: must be an http or https URL`},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, format: xml}}", `network-sources.a.format: must be json or csv`},
		{"network-sources: {a: {url: 'http://x/'}}", "network-sources.a.fields.prefix: required"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p, nmae: x}}}", `unknown key "nmae"`},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, intervall: 1s}}", `unknown key "intervall"`},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, interval: 10ms}}", "network-sources.a.interval: must be at least 1s"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, max-size: 0}}", "network-sources.a.max-size: must be from 1 to 1073741824 (1 GiB), not 0"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, max-size: 9223372036854775807}}", "network-sources.a.max-size: must be from 1 to 1073741824"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, max-entries: 0}}", "network-sources.a.max-entries: must be from 1 to 10000000, not 0"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, max-entries: 10000001}}", "network-sources.a.max-entries: must be from 1 to 10000000"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, headers: {'Bad Name': x}}}", "network-sources.a.headers.Bad Name: not a valid HTTP header name"},
		{`network-sources: {a: {url: 'http://x/', fields: {prefix: p}, headers: {Authorization: "Bearer a\nb"}}}`, "network-sources.a.headers.Authorization: the value holds characters an HTTP header cannot"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, values: {site: " + strings.Repeat("x", 300) + "}}}", "network-sources.a.values.site: 300 bytes, more than 256"},
		{"network-sources: {'x/../a': {url: 'http://x/', fields: {prefix: p}}}", `network-sources.x/../a: a source name cannot be empty or hold "/", "\" or ".."`},
		{`network-sources: {'a\b': {url: 'http://x/', fields: {prefix: p}}}`, `network-sources.a\b: a source name cannot`},
		{"network-sources: {'..': {url: 'http://x/', fields: {prefix: p}}}", `network-sources...: a source name cannot`},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}, cache-file: /tmp/c}, b: {url: 'http://y/', fields: {prefix: p}, cache-file: /tmp/x/../c}}",
			"network-sources.b.cache-file: /tmp/c is also the cache file of network-sources.a"},
		{"network-sources: {a: {url: 'http://x/', fields: {prefix: p}}, b: {url: 'http://y/', fields: {prefix: p}, cache-file: var/network-sources/a}}",
			"network-sources.b.cache-file: "},
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

	// A file that does not read keeps the data and degrades /healthz until one reads.
	if err := os.WriteFile(path, []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GeoIP().Check(); err == nil {
		t.Fatal("Check() read a broken file")
	}
	if h := e.Health(); h.Status != health.Degraded || !strings.HasPrefix(h.Reason, "geoip: "+path) {
		t.Errorf("health after a failed reload: %+v", h)
	}
	if got := lookup(t, e, "81.2.69.142", 0).City; got != "London" {
		t.Errorf("city %q after a failed reload", got)
	}
	copyFile("GeoLite2-City-Test.mmdb", 0)
	if _, err := e.GeoIP().Check(); err != nil {
		t.Fatal(err)
	}
	if h := e.Health(); h.Status != health.OK {
		t.Errorf("health after a reload: %+v", h)
	}
}

// sourceServer serves the answer body holds, with status 200.
func sourceServer(t *testing.T, body *atomic.Value) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, body.Load().(string))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSourceRefusesEmptyAnswer checks that an answer without the entries paths (an error
// message served with status 200, null) or without any entry while the source has some is
// an error that keeps the entries and the cached copy.
func TestSourceRefusesEmptyAnswer(t *testing.T) {
	for _, c := range []struct{ format, good, bad, err string }{
		{"json", `{"prefixes": [{"ip_prefix": "10.0.0.0/8", "name": "corp"}]}`, `{"message": "rate limited"}`, "JSON: no entries path (prefixes) in the answer"},
		{"json", `{"prefixes": [{"ip_prefix": "10.0.0.0/8", "name": "corp"}]}`, `null`, "JSON: no entries path (prefixes) in the answer"},
		{"json", `{"prefixes": [{"ip_prefix": "10.0.0.0/8", "name": "corp"}]}`, `{"prefixes": []}`, "the answer has no entry, the source has 1: refused"},
		{"csv", "ip_prefix,name\n10.0.0.0/8,corp\n", "ip_prefix,name\n", "the answer has no entry, the source has 1: refused"},
	} {
		t.Run(c.format+"/"+c.bad, func(t *testing.T) {
			var body atomic.Value
			body.Store(c.good)
			srv := sourceServer(t, &body)
			entries := "entries: [prefixes],"
			if c.format == "csv" {
				entries = ""
			}
			dir := t.TempDir()
			cfg := decodeConfig(t, fmt.Sprintf("network-sources: {s: {url: %s, format: %s, %s fields: {prefix: ip_prefix, name: name}}}",
				srv.URL, c.format, entries))
			e := newEnricher(t, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{CacheDir: dir})
			if got := lookup(t, e, "10.1.1.1", 0); got.Name != "corp" {
				t.Fatalf("first fetch: %+v", got)
			}
			body.Store(c.bad)
			if err := e.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Refresh() = %v, want %q", err, c.err)
			}
			if got := lookup(t, e, "10.1.1.1", 0); got.Name != "corp" {
				t.Errorf("entries erased: %+v", got)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "s")); string(b) != c.good {
				t.Errorf("cached copy %q, want the good answer", b)
			}
			if got := promtest.ToFloat64(e.sources[0].metrics.errors); got != 1 {
				t.Errorf("errors = %v, want 1", got)
			}
		})
	}
	// A source that has no entry yet takes an empty list: there is nothing to erase.
	cfg := DefaultSourceConfiguration()
	cfg.Entries, cfg.Fields.Prefix = []string{"prefixes"}, FieldNames{"p"}
	if entries, _, err := parseSource(&cfg, []byte(`{"prefixes": []}`)); err != nil || len(entries) != 0 {
		t.Errorf("empty list: %v, %v", entries, err)
	}
}

// TestOverlongValues checks that a source entry with a value past 256 bytes is skipped and
// counted, the other entries enriching flows, and that values too long together for a
// fragment lose the longest one only.
func TestOverlongValues(t *testing.T) {
	long := strings.Repeat("x", 5000)
	var body atomic.Value
	body.Store(fmt.Sprintf(`[{"p": "0.0.0.0/0", "site": %q}, {"p": "10.0.0.0/8", "name": "corp"}]`, long))
	srv := sourceServer(t, &body)
	cfg := decodeConfig(t, fmt.Sprintf(`
networks: {10.1.0.0/16: {tenant: static-tenant}}
network-sources: {s: {url: %s, fields: {prefix: p, name: name, site: site}}}`, srv.URL))
	s := mustSchema(t, schema.DefaultConfiguration())
	e := newEnricher(t, cfg, s, Options{})
	fm := s.NewFlowMessage()
	fm.SrcAddr = netip.MustParseAddr("10.1.2.3")
	e.Enrich(fm)
	if got := columns(t, s, fm); got["SrcNetName"] != "corp" || got["SrcNetTenant"] != "static-tenant" {
		t.Errorf("flow columns %v", got)
	}
	if n := promtest.ToFloat64(e.sources[0].metrics.invalid); n != 1 {
		t.Errorf("invalid entries = %v, want 1", n)
	}

	b := newBuilder(s, false)
	frags := b.encode(&Attributes{Name: "corp", Site: strings.Repeat("s", 3000), City: strings.Repeat("c", 2000)})
	if b.dropped != 1 || b.first == nil || !strings.Contains(b.first.Error(), "a site of 3000 bytes left out") {
		t.Errorf("dropped %d, first %v", b.dropped, b.first)
	}
	fm.Reset()
	fm.AppendFragment(frags[0])
	if got := columns(t, s, fm); got["SrcNetName"] != "corp" || got["SrcNetSite"] != nil || got["SrcGeoCity"] != strings.Repeat("c", 2000) {
		t.Errorf("fragment columns %v", got)
	}
}

// TestSourceCacheFileDefaultDir checks that a cache-file naming another source's file in
// the cache directory is refused by New, which knows the directory.
func TestSourceCacheFileDefaultDir(t *testing.T) {
	dir := t.TempDir()
	cfg := decodeConfig(t, fmt.Sprintf("network-sources: {a: {url: 'http://x/', fields: {prefix: p}}, b: {url: 'http://y/', fields: {prefix: p}, cache-file: %s/a}}", dir))
	_, err := New(nil, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{Logger: quiet(), CacheDir: dir})
	if want := "network-sources.b.cache-file: " + filepath.Join(dir, "a") + " is also the cache file of network-sources.a"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New() = %v, want %q", err, want)
	}
}

// TestURLRedacted checks that neither a configuration error nor a log line shows a password
// or a query value of a source's URL.
func TestURLRedacted(t *testing.T) {
	for _, u := range []string{"https://user:Secr3t#tail@ipam.example/x", "https://user:Secr3t/tail@ipam.example/x", "ftp://user:Secr3t@ipam.example/"} {
		cfg := DefaultConfiguration()
		err := config.Decode(fmt.Appendf(nil, "network-sources: {a: {url: '%s', fields: {prefix: p}}}", u), &cfg)
		if err == nil || !strings.Contains(err.Error(), "network-sources.a.url: ") || strings.Contains(err.Error(), "Secr3t") {
			t.Errorf("%s: %v", u, err)
		}
	}
	for raw, want := range map[string]string{
		"https://u:Secr3t@ipam.example/list?token=Secr3t&format=json#Secr3t": "https://u:xxxxx@ipam.example/list?format=xxxxx&token=xxxxx",
		"http://ipam.example/list": "http://ipam.example/list",
	} {
		if got := redacted(raw); got != want {
			t.Errorf("redacted(%s) = %s, want %s", raw, got, want)
		}
	}
}

// TestSourceJSONTrailingData checks that data after the JSON document fails the answer,
// naming where it starts.
func TestSourceJSONTrailingData(t *testing.T) {
	cfg := DefaultSourceConfiguration()
	cfg.Fields.Prefix = FieldNames{"p"}
	_, _, err := parseSource(&cfg, []byte(`[{"p": "10.0.0.0/8"}]  <html>oops</html>`))
	if want := "JSON: data after the document, at byte 23"; err == nil || err.Error() != want {
		t.Errorf("parseSource() = %v, want %q", err, want)
	}
	if _, _, err := parseSource(&cfg, []byte("[{\"p\": \"10.0.0.0/8\"}] \r\n\t")); err != nil {
		t.Errorf("trailing white space: %v", err)
	}
}

// TestSourceRedirect checks that a redirect on the source's host is followed with the
// headers, and that one to another host, from https to http, or one too many is refused
// before the headers are sent.
func TestSourceRedirect(t *testing.T) {
	var leaked atomic.Value
	leaked.Store("")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("X-Api-Key"))
		fmt.Fprint(w, `[{"p": "10.0.0.0/8"}]`)
	}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, otherURL+"/list", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, "/list", http.StatusMovedPermanently)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			fmt.Fprintf(w, `[{"p": "192.0.2.0/24", "k": %q}]`, r.Header.Get("X-Api-Key"))
		}
	}))
	defer srv.Close()
	for path, want := range map[string]string{
		"/moved": "",
		"/away":  "network source s: redirect to another host (" + strings.TrimPrefix(otherURL, "http://") + ") refused",
		"/loop":  "network source s: more than 5 redirects",
	} {
		cfg := decodeConfig(t, fmt.Sprintf("network-sources: {s: {url: %s%s, headers: {X-Api-Key: s3cret}, fields: {prefix: p, name: k}}}", srv.URL, path))
		e, err := New(nil, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{Logger: quiet(), CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		err = e.Refresh(context.Background())
		if want == "" {
			if err != nil || lookup(t, e, "192.0.2.1", 0).Name != "s3cret" {
				t.Errorf("%s: %v, %+v", path, err, lookup(t, e, "192.0.2.1", 0))
			}
		} else if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Refresh() = %v, want %q", path, err, want)
		}
	}
	if got := leaked.Load().(string); got != "" {
		t.Errorf("header sent to another host: %q", got)
	}
	s := &source{name: "s"}
	first, _ := http.NewRequest(http.MethodGet, "https://ipam.example/a", nil)
	down, _ := http.NewRequest(http.MethodGet, "http://ipam.example/b", nil)
	if err := s.checkRedirect(down, []*http.Request{first}); err == nil || err.Error() != "network source s: redirect from https to http refused" {
		t.Errorf("https to http: %v", err)
	}
	if err := s.checkRedirect(first, []*http.Request{down}); err != nil {
		t.Errorf("http to https: %v", err)
	}
}

// TestSourceMaxEntries checks that an answer past max-entries is refused and that a JSON
// entry past 64 KiB is skipped: the memory a JSON answer takes is bounded by these and
// max-size, its entries being decoded one at a time.
func TestSourceMaxEntries(t *testing.T) {
	cfg := DefaultSourceConfiguration()
	cfg.Fields.Prefix = FieldNames{"p"}
	cfg.MaxEntries = 3
	if _, _, err := parseSource(&cfg, []byte(`[{"p": "10.0.0.0/8"}, {}, {}]`)); err != nil {
		t.Errorf("3 entries: %v", err)
	}
	if _, _, err := parseSource(&cfg, []byte(`[{"p": "10.0.0.0/8"}, {}, {}, {}]`)); err == nil || err.Error() != "JSON: more than max-entries (3) entries" {
		t.Errorf("4 entries: %v", err)
	}
	csvCfg := cfg
	csvCfg.Format = FormatCSV
	if _, _, err := parseSource(&csvCfg, []byte("p\n10.0.0.0/8\n10.0.0.0/9\n10.0.0.0/10\n10.0.0.0/11\n")); err == nil || err.Error() != "CSV: more than max-entries (3) entries" {
		t.Errorf("4 CSV entries: %v", err)
	}
	big := fmt.Sprintf(`[{"p": "10.0.0.0/8", "pad": %q}, {"p": "192.0.2.0/24"}]`, strings.Repeat("x", maxEntryBytes))
	entries, skip, err := parseSource(&cfg, []byte(big))
	if err != nil || len(entries) != 1 || skip.n != 1 || !strings.HasPrefix(skip.first, "the answer[0]: 65566 bytes, more than 65536") {
		t.Errorf("entry past 64 KiB: %v, %d skipped (%s), %v", entries, skip.n, skip.first, err)
	}
	deep := `{"x": ` + strings.Repeat("[", maxSkipDepth+1) + `], "prefixes": []}`
	cfg.Entries = []string{"prefixes"}
	if _, _, err := parseSource(&cfg, []byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper than 1000 levels") {
		t.Errorf("deep nesting: %v", err)
	}
}

// TestSourceCSVBadQuote checks that a quote left open, which makes the reader take the
// following lines as one field, fails the whole answer with the line it starts on.
func TestSourceCSVBadQuote(t *testing.T) {
	cfg := DefaultSourceConfiguration()
	cfg.Format = FormatCSV
	cfg.Fields = FieldMapping{Prefix: FieldNames{"net"}, Name: FieldNames{"name"}}
	for body, want := range map[string]string{
		"net,name\n10.0.0.0/8,corp\n\"192.0.2.0/24,oops\n172.16.0.0/24,n\n": "CSV: record starting at line 3: extraneous or missing \" in quoted-field",
		"net,name\n10.0.0.0/8,corp\n192.0.2.0/24,\"two\nlines\"\n":          "CSV: record starting at line 3: a field holds a line break",
		"net,name\n10.0.0.0/8,co\"rp\n":                                     "CSV: record starting at line 2: bare \" in non-quoted-field",
	} {
		if _, _, err := parseSource(&cfg, []byte(body)); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// TestSourceHostBits checks that a source entry whose prefix has host bits set is skipped
// and counted, not widened.
func TestSourceHostBits(t *testing.T) {
	cfg := DefaultSourceConfiguration()
	cfg.Fields.Prefix = FieldNames{"p"}
	entries, skip, err := parseSource(&cfg, []byte(`[{"p": "10.1.2.0/8"}, {"p": "192.0.2.0/24"}]`))
	if err != nil || len(entries) != 1 || entries[0].Prefix != netip.MustParsePrefix("192.0.2.0/24") ||
		skip.n != 1 || skip.first != "the answer[0]: prefix: 10.1.2.0/8 has host bits set (10.0.0.0/8 or 10.1.2.0/32?)" {
		t.Errorf("entries %v, %d skipped (%s), %v", entries, skip.n, skip.first, err)
	}
}

// TestSourceCacheWrite checks that the cached copy is replaced whole, and that a copy that
// could not be written is written at the next fetch although the answer did not change, the
// source being degraded in /healthz meanwhile.
func TestSourceCacheWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cache")
	for _, b := range []string{"first", "second"} {
		if err := atomicfile.WriteFile(p, []byte(b)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != b {
			t.Errorf("cached copy %q, want %q", got, b)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	var body atomic.Value
	body.Store(`[{"p": "10.0.0.0/8"}]`)
	srv := sourceServer(t, &body)
	blocked := filepath.Join(dir, "blocked")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil { // a file where the directory should be
		t.Fatal(err)
	}
	cache := filepath.Join(blocked, "s")
	cfg := decodeConfig(t, fmt.Sprintf("network-sources: {s: {url: %s, cache-file: %s, fields: {prefix: p}}}", srv.URL, cache))
	e := newEnricher(t, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{})
	if h := e.Health(); h.Status != health.Degraded || !strings.Contains(h.Reason, "network source s: cannot write its cached copy") {
		t.Errorf("health %+v", h)
	}
	// The cached copy could neither be read at start nor written.
	if got := promtest.ToFloat64(e.sources[0].metrics.errors); got != 2 {
		t.Errorf("errors = %v, want 2", got)
	}
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	if err := e.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(cache); string(got) != body.Load().(string) {
		t.Errorf("cached copy %q after the retry", got)
	}
	if h := e.Health(); h.Status != health.OK {
		t.Errorf("health %+v after the retry", h)
	}
}

// TestSourceHealth checks that a source is degraded in /healthz after its third failed
// fetch in a row, naming it, and ok again after a fetch succeeds.
func TestSourceHealth(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
		fmt.Fprint(w, `[{"p": "10.0.0.0/8"}]`)
	}))
	defer srv.Close()
	cfg := decodeConfig(t, fmt.Sprintf("network-sources: {ipam: {url: %s, fields: {prefix: p}}}", srv.URL))
	e := newEnricher(t, cfg, mustSchema(t, schema.DefaultConfiguration()), Options{})
	status.Store(503)
	for i := range 3 {
		if h := e.Health(); h.Status != health.OK {
			t.Errorf("after %d failures: %+v", i, h)
		}
		_ = e.Refresh(context.Background())
	}
	if h := e.Health(); h.Status != health.Degraded || !strings.HasPrefix(h.Reason, "network source ipam: GET ") ||
		!strings.Contains(h.Reason, "(3 fetches failed in a row; the previous entries stay)") {
		t.Errorf("after 3 failures: %+v", h)
	}
	status.Store(200)
	_ = e.Refresh(context.Background())
	if h := e.Health(); h.Status != health.OK {
		t.Errorf("after a success: %+v", h)
	}
}
