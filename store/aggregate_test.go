package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"net/netip"
	"strings"
	"testing"
	"time"

	"flowzero/pbwire"
	"flowzero/schema"
)

func mustSchema(t testing.TB, cfg schema.Configuration) *schema.Schema {
	t.Helper()
	s, err := schema.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustEncoder(t testing.TB, s *schema.Schema) *NativeEncoder {
	t.Helper()
	enc, err := NewNativeEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// aggDims returns the aggregated tables' dimensions of s with the default configuration.
func aggDims(s *schema.Schema) []*schema.Column {
	return NewDDL(DefaultConfiguration(), s, "").aggregatedDims()
}

// groupsInGo sums Bytes and Packets per dimensions the slow way, from the decoded messages:
// the values as the tables hold them, joined by "|", with the time rounded down.
func groupsInGo(t *testing.T, s *schema.Schema, dims []*schema.Column, interval uint64, msgs [][]byte) map[string][2]uint64 {
	t.Helper()
	out := map[string][2]uint64{}
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
		out[strings.Join(key, "|")] = sums
	}
	return out
}

// aggregatorGroups reads the aggregator's groups back in groupsInGo's form.
func aggregatorGroups(a *nativeAggregator, e *NativeEncoder) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for g := 0; g < a.n; g++ {
		var key []string
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
				v = strings.TrimRight(string(b), "\x00")
			default:
				var x [8]byte
				copy(x[:], b)
				v = binary.LittleEndian.Uint64(x[:])
			}
			key = append(key, fmt.Sprint(v))
		}
		out[strings.Join(key, "|")] = [2]uint64{a.sums[2*g], a.sums[2*g+1]}
	}
	return out
}

// aggTestMessages are flows in every kind of aggregated column: the real captures (with
// every column enabled) and variations of nativeTestMessage over exporter names, AS paths
// of every length and two minutes.
func aggTestMessages(t *testing.T, s *schema.Schema) (msgs [][]byte) {
	for _, framed := range captureMessages(t, s) {
		msgs = append(msgs, unframe(t, framed))
	}
	fm := s.NewFlowMessage()
	for i := range 1500 {
		fm.Reset()
		fm.TimeReceived = 1_790_000_000 + uint64(i%120)
		fm.SamplingRate = 1000
		fm.ExporterAddress = netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 3)})
		fm.SrcAS, fm.DstAS = 64500+uint32(i%7), 3356
		fm.DstASPath = []uint32{3356, 174, 2914, 1299}[:i%5]
		fm.AppendUint(schema.ColumnBytes, uint64(1000+i))
		fm.AppendUint(schema.ColumnPackets, uint64(1+i%4))
		fm.AppendUint(schema.ColumnProto, []uint64{6, 17}[i%2])
		fm.AppendString(schema.ColumnExporterName, fmt.Sprintf("edge%d", i%300)) // many keys: wider indexes
		if i%11 != 0 {
			fm.AppendString(schema.ColumnSrcCountry, []string{"FR", "DE", "US"}[i%3])
		}
		msgs = append(msgs, bytes.Clone(unframe(t, fm.Finalize())))
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
	}{
		{"default columns", mustSchema(t, schema.DefaultConfiguration()), nativeBlockRows, false, time.Minute},
		{"all columns, small blocks", allColumnsSchema(t), 97, false, time.Minute},
		{"constant hash", allColumnsSchema(t), 500, true, 5 * time.Minute},
		{"30s", mustSchema(t, schema.DefaultConfiguration()), 1000, false, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.schema
			dims := aggDims(s)
			msgs := aggTestMessages(t, s)
			enc := mustEncoder(t, s)
			enc.blockRows = tc.blockRows
			a, err := newNativeAggregator(enc, dims, tc.interval)
			if err != nil {
				t.Fatal(err)
			}
			if tc.constHash {
				a.hash = func(maphash.Seed, []byte) uint64 { return 42 }
				msgs = msgs[:600] // every lookup walks the whole chain
			}
			enc.agg = a
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
				ncols := 2
				for _, s := range set {
					if s {
						ncols++
					}
				}
				if ncols == 2 || ncols == len(dims)+2 {
					t.Errorf("%d columns of %d: the test leaves out none or all", ncols-2, len(dims))
				}
				block := a.Block(enc)
				if !strings.HasPrefix(string(block), string(binary.AppendUvarint(binary.AppendUvarint(nil, uint64(ncols)), uint64(len(want))))) {
					t.Error("block header: wrong column or row count")
				}
			}
		})
	}
}

// TestNativeAggregatorRefusesExpressions checks that a dimension the aggregation cannot
// compute keeps the view: an expression other than Array[n], or Array[n] of another type.
func TestNativeAggregatorRefusesExpressions(t *testing.T) {
	s := mustSchema(t, schema.DefaultConfiguration())
	enc := mustEncoder(t, s)
	dims := aggDims(s)
	if _, err := newNativeAggregator(enc, dims, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, c := range []schema.Column{
		{Name: "Odd", Kind: schema.KindDerived, ClickHouseType: "UInt32", ClickHouseExpr: "DstASPath[1] + 1", ClickHouseMaterialized: true},
		{Name: "Wide", Kind: schema.KindDerived, ClickHouseType: "UInt64", ClickHouseExpr: "DstASPath[1]", ClickHouseMaterialized: true},
		{Name: "Missing", Kind: schema.KindDerived, ClickHouseType: "UInt32", ClickHouseExpr: "MPLSLabels[1]", ClickHouseMaterialized: true},
	} {
		if _, err := newNativeAggregator(enc, append(dims[:len(dims):len(dims)], &c), time.Minute); err == nil {
			t.Errorf("%s = %s: no error", c.Name, c.ClickHouseExpr)
		}
	}
	if _, err := newNativeAggregator(enc, dims, 1500*time.Millisecond); err == nil {
		t.Error("1.5s interval: no error")
	}
}
