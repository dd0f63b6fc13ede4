package native

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"net/netip"
	"strings"
	"testing"
	"time"

	"flowzero/pbwire"
	"flowzero/schema"
	"flowzero/store/ddl"
	"flowzero/store/internal/storetest"
)

func mustEncoder(t testing.TB, s *schema.Schema) *Encoder {
	t.Helper()
	enc, err := NewEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// aggDims returns the aggregated tables' dimensions of s with the default configuration.
func aggDims(s *schema.Schema) []*schema.Column {
	return ddl.New(ddl.DefaultConfiguration(), s, "", nil).AggregatedKeyDims()
}

// groupsInGo sums Bytes and Packets and counts the flows per dimensions the slow way, from the decoded messages:
// the values as the tables hold them, joined by "|", with the time rounded down.
func groupsInGo(t *testing.T, s *schema.Schema, dims []*schema.Column, interval uint64, msgs [][]byte) map[string][3]uint64 {
	t.Helper()
	out := map[string][3]uint64{}
	for _, m := range msgs {
		vals := map[string][]any{}
		if err := s.DecodeMessage(m, func(c *schema.Column, v any) { vals[c.Name] = append(vals[c.Name], v) }); err != nil {
			t.Fatal(err)
		}
		var key []string
		for _, c := range dims {
			var v any
			if c.OnWire() {
				if vs := vals[c.Name]; len(vs) > 0 {
					v = vs[len(vs)-1]
				}
			} else {
				// Dst1stAS... = DstASPath[n]
				m := arrayElemExpr.FindStringSubmatch(c.ClickHouseExpr)
				var n int
				fmt.Sscan(m[2], &n)
				if vs := vals[m[1]]; len(vs) >= n {
					v = vs[n-1]
				}
			}
			switch x := v.(type) {
			case nil:
				switch {
				case c.Kind == schema.KindIP:
					v = netip.IPv6Unspecified()
				case c.Kind == schema.KindString || c.Kind == schema.KindBytes:
					v = ""
				default:
					v = uint64(0)
				}
			case netip.Addr:
				v = netip.AddrFrom16(x.As16())
			case []byte:
				v = string(x)
			}
			if c.Key == schema.ColumnTimeReceived {
				v = v.(uint64) - v.(uint64)%interval
			}
			key = append(key, fmt.Sprint(v))
		}
		sums := out[strings.Join(key, "|")]
		for i, k := range []string{"Bytes", "Packets"} {
			if vs := vals[k]; len(vs) > 0 {
				sums[i] += vs[len(vs)-1].(uint64)
			}
		}
		sums[2]++
		out[strings.Join(key, "|")] = sums
	}
	return out
}

// aggregatorGroups reads the aggregator's groups back in groupsInGo's form.
func aggregatorGroups(a *Aggregator, e *Encoder) map[string][3]uint64 {
	out := map[string][3]uint64{}
	for g := 0; g < a.n; g++ {
		var key []string
		for _, v := range groupValues(a, e, g) {
			if s, ok := v.(string); ok {
				v = strings.TrimRight(s, "\x00") // FixedString
			}
			key = append(key, fmt.Sprint(v))
		}
		out[strings.Join(key, "|")] = [3]uint64{a.sums[3*g], a.sums[3*g+1], a.sums[3*g+2]}
	}
	return out
}

// groupValues returns group g's dimensions as the table holds them: uint64, netip.Addr
// (IPv6) or string (LowCardinality and FixedString, the latter with its padding).
func groupValues(a *Aggregator, e *Encoder, g int) []any {
	var vals []any
	for _, d := range a.dims {
		b := make([]byte, d.width) // not active: the default
		if d.active {
			b = a.gkeys[g*a.keyLen+d.off : g*a.keyLen+d.off+d.width]
		}
		c := &e.cols[d.src]
		var v any
		switch {
		case d.kind == aggLowCard:
			v = ""
			if id := binary.LittleEndian.Uint32(b); id > 0 {
				v = c.names[id-1]
			}
		case d.kind == aggFixed && c.op == opIPv6:
			v = netip.AddrFrom16([16]byte(b))
		case d.kind == aggFixed && c.op == opFixedString:
			v = string(b)
		default:
			var x [8]byte
			copy(x[:], b)
			v = binary.LittleEndian.Uint64(x[:])
		}
		vals = append(vals, v)
	}
	return vals
}

// compareGroupValues compares two groupValues as ClickHouse orders the columns: integers by
// value, IPv6 and FixedString by their bytes, strings by their bytes then length.
func compareGroupValues(x, y []any) int {
	for i := range x {
		var c int
		switch v := x[i].(type) {
		case uint64:
			c = cmp.Compare(v, y[i].(uint64))
		case netip.Addr:
			c = v.Compare(y[i].(netip.Addr))
		case string:
			c = strings.Compare(v, y[i].(string))
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// aggTestMessages are flows in every kind of aggregated column: the real captures (with
// every column enabled) and variations of nativeTestMessage over exporters (IPv4 and IPv6),
// names, AS paths of every length and two minutes. Without varied, only the variations with
// IPv4 exporters: the groups' sort integers then fit in 128 bits (aggsort.go).
func aggTestMessages(t *testing.T, s *schema.Schema, varied bool) (msgs [][]byte) {
	if varied {
		for _, framed := range storetest.CaptureMessages(t, s) {
			msgs = append(msgs, storetest.Unframe(t, framed))
		}
	}
	fm := s.NewFlowMessage()
	for i := range 1500 {
		fm.Reset()
		fm.TimeReceived = 1_790_000_000 + uint64(i%120)
		fm.SamplingRate = 1000
		fm.ExporterAddress = netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 3)})
		if i%13 == 0 && varied {
			// IPv6 exporters, with both halves varying: the sort orders them by two parts.
			fm.ExporterAddress = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 5: byte(i % 4), 15: byte(i % 5)})
		}
		fm.SrcAS, fm.DstAS = 64500+uint32(i%7), 3356
		fm.DstASPath = []uint32{3356, 174, 2914, 1299}[:i%5]
		fm.AppendUint(schema.ColumnBytes, uint64(1000+i))
		fm.AppendUint(schema.ColumnPackets, uint64(1+i%4))
		fm.AppendUint(schema.ColumnProto, []uint64{6, 17}[i%2])
		fm.AppendString(schema.ColumnExporterName, fmt.Sprintf("edge%d", i%300)) // many keys: wider indexes
		if i%11 != 0 {
			fm.AppendString(schema.ColumnSrcCountry, []string{"FR", "DE", "US"}[i%3])
		}
		msgs = append(msgs, bytes.Clone(storetest.Unframe(t, fm.Finalize())))
	}
	if !varied {
		// The variations are distinct: each twice, for groups of several flows.
		msgs = append(msgs, msgs...)
	}
	return msgs
}

// TestNativeAggregator groups real and synthetic flows through the encoder and compares the
// groups with a grouping of the decoded messages: with several blocks per batch (the
// LowCardinality numbers must hold across blocks), with a constant hash (every key collides:
// the comparison decides), across batches (the table is reused), with malformed messages in
// the batch (a refused row must not reach the groups), and the Native block it writes.
func TestNativeAggregator(t *testing.T) {
	for _, tc := range []struct {
		name      string
		schema    *schema.Schema
		blockRows int
		constHash bool
		interval  time.Duration
		// varied: the captures and IPv6 exporters too, whose groups sort by wide integers.
		varied bool
	}{
		{"default columns", storetest.MustSchema(t, schema.DefaultConfiguration()), defaultBlockRows, false, time.Minute, true},
		{"all columns, small blocks", storetest.AllColumnsSchema(t), 97, false, time.Minute, true},
		{"constant hash", storetest.AllColumnsSchema(t), 500, true, 5 * time.Minute, true},
		{"30s", storetest.MustSchema(t, schema.DefaultConfiguration()), 1000, false, 30 * time.Second, true},
		{"128-bit sort", storetest.MustSchema(t, schema.DefaultConfiguration()), defaultBlockRows, false, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.schema
			dims := aggDims(s)
			msgs := aggTestMessages(t, s, tc.varied)
			enc := mustEncoder(t, s)
			enc.blockRows = tc.blockRows
			a, err := NewAggregator(enc, dims, tc.interval)
			if err != nil {
				t.Fatal(err)
			}
			if tc.constHash {
				a.hash = func(maphash.Seed, []byte) uint64 { return 42 }
				msgs = msgs[:600] // every lookup walks the whole chain
			}
			want := groupsInGo(t, s, dims, uint64(tc.interval/time.Second), msgs)
			bad := []byte{0x08, 0x80} // TimeReceived with a cut varint
			for range 2 {
				enc.Reset()
				var batch []byte
				for i, m := range msgs {
					batch = pbwire.AppendVarint(batch, uint64(len(m)))
					batch = append(batch, m...)
					if i%101 == 0 {
						// A refused message: its values must not reach a group.
						over := append(append([]byte(nil), m...), 0x08, 0xff, 0xff, 0xff, 0xff, 0x7f) // time > 2^32
						batch = pbwire.AppendVarint(batch, uint64(len(over)))
						batch = append(batch, over...)
						batch = pbwire.AppendVarint(batch, uint64(len(bad)))
						batch = append(batch, bad...)
					}
				}
				ok, err := enc.AppendDelimited(batch)
				if ok != len(msgs) || err == nil {
					t.Fatalf("%d flows, error %v", ok, err)
				}
				enc.Block()
				got := aggregatorGroups(a, enc)
				if len(got) != len(want) || a.Groups() != len(want) {
					t.Errorf("%d groups (%d distinct), want %d", a.Groups(), len(got), len(want))
				}
				for k, w := range want {
					if got[k] != w {
						t.Errorf("group %s: sums %v, want %v", k, got[k], w)
						break
					}
				}
				if len(want) >= len(msgs) || len(want) < 2 {
					t.Errorf("%d groups for %d flows: the test groups nothing", len(want), len(msgs))
				}
				// The block has the dimensions set in some group, Bytes and Packets.
				set := make([]bool, len(dims))
				for k := range want {
					for i, v := range strings.Split(k, "|") {
						set[i] = set[i] || v != "" && v != "0" && v != "::"
					}
				}
				ncols := 3 // Bytes, Packets, Flows
				for _, s := range set {
					if s {
						ncols++
					}
				}
				if ncols == 3 || ncols == len(dims)+3 {
					t.Errorf("%d columns of %d: the test leaves out none or all", ncols-3, len(dims))
				}
				block := a.Block()
				if !strings.HasPrefix(string(block), string(binary.AppendUvarint(binary.AppendUvarint(nil, uint64(ncols)), uint64(len(want))))) {
					t.Error("block header: wrong column or row count")
				}
				checkGroupsSorted(t, a, enc)
				width := uint(bits.Len(uint(a.n - 1))) // the group's number
				for _, p := range a.sorter.parts {
					width += p.width
				}
				if wide := width > 128; wide != tc.varied {
					t.Errorf("%d groups sorted by %d bits: wide %v, want %v", a.n, width, wide, tc.varied)
				}
			}
		})
	}
}

// checkGroupsSorted checks that the order of the groups in the last Block (sortGroups) is a
// permutation that sorts them by the table's key (the dimensions' order).
func checkGroupsSorted(t *testing.T, a *Aggregator, e *Encoder) {
	t.Helper()
	perm := a.sorter.perm
	if len(perm) != a.n {
		t.Fatalf("order of %d groups, want %d", len(perm), a.n)
	}
	seen := make([]bool, a.n)
	for _, g := range perm {
		if seen[g] {
			t.Fatalf("group %d twice in the order", g)
		}
		seen[g] = true
	}
	prev := groupValues(a, e, int(perm[0]))
	for i, g := range perm[1:] {
		v := groupValues(a, e, int(g))
		if compareGroupValues(prev, v) > 0 {
			t.Fatalf("rows %d and %d out of order:\n%v\n%v", i, i+1, prev, v)
		}
		prev = v
	}
}

// TestNativeAggregatorRefusesExpressions checks that a dimension the aggregation cannot
// compute keeps the view: an expression other than Array[n], or Array[n] of another type.
func TestNativeAggregatorRefusesExpressions(t *testing.T) {
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	enc := mustEncoder(t, s)
	dims := aggDims(s)
	if _, err := NewAggregator(enc, dims, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, c := range []schema.Column{
		{Name: "Odd", Kind: schema.KindDerived, ClickHouseType: "UInt32", ClickHouseExpr: "DstASPath[1] + 1", ClickHouseMaterialized: true},
		{Name: "Wide", Kind: schema.KindDerived, ClickHouseType: "UInt64", ClickHouseExpr: "DstASPath[1]", ClickHouseMaterialized: true},
		{Name: "Missing", Kind: schema.KindDerived, ClickHouseType: "UInt32", ClickHouseExpr: "MPLSLabels[1]", ClickHouseMaterialized: true},
	} {
		if _, err := NewAggregator(enc, append(dims[:len(dims):len(dims)], &c), time.Minute); err == nil {
			t.Errorf("%s = %s: no error", c.Name, c.ClickHouseExpr)
		}
	}
	if _, err := NewAggregator(enc, dims, 1500*time.Millisecond); err == nil {
		t.Error("1.5s interval: no error")
	}
}
