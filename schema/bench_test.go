package schema

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"flowzero/internal/testutil"
	"flowzero/pbwire"
)

// typicalFlow fills m like a NetFlow decoder followed by enrichment: about 25 columns of a
// real NetFlow v5 record, exporter and interface metadata, AS path. The metadata columns come
// as fragments, encoded once per exporter and interface, as enrich.Metadata appends them.
func typicalFlow(m *FlowMessage, pkt []byte, exporter netip.Addr, n int, path []uint32, md *typicalMetadata) {
	nfv5Flow(m, pkt, exporter, n) // 19 columns, hot and encoded
	m.AppendUint(ColumnForwardingStatus, 64)
	m.AppendUint(ColumnFlowDirection, DirectionIngress)
	if md != nil {
		m.AppendFragment(md.exporter)
		m.AppendFragment(md.in)
		m.AppendFragment(md.out)
	} else {
		typicalExporter(m)
		typicalInInterface(m)
		typicalOutInterface(m)
	}
	m.DstASPath = path
}

func typicalExporter(m *FlowMessage) { m.AppendString(ColumnExporterName, "edge1.par1") }

func typicalInInterface(m *FlowMessage) {
	m.AppendString(ColumnInIfName, "et-0/0/1")
	m.AppendString(ColumnInIfDescription, "transit: Cogent")
	m.AppendUint(ColumnInIfSpeed, 100000)
	m.AppendUint(ColumnInIfBoundary, BoundaryExternal)
}

func typicalOutInterface(m *FlowMessage) {
	m.AppendString(ColumnOutIfName, "ae12")
	m.AppendString(ColumnOutIfDescription, "core: par2")
	m.AppendUint(ColumnOutIfSpeed, 400000)
	m.AppendUint(ColumnOutIfBoundary, BoundaryInternal)
}

// typicalMetadata holds the fragments of typicalFlow's exporter and interfaces.
type typicalMetadata struct{ exporter, in, out *Fragment }

func newTypicalMetadata(tb testing.TB, s *Schema) *typicalMetadata {
	return &typicalMetadata{
		exporter: mustFragment(tb, s, typicalExporter),
		in:       mustFragment(tb, s, typicalInInterface),
		out:      mustFragment(tb, s, typicalOutInterface),
	}
}

// BenchmarkFlowMessage fills a typical flow (about 25 set columns, from the 29 records of a
// real NetFlow v5 packet in turn) and finalizes it; one op is one flow. pbwire-only is the
// speed-of-light reference: the same bytes written with pbwire alone.
func BenchmarkFlowMessage(b *testing.B) {
	pkt, exporter := readNFv5(b)
	path := []uint32{174, 3356, 64500}
	for _, bc := range []struct {
		name      string
		cfg       Configuration
		fragments bool
	}{
		{"default", DefaultConfiguration(), true},
		{"all-columns", allColumns(), true},
		// The metadata columns appended one by one, as a decoder that carries them would.
		{"default-per-column", DefaultConfiguration(), false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := mustNew(b, bc.cfg)
			var md *typicalMetadata
			if bc.fragments {
				md = newTypicalMetadata(b, s)
			}
			m := s.NewFlowMessage()
			size := 0
			n := 0
			cpu := testutil.StartCPU(b)
			for b.Loop() {
				m.Reset()
				typicalFlow(m, pkt, exporter, n, path, md)
				size += len(m.Finalize())
				if n++; n == 29 {
					n = 0
				}
			}
			cpu.Stop(b)
			b.ReportMetric(float64(size)/float64(b.N), "B/flow")
		})
	}
	// The same values as default, encoded with pbwire and constant tags: the cost of the
	// wire format alone, measured in the same run.
	b.Run("pbwire-only", func(b *testing.B) {
		buf := make([]byte, 0, initialBufferSize)
		size, n := 0, 0
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			buf = buf[:pbwire.ReserveDelimited]
			size += len(baselineFlow(buf, pkt, exporter, n, path))
			if n++; n == 29 {
				n = 0
			}
		}
		cpu.Stop(b)
		b.ReportMetric(float64(size)/float64(b.N), "B/flow")
	})
	// The floor: the same fields stored as raw bytes (one-byte key, fixed-width value, no
	// varint encoding, no checks) into a buffer grown once. Not valid protobuf: it measures
	// what reading the record and moving the bytes cost on this machine, in the same run.
	b.Run("speed-of-light", func(b *testing.B) {
		buf := make([]byte, initialBufferSize)
		size, n := 0, 0
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			size += len(speedOfLightFlow(buf, pkt, exporter, n, path))
			if n++; n == 29 {
				n = 0
			}
		}
		cpu.Stop(b)
		b.ReportMetric(float64(size)/float64(b.N), "B/flow")
	})
}

// speedOfLightFlow writes the fields of baselineFlow as raw appends: a key byte and the value
// in fixed width (4 bytes per number, 16 per address), strings and the AS path copied. buf
// must hold the result (initialBufferSize does).
func speedOfLightFlow(buf []byte, pkt []byte, exporter netip.Addr, n int, path []uint32) []byte {
	r := pkt[24+48*n:]
	b := buf[:initialBufferSize]
	i := pbwire.ReserveDelimited
	num := func(key byte, v uint32) {
		binary.LittleEndian.PutUint64(b[i:], uint64(key)|uint64(v)<<8)
		i += 5
	}
	str := func(key byte, s string) {
		b[i], b[i+1] = key, byte(len(s))
		i += 2 + copy(b[i+2:], s)
	}
	ip := func(key byte, a netip.Addr) {
		a16 := a.As16()
		b[i], b[i+1] = key, 16
		i += 2 + copy(b[i+2:], a16[:])
	}
	num(1, binary.BigEndian.Uint32(r[16:]))
	num(2, binary.BigEndian.Uint32(r[20:]))
	num(3, uint32(binary.BigEndian.Uint16(r[32:])))
	num(4, uint32(binary.BigEndian.Uint16(r[34:])))
	num(5, uint32(r[38]))
	num(6, 0x800)
	num(7, 64)
	num(8, DirectionIngress)
	str(9, "edge1.par1")
	str(10, "et-0/0/1")
	str(11, "ae12")
	str(12, "transit: Cogent")
	str(13, "core: par2")
	num(14, 100000)
	num(15, 400000)
	num(16, BoundaryExternal)
	num(17, BoundaryInternal)
	num(18, binary.BigEndian.Uint32(pkt[8:]))
	num(19, 1)
	num(20, uint32(binary.BigEndian.Uint16(r[40:])))
	num(21, uint32(binary.BigEndian.Uint16(r[42:])))
	num(22, uint32(binary.BigEndian.Uint16(r[12:])))
	num(23, uint32(binary.BigEndian.Uint16(r[14:])))
	num(24, uint32(r[44]))
	num(25, uint32(r[45]))
	ip(26, exporter)
	ip(27, netip.AddrFrom4([4]byte(r[0:4])))
	ip(28, netip.AddrFrom4([4]byte(r[4:8])))
	b[i], b[i+1] = 29, byte(4*len(path))
	i += 2
	for _, v := range path {
		binary.LittleEndian.PutUint32(b[i:], v)
		i += 4
	}
	b[pbwire.ReserveDelimited-1] = byte(i - pbwire.ReserveDelimited)
	return b[pbwire.ReserveDelimited-1 : i]
}

// baselineFlow encodes the same fields as typicalFlow with the default schema, straight with
// pbwire and constant tags: no column checks, no hot fields. It is the speed-of-light
// reference for BenchmarkFlowMessage/default (sub-benchmark pbwire-only).
func baselineFlow(buf []byte, pkt []byte, exporter netip.Addr, n int, path []uint32) []byte {
	r := pkt[24+48*n:]
	be16 := func(b []byte) uint64 { return uint64(b[0])<<8 | uint64(b[1]) }
	tag := func(c ColumnKey) pbwire.Tag { return baselineTags[c] }
	buf = pbwire.AppendVarintField(buf, tag(ColumnPackets), uint64(be32(r[16:])))
	buf = pbwire.AppendVarintField(buf, tag(ColumnBytes), uint64(be32(r[20:])))
	buf = pbwire.AppendVarintField(buf, tag(ColumnSrcPort), be16(r[32:]))
	buf = pbwire.AppendVarintField(buf, tag(ColumnDstPort), be16(r[34:]))
	buf = pbwire.AppendVarintField(buf, tag(ColumnProto), uint64(r[38]))
	buf = pbwire.AppendVarintField(buf, tag(ColumnEType), 0x800)
	buf = pbwire.AppendVarintField(buf, tag(ColumnForwardingStatus), 64)
	buf = pbwire.AppendVarintField(buf, tag(ColumnFlowDirection), DirectionIngress)
	buf = pbwire.AppendStringField(buf, tag(ColumnExporterName), "edge1.par1")
	buf = pbwire.AppendStringField(buf, tag(ColumnInIfName), "et-0/0/1")
	buf = pbwire.AppendStringField(buf, tag(ColumnOutIfName), "ae12")
	buf = pbwire.AppendStringField(buf, tag(ColumnInIfDescription), "transit: Cogent")
	buf = pbwire.AppendStringField(buf, tag(ColumnOutIfDescription), "core: par2")
	buf = pbwire.AppendVarintField(buf, tag(ColumnInIfSpeed), 100000)
	buf = pbwire.AppendVarintField(buf, tag(ColumnOutIfSpeed), 400000)
	buf = pbwire.AppendVarintField(buf, tag(ColumnInIfBoundary), BoundaryExternal)
	buf = pbwire.AppendVarintField(buf, tag(ColumnOutIfBoundary), BoundaryInternal)
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
	return pbwire.FinishDelimited(buf, 0)
}

var baselineTags = func() (tags [ColumnLast]pbwire.Tag) {
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if c := Lookup(k); c.OnWire() {
			tags[k] = pbwire.MakeTag(c.Field, c.Kind.wireType())
		}
	}
	return tags
}()

// appendIPField is how pbwire alone writes an address: As16, then a bytes field.
func appendIPField(dst []byte, t pbwire.Tag, a netip.Addr) []byte {
	b := a.As16()
	return pbwire.AppendBytesField(dst, t, b[:])
}
