package enrich

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/enrich/classifier"
	"flowzero/enrich/snmp/snmptest"
	"flowzero/internal/config"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

const rulesYAML = `
exporters:
  192.0.2.1:
    name: edge1.par1
    group: europe
    interfaces:
      10:
        name: et-0/0/1
        description: "Transit: Cogent 1-3834938493"
        speed: 100000
      11:
        name: et-0/0/2
        description: "PNI: Netflix (WL6-1190)"
        provider: netflix-static
      20:
        name: ae12
        description: "core: par2"
  192.0.2.2:
    name: edge2.fra1
    default:
      name: unknown
exporter-classifiers:
  - ClassifySiteRegex(Exporter.Name, "^[^.]+\\.([a-z]+)[0-9]", "$1")
  - Exporter.Name startsWith "edge" && ClassifyRole("edge") && ClassifyGroup("rules")
  - Exporter.IP == "192.0.2.66" && Reject()
  - Exporter.IP startsWith "2001:db8:" && ClassifyTenant("v6")
interface-classifiers:
  - Interface.Index == 666 && Reject()
  - |
    ClassifyConnectivityRegex(Interface.Description, "^(?i)(transit|pni|ppni|ix):? ", "$1") &&
    ClassifyProviderRegex(Interface.Description, "^[^ ]+? ([^ ]+)", "$1") &&
    ClassifyExternal()
  - Interface.Name == "" && Interface.Index > 0 && SetName(Format("if%d", Interface.Index))
  - ClassifyInternal()
`

func newTestCache(t *testing.T, yaml string, s *schema.Schema, clk *testutil.ManualClock) (*MetadataCache, *prometheus.Registry) {
	t.Helper()
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte(yaml), &cfg); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	deps := MetadataCacheDependencies{Registry: reg}
	if clk != nil {
		deps.Clock = clk
	}
	m, err := NewMetadataCache(cfg.Dynamic, cfg.Exporters, s, deps)
	if err != nil {
		t.Fatal(err)
	}
	if m == nil {
		t.Fatal("no cache")
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop() })
	return m, reg
}

// enrichOne runs a flow through the cache and returns its columns (nil: rejected).
func enrichOne(t *testing.T, e FlowEnricher, s *schema.Schema, exporter string, in, out uint32, vlans ...uint16) map[string]any {
	t.Helper()
	fm := s.NewFlowMessage()
	fm.ExporterAddress = netip.MustParseAddr(exporter)
	fm.InIf, fm.OutIf = in, out
	if len(vlans) == 2 {
		fm.SrcVlan, fm.DstVlan = vlans[0], vlans[1]
	}
	e.Enrich(fm)
	if fm.Rejected() {
		return nil
	}
	got := decodeColumns(t, s, fm.Finalize())
	for _, k := range []string{"ExporterAddress", "InIf", "OutIf", "SrcVlan", "DstVlan"} {
		delete(got, k)
	}
	return got
}

func TestMetadataCacheRules(t *testing.T) {
	s, err := schema.New(schema.Configuration{Enabled: []string{"SrcVlan", "DstVlan"}})
	if err != nil {
		t.Fatal(err)
	}
	m, reg := newTestCache(t, rulesYAML, s, nil)
	ext, in := uint64(schema.BoundaryExternal), uint64(schema.BoundaryInternal)
	for _, tc := range []struct {
		name     string
		exporter string
		in, out  uint32
		want     map[string]any
	}{
		{
			// Static name and group win; rules fill role and site, and classify interfaces
			// from their static descriptions.
			name: "static and rules", exporter: "192.0.2.1", in: 10, out: 20,
			want: map[string]any{
				"ExporterName": "edge1.par1", "ExporterGroup": "europe", "ExporterRole": "edge", "ExporterSite": "par",
				"InIfName": "et-0/0/1", "InIfDescription": "Transit: Cogent 1-3834938493", "InIfSpeed": uint64(100000),
				"InIfConnectivity": "transit", "InIfProvider": "cogent", "InIfBoundary": ext,
				"OutIfName": "ae12", "OutIfDescription": "core: par2", "OutIfBoundary": in,
			},
		},
		{
			// A static provider is kept; the rule fills connectivity and boundary.
			name: "static provider kept", exporter: "192.0.2.1", in: 11, out: 0,
			want: map[string]any{
				"ExporterName": "edge1.par1", "ExporterGroup": "europe", "ExporterRole": "edge", "ExporterSite": "par",
				"InIfName": "et-0/0/2", "InIfDescription": "PNI: Netflix (WL6-1190)",
				"InIfConnectivity": "pni", "InIfProvider": "netflix-static", "InIfBoundary": ext,
				"OutIfBoundary": in,
			},
		},
		{
			// An interface static metadata does not list: SetName names it.
			name: "unlisted interface", exporter: "192.0.2.1", in: 77, out: 10,
			want: map[string]any{
				"ExporterName": "edge1.par1", "ExporterGroup": "europe", "ExporterRole": "edge", "ExporterSite": "par",
				"InIfName": "if77", "InIfBoundary": in,
				"OutIfName": "et-0/0/1", "OutIfDescription": "Transit: Cogent 1-3834938493", "OutIfSpeed": uint64(100000),
				"OutIfConnectivity": "transit", "OutIfProvider": "cogent", "OutIfBoundary": ext,
			},
		},
		{
			// The static default's name wins over SetName.
			name: "static default", exporter: "192.0.2.2", in: 5, out: 6,
			want: map[string]any{
				"ExporterName": "edge2.fra1", "ExporterGroup": "rules", "ExporterRole": "edge", "ExporterSite": "fra",
				"InIfName": "unknown", "InIfBoundary": in, "OutIfName": "unknown", "OutIfBoundary": in,
			},
		},
		{
			name: "no static metadata", exporter: "2001:db8::7", in: 5000, out: 3,
			want: map[string]any{"ExporterTenant": "v6", "InIfName": "if5000", "InIfBoundary": in, "OutIfName": "if3", "OutIfBoundary": in},
		},
		{name: "exporter rejected", exporter: "192.0.2.66", in: 1, out: 2},
		{name: "interface rejected", exporter: "192.0.2.1", in: 10, out: 666},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := enrichOne(t, m, s, tc.exporter, tc.in, tc.out)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
	const rejected = `
# HELP flowzero_enrich_rejected_flows_total Flows dropped by enrichment, by exporter and reason: a Reject() in an exporter or interface rule, or an interface no source knows with drop-unknown-interfaces.
# TYPE flowzero_enrich_rejected_flows_total counter
flowzero_enrich_rejected_flows_total{exporter="192.0.2.1",reason="exporter-rule"} 0
flowzero_enrich_rejected_flows_total{exporter="192.0.2.1",reason="interface-rule"} 1
flowzero_enrich_rejected_flows_total{exporter="192.0.2.1",reason="unknown-interface"} 0
flowzero_enrich_rejected_flows_total{exporter="192.0.2.2",reason="exporter-rule"} 0
flowzero_enrich_rejected_flows_total{exporter="192.0.2.2",reason="interface-rule"} 0
flowzero_enrich_rejected_flows_total{exporter="192.0.2.2",reason="unknown-interface"} 0
flowzero_enrich_rejected_flows_total{exporter="192.0.2.66",reason="exporter-rule"} 1
flowzero_enrich_rejected_flows_total{exporter="192.0.2.66",reason="interface-rule"} 0
flowzero_enrich_rejected_flows_total{exporter="192.0.2.66",reason="unknown-interface"} 0
flowzero_enrich_rejected_flows_total{exporter="2001:db8::7",reason="exporter-rule"} 0
flowzero_enrich_rejected_flows_total{exporter="2001:db8::7",reason="interface-rule"} 0
flowzero_enrich_rejected_flows_total{exporter="2001:db8::7",reason="unknown-interface"} 0
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(rejected), "flowzero_enrich_rejected_flows_total"); err != nil {
		t.Error(err)
	}
	// Each (exporter, interface) was classified once: 10, 20, 11, 0, 77 and 666 of
	// 192.0.2.1, 5 and 6 of 192.0.2.2, 5000 and 3 of 2001:db8::7; the interfaces of the
	// rejected exporter are never looked up.
	if n := promtest.ToFloat64(m.metrics.misses); n != 10 {
		t.Errorf("%v misses", n)
	}
	// Flows again: all hits, no allocation.
	fm := s.NewFlowMessage()
	exporter := netip.MustParseAddr("192.0.2.1")
	if allocs := testing.AllocsPerRun(1000, func() {
		fm.Reset()
		fm.ExporterAddress, fm.InIf, fm.OutIf = exporter, 10, 20
		m.Enrich(fm)
		fm.Finalize()
	}); allocs != 0 {
		t.Errorf("%v allocations per flow", allocs)
	}
	if n := promtest.ToFloat64(m.metrics.misses); n != 10 {
		t.Errorf("%v misses after hits", n)
	}
}

func TestMetadataCacheVLAN(t *testing.T) {
	s, err := schema.New(schema.Configuration{Enabled: []string{"SrcVlan", "DstVlan"}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := newTestCache(t, `
exporters:
  192.0.2.1:
    interfaces:
      3:
        name: xe-0/0/3
interface-classifiers:
  - Interface.VLAN > 0 && SetName(Format("%s.%d", Interface.Name, Interface.VLAN))
  - Interface.VLAN == 100 && ClassifyConnectivity("customer")
`, s, nil)
	if !m.byVLAN.Load() {
		t.Fatal("rules read Interface.VLAN: interfaces must be cached per VLAN")
	}
	// The static name wins over SetName; the VLAN still classifies.
	for _, tc := range []struct {
		vlan uint16
		want map[string]any
	}{
		{100, map[string]any{"InIfName": "xe-0/0/3", "InIfConnectivity": "customer"}},
		{200, map[string]any{"InIfName": "xe-0/0/3"}},
	} {
		if got := enrichOne(t, m, s, "192.0.2.1", 3, 0, tc.vlan, 0); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("VLAN %d: %v, want %v", tc.vlan, got, tc.want)
		}
	}
	// Without a static name, SetName names each VLAN.
	for _, vlan := range []uint16{100, 200} {
		got := enrichOne(t, m, s, "192.0.2.9", 0, 7, 0, vlan)
		if got["OutIfName"] != fmt.Sprintf(".%d", vlan) {
			t.Errorf("VLAN %d: %v", vlan, got)
		}
	}
}

func TestMetadataCacheDropUnknown(t *testing.T) {
	s, _ := schema.New(schema.DefaultConfiguration())
	m, reg := newTestCache(t, `
exporters:
  192.0.2.1:
    interfaces:
      3:
        name: xe-0/0/3
drop-unknown-interfaces: true
`, s, nil)
	if got := enrichOne(t, m, s, "192.0.2.1", 3, 0); !reflect.DeepEqual(got, map[string]any{"InIfName": "xe-0/0/3"}) {
		t.Errorf("known interface and 0: %v", got)
	}
	if got := enrichOne(t, m, s, "192.0.2.1", 3, 4); got != nil {
		t.Errorf("unknown interface kept: %v", got)
	}
	if got := enrichOne(t, m, s, "192.0.2.5", 0, 0); got == nil {
		t.Errorf("flow without interfaces dropped")
	}
	if n := promtest.ToFloat64(m.metrics.rejected.WithLabelValues("192.0.2.1", "unknown-interface")); n != 1 {
		t.Errorf("%v rejected", n)
	}
	_ = reg
}

func TestMetadataCacheBounds(t *testing.T) {
	s, _ := schema.New(schema.DefaultConfiguration())
	clk := testutil.NewManualClock()
	m, _ := newTestCache(t, `
exporters:
  192.0.2.0/24:
    name: static
    default:
      name: default
interface-classifiers:
  - ClassifyProvider("rules")
classifier-cache-size: 5
classifier-cache-duration: 1h
`, s, clk)
	// Interfaces 100 to 103, and 0, fill the cache; 104 gets the static default alone.
	for i := range uint32(4) {
		if got := enrichOne(t, m, s, "192.0.2.1", 100+i, 0); got["InIfProvider"] != "rules" || got["OutIfProvider"] != "rules" {
			t.Fatalf("interface %d: %v", 100+i, got)
		}
	}
	want := map[string]any{"ExporterName": "static", "InIfName": "default", "OutIfName": "default", "OutIfProvider": "rules"}
	if got := enrichOne(t, m, s, "192.0.2.1", 104, 0); !reflect.DeepEqual(got, want) {
		t.Errorf("over the bound: %v", got)
	}
	if n := promtest.ToFloat64(m.metrics.full); n != 1 {
		t.Errorf("%v refused", n)
	}
	// Interfaces used within the hour stay, the others go.
	m.sweep()
	clk.Advance(40 * time.Minute)
	enrichOne(t, m, s, "192.0.2.1", 100, 0)
	m.sweep()
	clk.Advance(40 * time.Minute)
	m.sweep()
	e, _ := m.exporters.Load().get(netip.MustParseAddr("192.0.2.1"))
	var left []uint32
	m.eachSlot(e, func(s *ifaceSlot) { left = append(left, s.index) })
	slices.Sort(left)
	if !slices.Equal(left, []uint32{0, 100}) || m.slots != 2 {
		t.Errorf("after expiry: %v (%d slots)", left, m.slots)
	}
	if n := promtest.ToFloat64(m.metrics.entries); n != 2 {
		t.Errorf("entries gauge %v", n)
	}
	// Room again: 104 is classified.
	if got := enrichOne(t, m, s, "192.0.2.1", 104, 100); got["InIfProvider"] != "rules" {
		t.Errorf("after expiry: %v", got)
	}
}

func TestMetadataCacheOff(t *testing.T) {
	s, _ := schema.New(schema.DefaultConfiguration())
	cfg := DefaultConfiguration()
	m, err := NewMetadataCache(cfg.Dynamic, nil, s, MetadataCacheDependencies{})
	if m != nil || err != nil {
		t.Errorf("nothing enabled: %v, %v", m, err)
	}
	for _, tc := range []struct{ yaml, key string }{
		{"interface-classifiers:\n  - Interface.Nme == \"\"\n", "interface-classifiers[0]: line 1, column 11"},
		{"classifier-cache-size: 0\n", "classifier-cache-size"},
		{"snmp:\n  enabled: true\n  workers: 0\n", "snmp.workers"},
		{"snmp:\n  enabled: true\n  credentials:\n    ::/0:\n      user-name: u\n      authentication-protocol: sha\n", "snmp.credentials.::/0.authentication-passphrase"},
	} {
		cfg := DefaultConfiguration()
		err := config.Decode([]byte(tc.yaml), &cfg)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v does not name %s", tc.yaml, err, tc.key)
		}
	}
}

// TestMetadataCacheSNMP runs the cache against Debian's snmpd: flows on interfaces not
// polled yet go on at once without names, then get the agent's names, descriptions and
// speeds and the rules' classification of them; the sysName feeds the exporter rules.
func TestMetadataCacheSNMP(t *testing.T) {
	ifaces := snmptest.Interfaces(t)
	var indexes []uint32
	for index := range ifaces {
		indexes = append(indexes, index)
	}
	slices.Sort(indexes)
	aliases, speeds := map[uint32]string{}, map[uint32]uint32{}
	for i, index := range indexes {
		aliases[index] = fmt.Sprintf("Transit: Provider%d", i)
		speeds[index] = 10000 * uint32(i+1)
	}
	agent := snmptest.Start(t, snmptest.Options{Community: "flowzero-ro", SysName: "edge3.ams1.example.net", Aliases: aliases, Speeds: speeds})
	s, _ := schema.New(schema.DefaultConfiguration())
	m, reg := newTestCache(t, fmt.Sprintf(`
exporter-classifiers:
  - ClassifySiteRegex(Exporter.Name, "^[^.]+\\.([a-z]+)[0-9]", "$1")
interface-classifiers:
  - |
    ClassifyConnectivityRegex(Interface.Description, "^(?i)(transit|pni|ppni|ix):? ", "$1") &&
    ClassifyProviderRegex(Interface.Description, "^[^ ]+? ([^ ]+)", "$1") &&
    ClassifyExternal()
snmp:
  enabled: true
  credentials:
    ::/0:
      communities: flowzero-ro
  ports:
    127.0.0.1: %d
  poller-timeout: 500ms
  poller-retries: 0
  breaker-failures: 2
`, agent.Addr.Port), s, nil)
	exporter := "127.0.0.1"
	in, out := indexes[0], indexes[len(indexes)-1]
	// The first flow does not wait for the interfaces' poll (the sysName, asked when the
	// exporter was first seen a moment before, may be there already).
	if got := enrichOne(t, m, s, exporter, in, out); got["InIfName"] != nil || got["OutIfName"] != nil {
		t.Errorf("first flow: %v", got)
	}
	want := map[string]any{
		"ExporterName": "edge3.ams1.example.net", "ExporterSite": "ams",
		"InIfName": ifaces[in], "InIfDescription": aliases[in], "InIfSpeed": uint64(speeds[in]),
		"InIfConnectivity": "transit", "InIfProvider": "provider0", "InIfBoundary": uint64(schema.BoundaryExternal),
		"OutIfName": ifaces[out], "OutIfDescription": aliases[out], "OutIfSpeed": uint64(speeds[out]),
		"OutIfConnectivity": "transit", "OutIfProvider": fmt.Sprintf("provider%d", len(indexes)-1), "OutIfBoundary": uint64(schema.BoundaryExternal),
	}
	var got map[string]any
	testutil.WaitUntil(t, "the SNMP answers in the flows", func() bool {
		got = enrichOne(t, m, s, exporter, in, out)
		return reflect.DeepEqual(got, want)
	})
	if n := promtest.ToFloat64(m.metrics.refreshes); n < 2 {
		t.Errorf("%v refreshes", n)
	}
	// The agent goes silent: flows keep their columns.
	agent.Pause(t)
	defer agent.Resume(t)
	m.SNMP().Lookup(netip.MustParseAddr(exporter), 31337)
	testutil.WaitUntil(t, "the breaker to open", func() bool { return m.SNMP().BreakerOpen(netip.MustParseAddr(exporter)) })
	if got := enrichOne(t, m, s, exporter, in, out); !reflect.DeepEqual(got, want) {
		t.Errorf("agent silent: %v", got)
	}
	if n, err := promtest.GatherAndCount(reg, "flowzero_enrich_snmp_breaker_open"); err != nil || n != 1 {
		t.Errorf("breaker metric: %d series, %v", n, err)
	}
}

// Interfaces named by static metadata (listed, or the exporter's default) are never asked
// of SNMP, neither by their first flow nor by the sweep that reports the interfaces used.
func TestMetadataCacheStaticInterfacesNotPolled(t *testing.T) {
	agent := snmptest.Start(t, snmptest.Options{Community: "flowzero-ro", SysName: "edge9.par1"})
	s, _ := schema.New(schema.DefaultConfiguration())
	m, reg := newTestCache(t, fmt.Sprintf(`
exporters:
  127.0.0.1:
    interfaces:
      7:
        name: static-7
    default:
      name: static-if
snmp:
  enabled: true
  credentials:
    ::/0:
      communities: flowzero-ro
  ports:
    127.0.0.1: %d
`, agent.Addr.Port), s, nil)
	enrichOne(t, m, s, "127.0.0.1", 7, 8)
	queued := func() float64 {
		n, err := gatheredCounter(reg, "flowzero_enrich_snmp_polls_queued_total")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The exporter has no static name: its sysName is asked, and nothing else.
	if n := queued(); n != 1 {
		t.Errorf("%v polls queued by the first flow, want 1 (the sysName)", n)
	}
	m.sweep()
	if n := queued(); n != 1 {
		t.Errorf("statically named interfaces 7 and 8 queued for SNMP by the sweep: %v polls queued", n)
	}
}

// An exporter whose flows carry interface 0 only takes its name from SNMP's sysName. When
// that poll fails, it is tried again until the agent answers.
func TestMetadataCacheSysNameRetried(t *testing.T) {
	agent := snmptest.Start(t, snmptest.Options{Community: "flowzero-ro", SysName: "edge9.par1"})
	s, _ := schema.New(schema.DefaultConfiguration())
	agent.Pause(t)
	m, reg := newTestCache(t, fmt.Sprintf(`
snmp:
  enabled: true
  credentials:
    ::/0:
      communities: flowzero-ro
  ports:
    127.0.0.1: %d
  poller-timeout: 200ms
  poller-retries: 0
  cache-check-interval: 100ms
  breaker-cooldown: 200ms
`, agent.Addr.Port), s, nil)
	enrichOne(t, m, s, "127.0.0.1", 0, 0)
	testutil.WaitUntil(t, "a failed sysName poll", func() bool {
		n, _ := gatheredCounter(reg, "flowzero_enrich_snmp_poll_errors_total")
		return n > 0
	})
	agent.Resume(t)
	testutil.WaitUntil(t, "the sysName in the flows once the agent answers", func() bool {
		return enrichOne(t, m, s, "127.0.0.1", 0, 0)["ExporterName"] == "edge9.par1"
	})
}

// A sysName learned for an exporter without SNMP interfaces stays while the exporter is in
// use: classifying it again (a rule reload) with its agent silent keeps ExporterName.
func TestMetadataCacheReloadKeepsSysName(t *testing.T) {
	agent := snmptest.Start(t, snmptest.Options{Community: "flowzero-ro", SysName: "edge9.par1"})
	s, _ := schema.New(schema.DefaultConfiguration())
	clk := testutil.NewManualClock()
	m, reg := newTestCache(t, fmt.Sprintf(`
exporter-classifiers:
  - ClassifySite("par")
snmp:
  enabled: true
  credentials:
    ::/0:
      communities: flowzero-ro
  ports:
    127.0.0.1: %d
  agents:
    192.0.2.2: 127.0.0.1:%d
  poller-timeout: 200ms
  poller-retries: 0
  cache-check-interval: 20ms
  cache-refresh: 1h
`, agent.Addr.Port, agent.Addr.Port), s, clk)
	testutil.WaitUntil(t, "the sysName in the flows", func() bool {
		return enrichOne(t, m, s, "127.0.0.1", 0, 0)["ExporterName"] == "edge9.par1"
	})
	// Another exporter with an interface entry, whose refresh tells when a check has run.
	other := netip.MustParseAddr("192.0.2.2")
	testutil.WaitUntil(t, "an interface of another exporter", func() bool {
		_, ok := m.SNMP().Lookup(other, 1)
		return ok
	})
	agent.Pause(t)
	defer agent.Resume(t)
	clk.Advance(time.Hour)
	testutil.WaitUntil(t, "a check of the SNMP cache", func() bool {
		n, _ := gatheredCounter(reg, "flowzero_enrich_snmp_cache_refreshes_total")
		return n > 0
	})
	if err := m.ReloadRules(classifier.Configuration{ExporterClassifiers: []string{`ClassifySite("fra")`}}); err != nil {
		t.Fatal(err)
	}
	got := enrichOne(t, m, s, "127.0.0.1", 0, 0)
	if got["ExporterName"] != "edge9.par1" || got["ExporterSite"] != "fra" {
		t.Errorf("after a rule reload with the agent silent: %v, want the last good sysName and the new site", got)
	}
}

// gatheredCounter sums a counter's series.
func gatheredCounter(reg *prometheus.Registry, name string) (float64, error) {
	fams, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum, nil
}

func TestMetadataCacheExporterBound(t *testing.T) {
	s, _ := schema.New(schema.DefaultConfiguration())
	m, _ := newTestCache(t, `
exporters:
  10.0.0.0/8:
    name: static
interface-classifiers:
  - ClassifyProvider("rules")
`, s, nil)
	m.maxExporters = 16
	for i := range m.maxExporters {
		if got := enrichOne(t, m, s, netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String(), 1, 0); got["InIfProvider"] != "rules" {
			t.Fatalf("exporter %d: %v", i, got)
		}
	}
	// One more: static metadata only, counted.
	if got := enrichOne(t, m, s, "10.1.0.0", 1, 0); !reflect.DeepEqual(got, map[string]any{"ExporterName": "static"}) {
		t.Errorf("beyond the bound: %v", got)
	}
	if n := promtest.ToFloat64(m.metrics.exportersFull); n != 1 {
		t.Errorf("%v flows beyond the bound", n)
	}
}

// TestBenchMetadataSources checks that the cache the benchmarks measure has every source on
// and warm: static columns for the first exporter, SNMP's and the rules' for the others
// (IPv6 included), all hits.
func TestBenchMetadataSources(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	exporters := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::1")}
	m := benchMetadataSources(t, s, exporters, []uint32{1, 2, 100})
	misses := promtest.ToFloat64(m.metrics.misses)
	ext, internal := uint64(schema.BoundaryExternal), uint64(schema.BoundaryInternal)
	if got, want := enrichOne(t, m, s, "192.0.2.1", 2, 100), map[string]any{
		"ExporterName": "edge0.par1", "ExporterGroup": "europe", "ExporterSite": "par", "ExporterRole": "edge",
		"InIfName": "et-0/0/1", "InIfDescription": "Transit: Cogent 1", "InIfSpeed": uint64(100000),
		"InIfConnectivity": "transit", "InIfProvider": "cogent", "InIfBoundary": ext,
		"OutIfName": "et-0/0/2", "OutIfDescription": "Transit: Cogent 2", "OutIfSpeed": uint64(100000),
		"OutIfConnectivity": "transit", "OutIfProvider": "cogent", "OutIfBoundary": ext,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("static exporter:\n got %v\nwant %v", got, want)
	}
	if got, want := enrichOne(t, m, s, "2001:db8::1", 1, 2), map[string]any{
		"ExporterName": "edge2.fra2", "ExporterSite": "fra", "ExporterRole": "edge",
		"InIfName": "xe-1/2/0", "InIfDescription": "core: to edge0", "InIfSpeed": uint64(10000), "InIfBoundary": internal,
		"OutIfName": "xe-1/2/1", "OutIfDescription": "PNI: Netflix 1", "OutIfSpeed": uint64(10000),
		"OutIfConnectivity": "pni", "OutIfProvider": "netflix", "OutIfBoundary": ext,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("SNMP exporter:\n got %v\nwant %v", got, want)
	}
	if n := promtest.ToFloat64(m.metrics.misses); n != misses {
		t.Errorf("%v misses after the warm-up", n-misses)
	}
}

// TestMetadataCacheReloadRules checks that reloaded rules classify the exporters and
// interfaces already cached, the next flow on, that rules switching to per-VLAN keys do too,
// and that a rule that does not compile is an error naming it and keeps the previous rules.
func TestMetadataCacheReloadRules(t *testing.T) {
	s, err := schema.New(schema.Configuration{Enabled: []string{"SrcVlan", "DstVlan"}})
	if err != nil {
		t.Fatal(err)
	}
	m, reg := newTestCache(t, `
exporter-classifiers:
  - ClassifySite("par")
interface-classifiers:
  - ClassifyProvider("cogent") && ClassifyExternal()
`, s, nil)
	check := func(what string, vlan uint16, want map[string]any) {
		t.Helper()
		if got := enrichOne(t, m, s, "192.0.2.1", 10, 20, vlan, vlan); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v\nwant %v", what, got, want)
		}
	}
	ext := uint64(schema.BoundaryExternal)
	check("before", 0, map[string]any{"ExporterSite": "par", "InIfProvider": "cogent", "InIfBoundary": ext,
		"OutIfProvider": "cogent", "OutIfBoundary": ext})

	// A bad rule: an error naming it and the position, the previous rules stay.
	err = m.ReloadRules(classifier.Configuration{
		ExporterClassifiers:  []string{`ClassifySite("fra")`},
		InterfaceClassifiers: []string{`ClassifyProvider("x")`, `ClassifyProvider(`},
	})
	if err == nil || !strings.Contains(err.Error(), "interface-classifiers[1]") || !strings.Contains(err.Error(), "line 1, column") {
		t.Fatalf("bad rule: %v", err)
	}
	// The same rules: nothing classified again.
	refreshes := promtest.ToFloat64(m.metrics.refreshes)
	if err := m.ReloadRules(classifier.Configuration{ExporterClassifiers: []string{`ClassifySite("par")`},
		InterfaceClassifiers: []string{`ClassifyProvider("cogent") && ClassifyExternal()`}}); err != nil {
		t.Fatal(err)
	}
	if n := promtest.ToFloat64(m.metrics.refreshes); n != refreshes {
		t.Errorf("%v refreshes for the same rules", n-refreshes)
	}
	check("after a bad rule", 0, map[string]any{"ExporterSite": "par", "InIfProvider": "cogent", "InIfBoundary": ext,
		"OutIfProvider": "cogent", "OutIfBoundary": ext})

	// New rules: the cached exporter and interfaces are classified again.
	if err := m.ReloadRules(classifier.Configuration{
		ExporterClassifiers:  []string{`ClassifySite("fra")`},
		InterfaceClassifiers: []string{`Interface.Index == 10 && ClassifyProvider("telia")`, `ClassifyInternal()`},
	}); err != nil {
		t.Fatal(err)
	}
	in := uint64(schema.BoundaryInternal)
	check("reloaded", 0, map[string]any{"ExporterSite": "fra", "InIfProvider": "telia", "InIfBoundary": in, "OutIfBoundary": in})

	// Rules reading the VLAN: interfaces are keyed by VLAN from then on.
	if err := m.ReloadRules(classifier.Configuration{
		InterfaceClassifiers: []string{`Interface.VLAN == 100 && ClassifyConnectivity("customer")`},
	}); err != nil {
		t.Fatal(err)
	}
	if !m.byVLAN.Load() {
		t.Fatal("rules read Interface.VLAN: interfaces must be cached per VLAN")
	}
	check("per VLAN, 100", 100, map[string]any{"InIfConnectivity": "customer", "OutIfConnectivity": "customer"})
	check("per VLAN, 200", 200, map[string]any{})
	// And back: one entry per interface.
	if err := m.ReloadRules(classifier.Configuration{InterfaceClassifiers: []string{`ClassifyProvider("zayo")`}}); err != nil {
		t.Fatal(err)
	}
	check("without VLAN", 100, map[string]any{"InIfProvider": "zayo", "OutIfProvider": "zayo"})
	if n := promtest.ToFloat64(m.metrics.entries); n != 2 {
		t.Errorf("%v cached interfaces, want 2", n)
	}
	// The rules' metrics are still registered once, counting the reloaded rules' runs.
	if n, err := promtest.GatherAndCount(reg, "flowzero_enrich_classifier_runs_total"); err != nil || n != 2 {
		t.Errorf("classifier_runs_total: %d series, %v", n, err)
	}
}
