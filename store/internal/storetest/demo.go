package storetest

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"time"

	"flowzero/demo"
	"flowzero/schema"
)

// BenchFlows is the number of demo flows of the benchmarks (DemoBatches).
const BenchFlows = 1 << 20

// SinkBatchBytes is the sink's default embedded.batch-bytes, the size of DemoBatches'
// batches (store's tests check that it is the default).
const SinkBatchBytes = 64 << 20

// DemoEvery is the time between two demo flows: 20k flows/s.
const DemoEvery = 50 * time.Microsecond

// DemoSpan is the time DemoBatches span: BenchFlows flows at 20k flows/s.
const DemoSpan = BenchFlows * DemoEvery

// FillDemoFlow sets fm (reset) to demo flow f as the collector would have it from exporter:
// the decoder's columns and the exporter's name.
func FillDemoFlow(fm *schema.FlowMessage, f *demo.Flow, now time.Time, exporter netip.Addr, name string) {
	fm.Reset()
	fm.TimeReceived = uint64(now.Unix())
	fm.SamplingRate = 1000
	fm.ExporterAddress = exporter
	fm.SrcAddr, fm.DstAddr, fm.NextHop = f.Src, f.Dst, f.NextHop
	fm.SrcAS, fm.DstAS = f.SrcAS, f.DstAS
	fm.SrcNetMask, fm.DstNetMask = f.SrcMask, f.DstMask
	fm.InIf, fm.OutIf = f.InIf, f.OutIf
	fm.DstASPath = f.ASPath
	fm.AppendUint(schema.ColumnBytes, f.Bytes)
	fm.AppendUint(schema.ColumnPackets, f.Packets)
	fm.AppendUint(schema.ColumnSrcPort, uint64(f.SrcPort))
	fm.AppendUint(schema.ColumnDstPort, uint64(f.DstPort))
	fm.AppendUint(schema.ColumnProto, uint64(f.Proto))
	etype := uint64(0x800)
	if f.Src.Is6() {
		etype = 0x86dd
	}
	fm.AppendUint(schema.ColumnEType, etype)
	fm.AppendUint(schema.ColumnFlowDirection, uint64(f.Direction)+1)
	fm.AppendUint(schema.ColumnForwardingStatus, 64)
	fm.AppendString(schema.ColumnExporterName, name)
}

// DemoBatches encodes BenchFlows demo flows (flowzero demo's traffic generator: a few hundred
// hosts, the AS/port/protocol mix of an eyeball network) as the collector would, arriving at
// 20k flows/s from three exporters from BaseTime, cut into batches of length-delimited
// messages of SinkBatchBytes at most. size is their total.
func DemoBatches(s *schema.Schema) (batches [][]byte, size int) {
	batches, size, _ = DemoBatchesTimed(s)
	return batches, size
}

// DemoBatchesOf is DemoBatches with n flows, for tests that need fewer than the benchmarks.
func DemoBatchesOf(s *schema.Schema, n int) (batches [][]byte, size int) {
	batches, size, _ = demoBatches(s, n)
	return batches, size
}

// TimeField is where a demo flow's TimeReceived varint is: batch index and byte offset.
type TimeField struct{ batch, off int32 }

// DemoBatchesTimed is DemoBatches, also returning where each flow's TimeReceived is, so that
// the batches can be sent again later in time (ShiftTimes).
func DemoBatchesTimed(s *schema.Schema) (batches [][]byte, size int, times []TimeField) {
	return demoBatches(s, BenchFlows)
}

func demoBatches(s *schema.Schema, n int) (batches [][]byte, size int, times []TimeField) {
	g := demo.NewGenerator(1)
	fm := s.NewFlowMessage()
	exporters := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")}
	names := []string{"edge1.par", "edge2.par", "core1.fra"}
	start := time.Unix(int64(BaseTime), 0)
	var cur []byte
	for i := range n {
		now := start.Add(time.Duration(i) * DemoEvery)
		f := g.Next(now)
		e := i % len(exporters)
		FillDemoFlow(fm, &f, now, exporters[e], names[e])
		msg := fm.Finalize()
		size += len(msg)
		if len(cur)+len(msg) > SinkBatchBytes {
			batches = append(batches, cur)
			cur = nil
		}
		// The value's varint (5 bytes for today's Unix times) appears once in the message.
		v := binary.AppendUvarint(nil, fm.TimeReceived)
		at := bytes.Index(msg, v)
		if len(v) != 5 || at < 0 {
			panic("demo flow without a 5-byte TimeReceived")
		}
		times = append(times, TimeField{int32(len(batches)), int32(len(cur) + at)})
		cur = append(cur, msg...)
	}
	return append(batches, cur), size, times
}

// ShiftTimes moves every demo flow's TimeReceived by d (in place, keeping 5-byte varints).
func ShiftTimes(batches [][]byte, times []TimeField, d time.Duration) {
	for _, t := range times {
		p := batches[t.batch][t.off : t.off+5]
		v, _ := binary.Uvarint(p)
		v = uint64(int64(v) + int64(d/time.Second))
		for i := range 4 {
			p[i] = byte(v) | 0x80
			v >>= 7
		}
		p[4] = byte(v)
	}
}
