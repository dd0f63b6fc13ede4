package schema

import (
	"bytes"
	"net/netip"
	"testing"
)

// TestCopyFrom checks that a copy finalizes to the bytes its source would have, after the
// source was reset and filled with another flow in the same buffers (as a decoder does), the
// hot arrays included, and that a copy then allocates nothing.
func TestCopyFrom(t *testing.T) {
	s := mustNew(t, allColumns())
	src, dst := s.NewFlowMessage(), s.NewFlowMessage()
	scratch := []uint32{64500, 64501, 64502}
	fill := func(m *FlowMessage, n uint32) {
		m.Reset()
		m.TimeReceived, m.SamplingRate = 1767225600, uint64(n)
		m.ExporterAddress = netip.MustParseAddr("192.0.2.1")
		m.SrcAddr, m.DstAddr = netip.AddrFrom4([4]byte{10, 0, 0, byte(n)}), netip.MustParseAddr("2001:db8::1")
		m.InIf, m.OutIf = n, n+1
		m.AppendUint(ColumnBytes, uint64(n)*100)
		m.AppendUint(ColumnProto, 6)
		m.AppendString(ColumnExporterName, "edge-router-1")
		for i := range scratch {
			scratch[i] = n + uint32(i)
		}
		m.AppendArrayUint32(ColumnDstASPath, scratch)
		m.AppendArrayUint32(ColumnDstCommunities, scratch[:2])
		m.SrcLargeCommunities = []LargeCommunity{{ASN: n, LocalData1: 1, LocalData2: 2}}
	}
	fill(src, 1)
	dst.CopyFrom(src)
	want := bytes.Clone(src.Finalize())
	fill(src, 2)
	if got := dst.Finalize(); !bytes.Equal(got, want) {
		t.Fatalf("copy finalized to\n%x\nwant\n%x", got, want)
	}
	if bytes.Equal(src.Finalize(), want) {
		t.Fatal("the test's second flow encodes as its first")
	}
	// A rejected flow stays rejected.
	fill(src, 3)
	src.Reject()
	dst.CopyFrom(src)
	if !dst.Rejected() {
		t.Fatal("reject mark lost")
	}
	fill(src, 4)
	if n := testing.AllocsPerRun(100, func() { dst.CopyFrom(src); dst.Finalize() }); n != 0 {
		t.Fatalf("%v allocations per copy", n)
	}
}
