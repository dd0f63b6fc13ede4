package enrich

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"flowzero/internal/config"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

// benchInterfaceFlow is what the metadata steps read from a flow.
type benchInterfaceFlow struct {
	exporter netip.Addr
	in, out  uint32
}

const (
	benchExporters  = 8
	benchInterfaces = 48
)

// benchMetadataSources returns a started MetadataCache with every source on, as a collector
// with static metadata, SNMP and classifier rules has it once warm, for the given exporters,
// each with the interfaces indexes: the first quarter of the exporters (at least one)
// described statically, the others named by SNMP (their answers read from a cache file, so
// that nothing is polled), rules classifying every exporter and interface. Every (exporter,
// interface) is classified before it returns: flows on them are cache hits.
// BenchmarkMetadataCache and BenchmarkEnrich use it.
func benchMetadataSources(b testing.TB, s *schema.Schema, exporters []netip.Addr, indexes []uint32) *MetadataCache {
	b.Helper()
	dir := b.TempDir()
	now := testutil.Now().UTC()
	type iface struct {
		Index       uint32    `json:"index"`
		Name        string    `json:"name"`
		Description string    `json:"description"`
		Speed       uint32    `json:"speed"`
		Found       bool      `json:"found"`
		Polled      time.Time `json:"polled"`
	}
	type exporter struct {
		Exporter   string  `json:"exporter"`
		Name       string  `json:"name"`
		NamePolled bool    `json:"name-polled"`
		Interfaces []iface `json:"interfaces"`
	}
	file := struct {
		Format    string     `json:"format"`
		Exporters []exporter `json:"exporters"`
	}{Format: "flowzero-snmp-cache/1"}
	static := "exporters:\n"
	for e, a := range exporters {
		if e < max(1, len(exporters)/4) {
			static += fmt.Sprintf("  %q:\n    name: edge%d.par1\n    group: europe\n    interfaces:\n", a, e)
			for i, index := range indexes {
				static += fmt.Sprintf("      %d:\n        name: et-0/0/%d\n        description: \"Transit: Cogent %d\"\n        speed: 100000\n", index, i, i)
			}
			continue
		}
		x := exporter{Exporter: a.String(), Name: fmt.Sprintf("edge%d.fra%d", e, e%3), NamePolled: true}
		for i, index := range indexes {
			descr := fmt.Sprintf("PNI: Netflix %d", i)
			if i%3 == 0 {
				descr = fmt.Sprintf("core: to edge%d", i)
			}
			x.Interfaces = append(x.Interfaces, iface{Index: index, Name: fmt.Sprintf("xe-1/2/%d", i), Description: descr, Speed: 10000, Found: true, Polled: now})
		}
		file.Exporters = append(file.Exporters, x)
	}
	data, err := json.Marshal(file)
	if err != nil {
		b.Fatal(err)
	}
	cacheFile := filepath.Join(dir, "snmp-cache.json")
	if err := os.WriteFile(cacheFile, data, 0o600); err != nil {
		b.Fatal(err)
	}
	yaml := static + fmt.Sprintf(`
exporter-classifiers:
  - ClassifySiteRegex(Exporter.Name, "^[^.]+\\.([a-z]+)[0-9]", "$1")
  - Exporter.Name startsWith "edge" && ClassifyRole("edge")
interface-classifiers:
  - |
    ClassifyConnectivityRegex(Interface.Description, "^(?i)(transit|pni|ppni|ix):? ", "$1") &&
    ClassifyProviderRegex(Interface.Description, "^[^ ]+? ([^ ]+)", "$1") &&
    ClassifyExternal()
  - ClassifyInternal()
snmp:
  enabled: true
  cache-persist-file: %s
`, cacheFile)
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte(yaml), &cfg); err != nil {
		b.Fatal(err)
	}
	m, err := NewMetadataCache(cfg.Dynamic, cfg.Exporters, s, MetadataCacheDependencies{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Stop() })
	fm := s.NewFlowMessage()
	for _, a := range exporters {
		for _, index := range indexes {
			fm.Reset()
			fm.ExporterAddress, fm.InIf, fm.OutIf = a, index, index
			m.Enrich(fm)
			if fm.Rejected() {
				b.Fatalf("flow on %s, interface %d rejected", a, index)
			}
			if got := fm.Finalize(); len(got) == 0 {
				b.Fatalf("flow on %s, interface %d: empty message", a, index)
			}
		}
	}
	return m
}

// benchMetadataCache returns benchMetadataSources for 8 exporters with 48 interfaces each,
// and a stream of 4096 flows over them.
func benchMetadataCache(b testing.TB, s *schema.Schema) (*MetadataCache, []benchInterfaceFlow) {
	b.Helper()
	var addrs []netip.Addr
	for e := range benchExporters {
		addrs = append(addrs, netip.AddrFrom4([4]byte{192, 0, 2, byte(e + 1)}))
	}
	var indexes []uint32
	for i := range uint32(benchInterfaces) {
		indexes = append(indexes, i+1)
	}
	m := benchMetadataSources(b, s, addrs, indexes)
	rnd := rand.New(rand.NewPCG(3, 4))
	flows := make([]benchInterfaceFlow, 4096)
	for i := range flows {
		flows[i] = benchInterfaceFlow{exporter: addrs[rnd.IntN(len(addrs))], in: indexes[rnd.IntN(len(indexes))], out: indexes[rnd.IntN(len(indexes))]}
	}
	return m, flows
}

// BenchmarkMetadataCache measures the exporter and interface step per flow with every
// source on (static metadata, SNMP, rules), all cache hits ("all-sources"), beside the
// static Metadata step with the same columns given statically for every exporter
// ("static-only"): both cost three lookups and three fragment copies; "none" is the loop
// without enrichment (the flow's Reset). 0 allocs; cpu-ns/op is the loop thread's CPU time.
func BenchmarkMetadataCache(b *testing.B) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	m, flows := benchMetadataCache(b, s)
	// The static equivalent: every exporter's columns as the cache has them.
	exporters := map[string]ExporterMetadata{}
	for _, f := range flows {
		e, ok := exporters[f.exporter.String()]
		if !ok {
			e = ExporterMetadata{Name: "edge.par1", Group: "europe", Role: "edge", Site: "par", Interfaces: map[uint32]InterfaceMetadata{}}
		}
		for _, i := range []uint32{f.in, f.out} {
			e.Interfaces[i] = InterfaceMetadata{Name: "xe-1/2/3", Description: "PNI: Netflix 3", Speed: 10000, Provider: "netflix", Connectivity: "pni", Boundary: "external"}
		}
		exporters[f.exporter.String()] = e
	}
	static, err := NewMetadata(exporters, s)
	if err != nil {
		b.Fatal(err)
	}
	fm := s.NewFlowMessage()
	run := func(b *testing.B, e FlowEnricher) {
		cpu := testutil.StartCPU(b)
		for i := range b.N {
			f := &flows[i&(len(flows)-1)]
			fm.Reset()
			fm.ExporterAddress, fm.InIf, fm.OutIf = f.exporter, f.in, f.out
			e.Enrich(fm)
		}
		cpu.Stop(b)
	}
	b.Run("all-sources", func(b *testing.B) { run(b, m) })
	b.Run("static-only", func(b *testing.B) { run(b, static) })
	b.Run("none", func(b *testing.B) { run(b, Chain{}) })
}

// BenchmarkExporterTable compares MetadataCache's exporter table with the Go map keyed by the
// 16-byte address that Metadata uses, over the exporters of a flow stream (docs/design/enrich.md).
func BenchmarkExporterTable(b *testing.B) {
	var states []*exporterState
	m := map[[16]byte]*exporterState{}
	t := newAddrTable[*exporterState]()
	for i := range benchExporters {
		e := &exporterState{addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})}
		states = append(states, e)
		m[e.addr.As16()] = e
		t = t.with(e.addr, e)
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	addrs := make([]netip.Addr, 4096)
	for i := range addrs {
		addrs[i] = states[rnd.IntN(len(states))].addr
	}
	var sink *exporterState
	b.Run("table", func(b *testing.B) {
		cpu := testutil.StartCPU(b)
		for i := range b.N {
			sink, _ = t.get(addrs[i&(len(addrs)-1)])
		}
		cpu.Stop(b)
	})
	b.Run("map-as16", func(b *testing.B) {
		cpu := testutil.StartCPU(b)
		for i := range b.N {
			sink = m[addrs[i&(len(addrs)-1)].As16()]
		}
		cpu.Stop(b)
	})
	_ = sink
}
