package schema

import (
	"net/netip"
	"testing"

	"flowzero/pbwire"
)

func BenchmarkTmpParts(b *testing.B) {
	pkt, exporter := readNFv5(b)
	path := []uint32{174, 3356, 64500}
	s := mustNew(b, DefaultConfiguration())
	m := s.NewFlowMessage()
	b.Run("reset", func(b *testing.B) {
		cpu := startCPU(b)
		for b.Loop() {
			m.Reset()
		}
		cpu.stop(b)
	})
	b.Run("reset+hot", func(b *testing.B) {
		n := 0
		cpu := startCPU(b)
		for b.Loop() {
			m.Reset()
			nfv5Hot(m, pkt, exporter, n)
			m.DstASPath = path
			if n++; n == 29 {
				n = 0
			}
		}
		cpu.stop(b)
	})
	b.Run("reset+hot+finalize", func(b *testing.B) {
		n := 0
		cpu := startCPU(b)
		for b.Loop() {
			m.Reset()
			nfv5Hot(m, pkt, exporter, n)
			m.DstASPath = path
			m.Finalize()
			if n++; n == 29 {
				n = 0
			}
		}
		cpu.stop(b)
	})
	b.Run("fill", func(b *testing.B) {
		n := 0
		cpu := startCPU(b)
		for b.Loop() {
			m.Reset()
			typicalFlow(m, pkt, exporter, n, path)
			if n++; n == 29 {
				n = 0
			}
		}
		cpu.stop(b)
	})
	b.Run("fill+finalize", func(b *testing.B) {
		n := 0
		cpu := startCPU(b)
		for b.Loop() {
			m.Reset()
			typicalFlow(m, pkt, exporter, n, path)
			m.Finalize()
			if n++; n == 29 {
				n = 0
			}
		}
		cpu.stop(b)
	})
}

func nfv5Hot(m *FlowMessage, pkt []byte, exporter netipAddr, n int) {
	r := pkt[24+48*n:]
	m.TimeReceived = uint64(be32(pkt[8:]))
	m.SamplingRate = 1
	m.ExporterAddress = exporter
	m.SrcAddr = addrFrom4(r[0:4])
	m.DstAddr = addrFrom4(r[4:8])
	m.NextHop = addrFrom4(r[8:12])
	m.InIf = uint32(r[12])<<8 | uint32(r[13])
	m.OutIf = uint32(r[14])<<8 | uint32(r[15])
	m.SrcAS = uint32(r[40])<<8 | uint32(r[41])
	m.DstAS = uint32(r[42])<<8 | uint32(r[43])
	m.SrcNetMask = r[44]
	m.DstNetMask = r[45]
}

type netipAddr = netip.Addr

func addrFrom4(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b)) }

func BenchmarkTmpPbwireHot(b *testing.B) {
	pkt, exporter := readNFv5(b)
	path := []uint32{174, 3356, 64500}
	buf := make([]byte, 0, initialBufferSize)
	n := 0
	tag := func(c ColumnKey) pbwire.Tag { return baselineTags[c] }
	cpu := startCPU(b)
	for b.Loop() {
		buf = buf[:pbwire.ReserveDelimited]
		r := pkt[24+48*n:]
		be16 := func(b []byte) uint64 { return uint64(b[0])<<8 | uint64(b[1]) }
		buf = pbwire.AppendVarintField(buf, tag(ColumnTimeReceived), uint64(be32(pkt[8:])))
		buf = pbwire.AppendVarintField(buf, tag(ColumnSamplingRate), 1)
		buf = pbwire.AppendVarintField(buf, tag(ColumnSrcAS), be16(r[40:]))
		buf = pbwire.AppendVarintField(buf, tag(ColumnDstAS), be16(r[42:]))
		buf = pbwire.AppendVarintField(buf, tag(ColumnInIf), be16(r[12:]))
		buf = pbwire.AppendVarintField(buf, tag(ColumnOutIf), be16(r[14:]))
		buf = pbwire.AppendVarintField(buf, tag(ColumnSrcNetMask), uint64(r[44]))
		buf = pbwire.AppendVarintField(buf, tag(ColumnDstNetMask), uint64(r[45]))
		buf = appendIPField(buf, tag(ColumnExporterAddress), exporter)
		buf = appendIPField(buf, tag(ColumnSrcAddr), netip.AddrFrom4([4]byte(r[0:4])))
		buf = appendIPField(buf, tag(ColumnDstAddr), netip.AddrFrom4([4]byte(r[4:8])))
		buf = pbwire.AppendPackedUint32Field(buf, tag(ColumnDstASPath), path)
		_ = pbwire.FinishDelimited(buf, 0)
		if n++; n == 29 {
			n = 0
		}
	}
	cpu.stop(b)
}
