package native

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"flowzero/schema"
	"flowzero/store/internal/storetest"
)

// refKey is a flow's sorting key as ClickHouse compares it: the time rounded to five minutes,
// addresses as 16 bytes (IPv4 mapped), strings byte by byte, integers by value.
type refKey struct {
	vals []any
}

func refKeyOf(t *testing.T, s *schema.Schema, framed []byte) refKey {
	key := s.SortingKey()
	k := refKey{vals: make([]any, len(key))}
	for i, p := range key {
		switch p.Column.Kind {
		case schema.KindIP:
			k.vals[i] = [16]byte{}
		case schema.KindString:
			k.vals[i] = ""
		default:
			k.vals[i] = uint64(0)
		}
	}
	err := s.DecodeMessage(storetest.Unframe(t, framed), func(c *schema.Column, v any) {
		for i, p := range key {
			if p.Column.Key != c.Key {
				continue
			}
			switch v := v.(type) {
			case netip.Addr:
				k.vals[i] = v.As16()
			case uint64:
				if p.Round > 0 {
					v -= v % p.Round
				}
				k.vals[i] = v
			default:
				k.vals[i] = v
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (a refKey) compare(b refKey) int {
	for i := range a.vals {
		var c int
		switch x := a.vals[i].(type) {
		case [16]byte:
			y := b.vals[i].([16]byte)
			c = bytes.Compare(x[:], y[:])
		case string:
			c = cmp.Compare(x, b.vals[i].(string))
		case uint64:
			c = cmp.Compare(x, b.vals[i].(uint64))
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// sortTestFlows returns n flows from base on whose sorting key varies in every part: times across a
// five-minute boundary, exporters (IPv4, or IPv6 differing in bytes 7 and 8 when v6), both EType, protocols,
// interface names including "" and prefixes of one another, AS numbers, forwarding status
// and sampling rates beyond 32 bits. Some flows lack some of the key's fields.
func sortTestFlows(s *schema.Schema, base uint64, n int, v6 bool) [][]byte {
	fm := s.NewFlowMessage()
	names := []string{"", "et-0/0/1", "et-0/0/10", "et", "xe-1/2/3", "Ethernet1"}
	var out [][]byte
	for i := range n {
		fm.Reset()
		fm.TimeReceived = base + uint64(i*7%400)
		if v6 {
			// Bytes 7 and 8 vary: the code straddles the two halves of the address.
			fm.ExporterAddress = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 7: byte(i % 3), 8: byte(i%5) << 4})
		} else {
			fm.ExporterAddress = netip.AddrFrom4([4]byte{192, 0, byte(i % 2), byte(i%3 + 1)})
		}
		fm.SamplingRate = []uint64{1000, 1 << 33, 1, 1000}[i%4]
		fm.SrcAS, fm.DstAS = uint32(i*31%1000), uint32(i*17%70000)
		fm.AppendUint(schema.ColumnEType, []uint64{0x800, 0x86dd}[i%2])
		if i%9 != 0 {
			fm.AppendUint(schema.ColumnProto, []uint64{6, 17, 1, 58}[i%4])
		}
		fm.AppendUint(schema.ColumnForwardingStatus, uint64(64+i%3))
		if name := names[i%len(names)]; name != "" {
			fm.AppendString(schema.ColumnInIfName, name)
		}
		fm.AppendString(schema.ColumnOutIfName, names[(i/3)%len(names)])
		fm.AppendUint(schema.ColumnBytes, uint64(i))
		out = append(out, bytes.Clone(fm.Finalize()))
	}
	return out
}

// sortTestBase is a multiple of five minutes: sortTestFlows' times from it cross the next.
const sortTestBase = 1_790_000_100

// TestBatchSorterPermutation checks the permutation of blocks against ClickHouse's order
// computed from the decoded flows, equal keys in arrival order: the default schema's flows
// from the captures and from sortTestFlows, and every column enabled.
func TestBatchSorterPermutation(t *testing.T) {
	def := storetest.MustSchema(t, schema.DefaultConfiguration())
	all := storetest.AllColumnsSchema(t)
	for _, tc := range []struct {
		name string
		s    *schema.Schema
		msgs [][]byte
	}{
		{"captures", def, storetest.CaptureMessages(t, def)},
		{"ipv4 exporters", def, sortTestFlows(def, sortTestBase, 5000, false)},
		{"ipv6 exporters", def, sortTestFlows(def, sortTestBase, 5000, true)},
		{"captures, all columns", all, storetest.CaptureMessages(t, all)},
		{"all columns", all, sortTestFlows(all, sortTestBase, 3000, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := mustEncoder(t, tc.s)
			if enc.sorter == nil {
				t.Fatal("no sorter for the schema's key")
			}
			for _, m := range tc.msgs {
				if err := enc.Append(storetest.Unframe(t, m)); err != nil {
					t.Fatal(err)
				}
			}
			enc.closeBlock()
			perm := enc.sorter.permutation(enc, enc.rows)
			if perm == nil {
				t.Fatal("no permutation")
			}
			keys := make([]refKey, len(tc.msgs))
			want := make([]uint32, len(tc.msgs))
			for i, m := range tc.msgs {
				keys[i], want[i] = refKeyOf(t, tc.s, m), uint32(i)
			}
			slices.SortStableFunc(want, func(a, b uint32) int { return keys[a].compare(keys[b]) })
			if !slices.Equal(perm, want) {
				for i := range perm {
					if perm[i] != want[i] {
						t.Fatalf("row %d of the block is flow %d %v, want flow %d %v", i, perm[i], keys[perm[i]].vals, want[i], keys[want[i]].vals)
					}
				}
			}
			if tc.name == "ipv4 exporters" {
				// Both ways of coding integers: by rank where the values are few for their
				// range (two ETypes, five protocols), relative to the smallest where not
				// (1000 source AS numbers under 1000, forwarding status 64-66).
				var dense []string
				for _, p := range enc.sorter.parts {
					if p.dense {
						dense = append(dense, enc.cols[p.col].name)
					}
				}
				if got := strings.Join(dense, " "); got != "EType Proto" {
					t.Errorf("parts coded by rank: %s, want EType Proto", got)
				}
			}
		})
	}
}

// TestBatchSorterArrivalOrder checks the blocks left in arrival order: sorted already, one
// row, a key that needs more than 128 bits (IPv4 and IPv6 exporters together: their
// addresses differ over 96 bits), and a schema whose key has no sorter.
func TestBatchSorterArrivalOrder(t *testing.T) {
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	enc := mustEncoder(t, s)
	permOf := func(msgs [][]byte) []uint32 {
		t.Helper()
		enc.Reset()
		for _, m := range msgs {
			if err := enc.Append(storetest.Unframe(t, m)); err != nil {
				t.Fatal(err)
			}
		}
		enc.closeBlock()
		return enc.sorter.permutation(enc, enc.rows)
	}
	flows := sortTestFlows(s, sortTestBase, 200, false)
	sorted := slices.Clone(flows)
	slices.SortStableFunc(sorted, func(a, b []byte) int { return refKeyOf(t, s, a).compare(refKeyOf(t, s, b)) })
	mixed := append(sortTestFlows(s, sortTestBase, 100, true), sortTestFlows(s, sortTestBase, 100, false)...)
	// Only the exporter varies: the key would fit, but not the exporter's code.
	var exporters [][]byte
	fm := s.NewFlowMessage()
	for _, a := range []string{"2001:db8::1", "192.0.2.1", "2001:db8::2", "192.0.2.2"} {
		fm.Reset()
		fm.TimeReceived = sortTestBase
		fm.ExporterAddress = netip.MustParseAddr(a)
		exporters = append(exporters, bytes.Clone(fm.Finalize()))
	}
	for name, msgs := range map[string][][]byte{"sorted": sorted, "one row": flows[:1], "ipv4 and ipv6 exporters": mixed, "only ipv4 and ipv6 exporters": exporters} {
		if perm := permOf(msgs); perm != nil {
			t.Errorf("%s: permutation of %d rows", name, len(perm))
		}
	}
	if permOf(flows) == nil {
		t.Error("unsorted flows: no permutation")
	}
	// A key column of a type without a code.
	noKey, _ := NewEncoder(s)
	for i := range noKey.cols {
		if noKey.cols[i].name == "InIfName" {
			noKey.cols[i].op = opFixedString
		}
	}
	if st := newBatchSorter(s, noKey); st != nil {
		t.Error("sorter for a FixedString key column")
	}
}

// BenchmarkBatchSorter measures the permutation alone, on 256Ki flows of sortTestFlows.
func BenchmarkBatchSorter(b *testing.B) {
	s := storetest.MustSchema(b, schema.DefaultConfiguration())
	enc := mustEncoder(b, s)
	for _, m := range sortTestFlows(s, sortTestBase, 1<<18, false) {
		if err := enc.Append(storetest.Unframe(b, m)); err != nil {
			b.Fatal(err)
		}
	}
	enc.closeBlock()
	enc.sorter.permutation(enc, enc.rows) // warm: buffers at their size
	b.ReportAllocs()
	for b.Loop() {
		if enc.sorter.permutation(enc, enc.rows) == nil {
			b.Fatal("no permutation")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(enc.rows), "ns/flow")
}
