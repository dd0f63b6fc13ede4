package enrich

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"flowzero/enrich/networks"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

// benchFlow is one flow of the stream BenchmarkEnrich replays: what a NetFlow v9 decoder
// gives an edge router's flow.
type benchFlow struct {
	exporter         netip.Addr
	src, dst         netip.Addr
	inIf, outIf      uint32
	srcPort, dstPort uint16
	proto            uint8
	bytes, packets   uint64
}

var (
	benchAllOnce sync.Once
	benchGeoIP   string         // synthetic GeoIP database
	benchFlows   [4][]benchFlow // Zipf, uniform, Zipf with IPv4 remote addresses only, with IPv6 only
)

// TestMain removes the synthetic GeoIP database the benchmarks wrote (once per process, for
// every -count round).
func TestMain(m *testing.M) {
	code := m.Run()
	if benchGeoIP != "" {
		os.Remove(benchGeoIP)
	}
	os.Exit(code)
}

// benchGeoIPZipf is the exponent of the Zipf law that picks each prefix's GeoIP record.
const benchGeoIPZipf = 1.01

// benchGeoIPDatabase writes a synthetic GeoLite2-City-like database with AS numbers over the
// 1,062,046 prefixes of the real full table, shortest first so that longer ones carve theirs
// out, with 20,000 distinct records (country, state, city, AS) drawn with a Zipf law: the
// scale and skew of a real City database (millions of networks, a hundred thousand records,
// most networks on a few of them), built once per process.
func benchGeoIPDatabase(b *testing.B) string {
	path := testdata.Path(b, "rib", "bart-prefixes.txt.gz")
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	var prefixes []netip.Prefix
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		p, err := netip.ParsePrefix(strings.TrimSpace(sc.Text()))
		if err == nil {
			prefixes = append(prefixes, p.Masked())
		}
	}
	slices.SortFunc(prefixes, func(a, b netip.Prefix) int { return cmp.Compare(a.Bits(), b.Bits()) })
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-City", IncludeReservedNetworks: true, DisableIPv4Aliasing: true, RecordSize: 32})
	if err != nil {
		b.Fatal(err)
	}
	records := make([]mmdbtype.Map, 20000)
	for i := range records {
		records[i] = mmdbtype.Map{
			"country":                  mmdbtype.Map{"iso_code": mmdbtype.String(fmt.Sprintf("%c%c", 'A'+i%26, 'A'+i/26%26))},
			"subdivisions":             mmdbtype.Slice{mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(fmt.Sprintf("State %d", i/20))}}},
			"city":                     mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(fmt.Sprintf("City %d", i))}},
			"autonomous_system_number": mmdbtype.Uint32(1000 + i%5000),
		}
	}
	// Records are not equally common: a few (a large country's record without a city, its
	// capital's) hold most networks, as in a real City database (docs/design/enrich.md).
	rnd := rand.New(rand.NewPCG(3, 4))
	pick := rand.NewZipf(rnd, benchGeoIPZipf, 1, uint64(len(records)-1))
	for _, p := range prefixes {
		n := &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		if err := w.Insert(n, records[pick.Uint64()]); err != nil {
			b.Fatal(err)
		}
	}
	out := filepath.Join(os.TempDir(), fmt.Sprintf("flowzero-bench-geoip-%d.mmdb", os.Getpid()))
	o, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.WriteTo(o); err != nil {
		b.Fatal(err)
	}
	if err := o.Close(); err != nil {
		b.Fatal(err)
	}
	return out
}

// benchStream draws 65,536 flows: four exporters, interfaces among the configured ones, one
// address of each flow inside a configured network (the local side), the other (the remote
// side, the source two times out of three) an address of the full table: with zipf, drawn
// from 65,536 addresses of random prefixes with a Zipf law (s = 1.1: a few destinations
// carry most flows, as on a real network), otherwise each in a random prefix (every lookup
// a cache miss: the worst case). keep, when not nil, keeps only the flows whose remote
// address it accepts, drawing until there are 65,536: the flows of the same stream whose
// remote address is IPv4 (or IPv6), to tell what each family costs.
func benchStream(addrs []netip.Addr, zipf bool, keep func(netip.Addr) bool) []benchFlow {
	rnd := rand.New(rand.NewPCG(5, 6))
	z := rand.NewZipf(rnd, 1.1, 1, uint64(len(addrs)-1))
	exporters := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"),
		netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("2001:db8::1")}
	flows := make([]benchFlow, 1<<16)
	for i := 0; i < len(flows); {
		local := netip.AddrFrom4([4]byte{10, byte(rnd.IntN(8)), byte(rnd.IntN(250)), byte(1 + rnd.IntN(250))})
		remote := addrs[rnd.IntN(len(addrs))]
		if zipf {
			remote = addrs[z.Uint64()]
		}
		if keep != nil && !keep(remote) {
			continue
		}
		f := benchFlow{exporter: exporters[rnd.IntN(len(exporters))], src: remote, dst: local,
			inIf: uint32(1 + rnd.IntN(8)), outIf: uint32(100 + rnd.IntN(48)),
			srcPort: 443, dstPort: uint16(32768 + rnd.IntN(28000)), proto: 6,
			packets: uint64(1 + rnd.IntN(40)), bytes: uint64(40 + rnd.IntN(60000))}
		if rnd.IntN(3) == 0 {
			f.src, f.dst = local, remote
			f.inIf, f.outIf = f.outIf, f.inIf
			f.srcPort, f.dstPort = f.dstPort, f.srcPort
		}
		flows[i] = f
		i++
	}
	return flows
}

// benchStreams draws the streams of benchFlows.
func benchStreams(addrs []netip.Addr) [4][]benchFlow {
	return [4][]benchFlow{benchStream(addrs, true, nil), benchStream(addrs, false, nil),
		benchStream(addrs, true, netip.Addr.Is4), benchStream(addrs, true, netip.Addr.Is6)}
}

// benchSourceJSON is a network source of 5,000 entries: /24s of the full table's space
// named by customer, with sites and tenants.
func benchSourceJSON(addrs []netip.Addr) string {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 5000 {
		p, _ := addrs[i*7].Prefix(24)
		if !addrs[i*7].Is4() {
			p, _ = addrs[i*7].Prefix(48)
		}
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"prefix": %q, "name": "peer-%d", "site": "pop%d", "tenant": "t%d"}`, p, i, i%40, i%7)
	}
	sb.WriteString("]")
	return sb.String()
}

// BenchmarkEnrich measures Enrich on flows whose source and destination are random addresses
// of a full table, with every routing column enabled. "two-lookups" is the speed of light:
// the two RIB lookups alone, in the same run.
//
// "off" and "all" build whole flows from a stream of 65,536 realistic ones (append the
// decoder's columns, Finalize): "off" without enrichment, "all" with every source on in
// their collector order: exporter and interface metadata of 4 exporters with 56 interfaces each
// (static, SNMP answers and classifier rules: benchMetadataSources), the RIB
// (the full table, routing attributes), and the network attributes of 1,000 static
// networks, a network source of 5,000 entries over HTTP and a GeoIP database over the full
// table's 1,062,046 prefixes. all − off is the cost enrichment adds per flow. The flows are
// drawn with a Zipf law (see benchStream); "-uniform" runs draw every remote address from a
// random prefix (the worst case for caches) and "all-hot" repeats one flow (everything in
// cache: the cost in instructions). "metadata", "routing" and "networks" run one step each.
// The "-ipv4" and "-ipv6" runs take the flows of the Zipf stream whose remote address is
// IPv4 (IPv6): what a flow of each family costs. "floor-ipv4" runs the metadata step and
// benchFloor, the least any table layout could do, beside "all-ipv4" (not in bench-enrich:
// docs/design/enrich.md, "The floor of any table layout").
func BenchmarkEnrich(b *testing.B) {
	table, addrs := benchRIB(b)
	sch := routingSchema(b)
	fm := sch.NewFlowMessage()
	b.Run("flowzero", func(b *testing.B) {
		e, err := New(DefaultConfiguration(), table, sch)
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			fm.Reset()
			fm.SrcAddr, fm.DstAddr = addrs[i&(len(addrs)-1)], addrs[(i+1)&(len(addrs)-1)]
			e.Enrich(fm)
			i++
		}
		cpu.Stop(b)
	})
	b.Run("two-lookups", func(b *testing.B) {
		i := 0
		var sink uint8
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			fm.Reset()
			fm.SrcAddr, fm.DstAddr = addrs[i&(len(addrs)-1)], addrs[(i+1)&(len(addrs)-1)]
			r1, _ := table.Lookup(fm.SrcAddr)
			r2, _ := table.Lookup(fm.DstAddr)
			sink += r1.Bits + r2.Bits
			i++
		}
		cpu.Stop(b)
		_ = sink
	})

	benchAllOnce.Do(func() {
		benchGeoIP = benchGeoIPDatabase(b)
		benchFlows = benchStreams(addrs)
	})
	chain := benchChain(b, sch, addrs)
	run := func(b *testing.B, flows []benchFlow, chain Chain) {
		fm := sch.NewFlowMessage()
		i := 0
		runtime.GC() // the setup's garbage is collected before, not during, the loop
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			f := &flows[i&(len(flows)-1)]
			i++
			fm.Reset()
			fm.TimeReceived, fm.SamplingRate, fm.ExporterAddress = 1767225600, 1000, f.exporter
			fm.SrcAddr, fm.DstAddr, fm.InIf, fm.OutIf = f.src, f.dst, f.inIf, f.outIf
			fm.AppendUint(schema.ColumnBytes, f.bytes)
			fm.AppendUint(schema.ColumnPackets, f.packets)
			fm.AppendUint(schema.ColumnEType, 0x800)
			fm.AppendUint(schema.ColumnProto, uint64(f.proto))
			fm.AppendUint(schema.ColumnSrcPort, uint64(f.srcPort))
			fm.AppendUint(schema.ColumnDstPort, uint64(f.dstPort))
			fm.AppendUint(schema.ColumnForwardingStatus, 64)
			for _, e := range chain {
				e.Enrich(fm)
			}
			_ = fm.Finalize()
		}
		cpu.Stop(b)
	}
	b.Run("off", func(b *testing.B) { run(b, benchFlows[0], nil) })
	b.Run("all", func(b *testing.B) { run(b, benchFlows[0], chain) })
	b.Run("all-hot", func(b *testing.B) { run(b, benchFlows[0][:1], chain) })
	b.Run("off-uniform", func(b *testing.B) { run(b, benchFlows[1], nil) })
	b.Run("all-uniform", func(b *testing.B) { run(b, benchFlows[1], chain) })
	// Each step alone, to tell what each adds.
	b.Run("metadata", func(b *testing.B) { run(b, benchFlows[0], chain[:1]) })
	b.Run("routing", func(b *testing.B) { run(b, benchFlows[0], chain[1:2]) })
	b.Run("networks", func(b *testing.B) { run(b, benchFlows[0], chain[2:]) })
	// The floor of any table layout for IPv4 flows (benchFloor), beside all-ipv4.
	var floor *benchFloor
	floorRun := func(flows []benchFlow) func(b *testing.B) {
		return func(b *testing.B) {
			if floor == nil {
				floor = newBenchFloor(b, chain, sch)
			}
			run(b, flows, Chain{chain[0], floor})
		}
	}
	b.Run("floor-ipv4", floorRun(benchFlows[2]))
	b.Run("floor-ipv4-hot", floorRun(benchFlows[2][:1]))
	b.Run("all-ipv4-hot", func(b *testing.B) { run(b, benchFlows[2][:1], chain) })
	for i, family := range []string{"ipv4", "ipv6"} {
		flows := benchFlows[2+i]
		b.Run("off-"+family, func(b *testing.B) { run(b, flows, nil) })
		b.Run("all-"+family, func(b *testing.B) { run(b, flows, chain) })
		b.Run("routing-"+family, func(b *testing.B) { run(b, flows, chain[1:2]) })
		b.Run("networks-"+family, func(b *testing.B) { run(b, flows, chain[2:]) })
	}
}

// benchChain is the collector's enrichment chain with every source on.
func benchChain(b *testing.B, sch *schema.Schema, addrs []netip.Addr) Chain {
	b.Helper()
	var indexes []uint32
	for i := uint32(1); i <= 8; i++ {
		indexes = append(indexes, i)
	}
	for i := uint32(100); i < 148; i++ {
		indexes = append(indexes, i)
	}
	md := benchMetadataSources(b, sch, []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"),
		netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("2001:db8::1")}, indexes)
	rib, _ := benchRIB(b)
	re, err := New(DefaultConfiguration(), rib, sch)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, benchSourceJSON(addrs))
	}))
	b.Cleanup(srv.Close)
	na := DefaultNetworkAttributes()
	na.Networks = map[string]networks.Attributes{}
	local := benchLocalNetworks()
	for i, p := range local[:len(local)-1] {
		na.Networks[p.String()] = networks.Attributes{
			Name: fmt.Sprintf("cust-%d", i), Role: "customers", Site: fmt.Sprintf("par%d", i%3), Region: "eu-west", Tenant: fmt.Sprintf("t%d", i%11)}
	}
	na.Networks[local[len(local)-1].String()] = networks.Attributes{Country: "FR", State: "Île-de-France", City: "Paris"}
	na.NetworkSources = map[string]networks.SourceConfiguration{"ipam": func() networks.SourceConfiguration {
		s := networks.DefaultSourceConfiguration()
		s.URL = srv.URL
		s.CacheFile = filepath.Join(b.TempDir(), "ipam")
		s.Fields = networks.FieldMapping{Prefix: networks.FieldNames{"prefix"}, Name: networks.FieldNames{"name"},
			Site: networks.FieldNames{"site"}, Tenant: networks.FieldNames{"tenant"}}
		return s
	}()}
	na.GeoIP.Databases = []string{benchGeoIP}
	cfg := DefaultConfiguration()
	ne, err := networks.New(nil, na, sch, networks.Options{ASN: cfg.GeoIPASN(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := ne.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ne.Stop)
	return Chain{md, re, ne}
}

// benchLocalNetworks are the static networks of benchChain: 1,000 customers' /24s, then the
// /8 holding them.
func benchLocalNetworks() []netip.Prefix {
	var ps []netip.Prefix
	for i := range 1000 {
		ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i / 250), byte(i % 250), 0}), 24))
	}
	return append(ps, netip.MustParsePrefix("10.0.0.0/8"))
}

// BenchmarkNetworksLoad measures what the network attributes cost at load: reading the
// synthetic GeoIP database (1,062,046 networks, 20,000 records) and building the merged
// table, in seconds, and the heap the table keeps (MB, after GC).
func BenchmarkNetworksLoad(b *testing.B) {
	_, addrs := benchRIB(b)
	benchAllOnce.Do(func() {
		benchGeoIP = benchGeoIPDatabase(b)
		benchFlows = benchStreams(addrs)
	})
	sch := routingSchema(b)
	na := DefaultNetworkAttributes()
	na.GeoIP.Databases = []string{benchGeoIP}
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		ne, err := networks.New(nil, na, sch, networks.Options{ASN: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		if err := ne.Start(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "MB")
		if _, ok := ne.Lookup(addrs[0], 0); !ok {
			b.Fatal("an address of the full table is not in the GeoIP table")
		}
		ne.Stop()
		b.StartTimer()
	}
}
