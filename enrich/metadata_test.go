package enrich

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"flowzero/internal/config"
	"flowzero/pbwire"
	"flowzero/schema"
)

const metadataYAML = `
exporters:
  192.0.2.0/24:
    name: edge-any
    site: par1
    default:
      name: unknown
  192.0.2.1:
    name: edge1.par1
    group: europe
    role: edge
    site: par1
    region: eu-west
    tenant: acme
    interfaces:
      10:
        name: et-0/0/1
        description: "transit: Cogent"
        speed: 100000
        provider: cogent
        connectivity: transit
        boundary: external
      20:
        name: ae12
        description: "core: par2"
        speed: 400000
        boundary: internal
      500123:
        name: irb.100
  2001:db8::/32:
    name: edge6
`

func metadataConfig(t *testing.T) Configuration {
	t.Helper()
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte(metadataYAML), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// decodeColumns returns the values of a finalized message by column name.
func decodeColumns(t *testing.T, s *schema.Schema, framed []byte) map[string]any {
	t.Helper()
	msg, _, err := pbwire.SplitDelimited(framed)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	if err := s.DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMetadata(t *testing.T) {
	cfg := metadataConfig(t)
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	md, err := NewMetadata(cfg.Exporters, s)
	if err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	for _, tc := range []struct {
		name     string
		exporter string
		in, out  uint32
		preset   func(*schema.FlowMessage)
		want     map[string]any
	}{
		{
			name: "address and both interfaces", exporter: "192.0.2.1", in: 10, out: 20,
			want: map[string]any{
				"ExporterName": "edge1.par1", "ExporterGroup": "europe", "ExporterRole": "edge",
				"ExporterSite": "par1", "ExporterRegion": "eu-west", "ExporterTenant": "acme",
				"InIfName": "et-0/0/1", "InIfDescription": "transit: Cogent", "InIfSpeed": uint64(100000),
				"InIfProvider": "cogent", "InIfConnectivity": "transit", "InIfBoundary": uint64(schema.BoundaryExternal),
				"OutIfName": "ae12", "OutIfDescription": "core: par2", "OutIfSpeed": uint64(400000),
				"OutIfBoundary": uint64(schema.BoundaryInternal),
			},
		},
		{
			// The exact address wins over the /24; it has no default interface.
			name: "unknown interface", exporter: "::ffff:192.0.2.1", in: 20, out: 7,
			want: map[string]any{
				"ExporterName": "edge1.par1", "ExporterGroup": "europe", "ExporterRole": "edge",
				"ExporterSite": "par1", "ExporterRegion": "eu-west", "ExporterTenant": "acme",
				"InIfName": "ae12", "InIfDescription": "core: par2", "InIfSpeed": uint64(400000),
				"InIfBoundary": uint64(schema.BoundaryInternal),
			},
		},
		{
			name: "prefix with default interface", exporter: "192.0.2.77", in: 1, out: 2,
			want: map[string]any{"ExporterName": "edge-any", "ExporterSite": "par1", "InIfName": "unknown", "OutIfName": "unknown"},
		},
		{
			// What the decoder set is kept.
			name: "decoder's values kept", exporter: "192.0.2.77", in: 1, out: 2,
			preset: func(fm *schema.FlowMessage) { fm.AppendString(schema.ColumnInIfName, "ge-0/0/1") },
			want:   map[string]any{"ExporterName": "edge-any", "ExporterSite": "par1", "InIfName": "ge-0/0/1", "OutIfName": "unknown"},
		},
		{
			name: "high interface index", exporter: "192.0.2.1", in: 500123, out: 500124,
			want: map[string]any{
				"ExporterName": "edge1.par1", "ExporterGroup": "europe", "ExporterRole": "edge",
				"ExporterSite": "par1", "ExporterRegion": "eu-west", "ExporterTenant": "acme",
				"InIfName": "irb.100",
			},
		},
		{name: "IPv6 prefix", exporter: "2001:db8:1::1", in: 1, want: map[string]any{"ExporterName": "edge6"}},
		{name: "unknown exporter", exporter: "198.51.100.1", in: 10, out: 20, want: map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm.Reset()
			fm.ExporterAddress = netip.MustParseAddr(tc.exporter)
			fm.InIf, fm.OutIf = tc.in, tc.out
			if tc.preset != nil {
				tc.preset(fm)
			}
			md.Enrich(fm)
			got := decodeColumns(t, s, fm.Finalize())
			for _, k := range []string{"ExporterAddress", "InIf", "OutIf"} {
				delete(got, k)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
	// Disabled columns stay out.
	s2, err := schema.New(schema.Configuration{Disabled: []string{"InIfDescription", "ExporterTenant"}})
	if err != nil {
		t.Fatal(err)
	}
	md2, err := NewMetadata(cfg.Exporters, s2)
	if err != nil {
		t.Fatal(err)
	}
	fm2 := s2.NewFlowMessage()
	fm2.ExporterAddress, fm2.InIf = netip.MustParseAddr("192.0.2.1"), 10
	md2.Enrich(fm2)
	got := decodeColumns(t, s2, fm2.Finalize())
	if _, ok := got["InIfDescription"]; ok || got["InIfName"] != "et-0/0/1" {
		t.Errorf("disabled column written: %v", got)
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		fm.Reset()
		fm.ExporterAddress, fm.InIf, fm.OutIf = netip.MustParseAddr("192.0.2.1"), 10, 20
		md.Enrich(fm)
		fm.Finalize()
	}); allocs != 0 {
		t.Errorf("%v allocations per flow", allocs)
	}
}

func TestMetadataConfigurationErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"exporters:\n  300.1.1.1:\n    name: x\n", "exporters.300.1.1.1"},
		{"exporters:\n  192.0.2.1:\n    interfaces:\n      3:\n        boundary: outside\n", "exporters.192.0.2.1.interfaces.3.boundary"},
		{"exporters:\n  192.0.2.1:\n    default:\n      boundary: outside\n", "exporters.192.0.2.1.default.boundary"},
		{"exporters:\n  192.0.2.1:\n    interfaces:\n      3:\n        speeed: 10\n", "speeed"},
	} {
		cfg := DefaultConfiguration()
		err := config.Decode([]byte(tc.yaml), &cfg)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v does not name %s", tc.yaml, err, tc.key)
		}
	}
	// The same prefix written twice.
	s, _ := schema.New(schema.DefaultConfiguration())
	if _, err := NewMetadata(map[string]ExporterMetadata{"192.0.2.0/24": {}, "192.0.2.9/24": {}}, s); err == nil {
		t.Error("duplicate prefix accepted")
	}
	if md, err := NewMetadata(nil, s); md != nil || err != nil {
		t.Errorf("no exporters: %v, %v", md, err)
	}
}

// BenchmarkMetadataEnrich measures the metadata step per flow: the exporter lookup, two
// interface lookups and three fragment copies. 0 allocs.
func BenchmarkMetadataEnrich(b *testing.B) {
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte(metadataYAML), &cfg); err != nil {
		b.Fatal(err)
	}
	s, _ := schema.New(schema.DefaultConfiguration())
	md, err := NewMetadata(cfg.Exporters, s)
	if err != nil {
		b.Fatal(err)
	}
	fm := s.NewFlowMessage()
	exporter := netip.MustParseAddr("192.0.2.1")
	b.ReportAllocs()
	for b.Loop() {
		fm.Reset()
		fm.ExporterAddress, fm.InIf, fm.OutIf = exporter, 10, 20
		md.Enrich(fm)
	}
}
