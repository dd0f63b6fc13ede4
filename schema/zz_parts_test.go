package schema

import "testing"

func BenchmarkZZParts(b *testing.B) {
	pkt, exporter := readNFv5(b)
	path := []uint32{174, 3356, 64500}
	s := mustNew(b, DefaultConfiguration())
	m := s.NewFlowMessage()
	b.Run("reset", func(b *testing.B) {
		cpu := startCPU(b)
		defer cpu.stop(b)
		for b.Loop() {
			m.Reset()
		}
	})
	b.Run("reset-fill", func(b *testing.B) {
		n := 0
		cpu := startCPU(b)
		defer cpu.stop(b)
		for b.Loop() {
			m.Reset()
			typicalFlow(m, pkt, exporter, n, path)
			if n++; n == 29 {
				n = 0
			}
		}
	})
	b.Run("reset-hot-finalize", func(b *testing.B) {
		n := 0
		cpu := startCPU(b)
		defer cpu.stop(b)
		for b.Loop() {
			m.Reset()
			r := pkt[24+48*n:]
			m.TimeReceived = uint64(be32(pkt[8:]))
			m.SamplingRate = 1
			m.ExporterAddress = exporter
			m.SrcAddr = exporter
			m.DstAddr = exporter
			m.InIf = uint32(r[13])
			m.OutIf = uint32(r[15])
			m.SrcAS, m.DstAS = uint32(r[41]), uint32(r[43])
			m.SrcNetMask, m.DstNetMask = r[44], r[45]
			m.DstASPath = path
			m.Finalize()
			if n++; n == 29 {
				n = 0
			}
		}
	})
	b.Run("strings", func(b *testing.B) {
		cpu := startCPU(b)
		defer cpu.stop(b)
		for b.Loop() {
			m.Reset()
			m.AppendString(ColumnExporterName, "edge1.par1")
			m.AppendString(ColumnInIfName, "et-0/0/1")
			m.AppendString(ColumnOutIfName, "ae12")
			m.AppendString(ColumnInIfDescription, "transit: Cogent")
			m.AppendString(ColumnOutIfDescription, "core: par2")
		}
	})
	b.Run("uints", func(b *testing.B) {
		cpu := startCPU(b)
		defer cpu.stop(b)
		for b.Loop() {
			m.Reset()
			m.AppendUint(ColumnForwardingStatus, 64)
			m.AppendUint(ColumnFlowDirection, DirectionIngress)
			m.AppendUint(ColumnInIfSpeed, 100000)
			m.AppendUint(ColumnOutIfSpeed, 400000)
			m.AppendUint(ColumnInIfBoundary, BoundaryExternal)
			m.AppendUint(ColumnOutIfBoundary, BoundaryInternal)
		}
	})
}
