// Package schema compares flowzero's FlowMessage encoding with GoFlow2's: both fill the same
// flow (a record of a real NetFlow v5 packet, plus what enrichment adds) and produce one
// length-delimited protobuf message.
package schema

import (
	"encoding/binary"
	"net/netip"
	"testing"

	flowpb "github.com/netsampler/goflow2/v2/pb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

func readNFv5(b *testing.B) (pkt []byte, exporter netip.Addr) {
	d, err := pcapfile.ReadUDP(testdata.Path(b, "netflow", "nfv5.pcap"))
	if err != nil || len(d) != 1 {
		b.Fatalf("nfv5.pcap: %v", err)
	}
	return d[0].Payload, d[0].Src.Addr()
}

// BenchmarkFlowEncode fills and encodes one flow per op:
//   - flowzero: schema.FlowMessage, default columns (about 25 set, with interface names);
//   - goflow2: GoFlow2's generated flowpb.FlowMessage, reused, marshalled with proto.MarshalAppend
//     and prefixed with its size as GoFlow2's protobuf formatter does (the same numeric fields;
//     flowpb has no interface names or classification strings).
func BenchmarkFlowEncode(b *testing.B) {
	pkt, exporter := readNFv5(b)
	path := []uint32{174, 3356, 64500}
	b.Run("flowzero", func(b *testing.B) {
		s, err := schema.New(schema.DefaultConfiguration())
		if err != nil {
			b.Fatal(err)
		}
		m := s.NewFlowMessage()
		n := 0
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			r := pkt[24+48*n:]
			m.Reset()
			m.TimeReceived = uint64(binary.BigEndian.Uint32(pkt[8:]))
			m.SamplingRate = 1
			m.ExporterAddress = exporter
			m.SrcAddr = netip.AddrFrom4([4]byte(r[0:4]))
			m.DstAddr = netip.AddrFrom4([4]byte(r[4:8]))
			m.NextHop = netip.AddrFrom4([4]byte(r[8:12]))
			m.InIf = uint32(binary.BigEndian.Uint16(r[12:]))
			m.OutIf = uint32(binary.BigEndian.Uint16(r[14:]))
			m.AppendUint(schema.ColumnPackets, uint64(binary.BigEndian.Uint32(r[16:])))
			m.AppendUint(schema.ColumnBytes, uint64(binary.BigEndian.Uint32(r[20:])))
			m.AppendUint(schema.ColumnSrcPort, uint64(binary.BigEndian.Uint16(r[32:])))
			m.AppendUint(schema.ColumnDstPort, uint64(binary.BigEndian.Uint16(r[34:])))
			m.AppendUint(schema.ColumnTCPFlags, uint64(r[37]))
			m.AppendUint(schema.ColumnProto, uint64(r[38]))
			m.AppendUint(schema.ColumnIPTos, uint64(r[39]))
			m.SrcAS = uint32(binary.BigEndian.Uint16(r[40:]))
			m.DstAS = uint32(binary.BigEndian.Uint16(r[42:]))
			m.SrcNetMask = r[44]
			m.DstNetMask = r[45]
			m.AppendUint(schema.ColumnEType, 0x800)
			m.AppendUint(schema.ColumnForwardingStatus, 64)
			m.AppendUint(schema.ColumnFlowDirection, schema.DirectionIngress)
			m.AppendString(schema.ColumnExporterName, "edge1.par1")
			m.AppendString(schema.ColumnInIfName, "et-0/0/1")
			m.AppendString(schema.ColumnOutIfName, "ae12")
			m.AppendString(schema.ColumnInIfDescription, "transit: Cogent")
			m.AppendString(schema.ColumnOutIfDescription, "core: par2")
			m.AppendUint(schema.ColumnInIfSpeed, 100000)
			m.AppendUint(schema.ColumnOutIfSpeed, 400000)
			m.AppendUint(schema.ColumnInIfBoundary, schema.BoundaryExternal)
			m.AppendUint(schema.ColumnOutIfBoundary, schema.BoundaryInternal)
			m.DstASPath = path
			m.Finalize()
			if n++; n == 29 {
				n = 0
			}
		}
		cpu.Stop(b)
	})
	b.Run("goflow2", func(b *testing.B) {
		var fm flowpb.FlowMessage
		buf := make([]byte, 0, 1024)
		addrs := make([]byte, 0, 64) // backing store for the address fields, reused
		n := 0
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			r := pkt[24+48*n:]
			fm.Reset()
			addrs = addrs[:0]
			ip := func(b []byte) []byte {
				a := netip.AddrFrom4([4]byte(b)).As16()
				start := len(addrs)
				addrs = append(addrs, a[:]...)
				return addrs[start:len(addrs):len(addrs)]
			}
			fm.Type = flowpb.FlowMessage_NETFLOW_V5
			fm.TimeReceivedNs = uint64(binary.BigEndian.Uint32(pkt[8:])) * 1e9
			fm.SamplingRate = 1
			fm.SamplerAddress = ip(exporter.AsSlice())
			fm.SrcAddr = ip(r[0:4])
			fm.DstAddr = ip(r[4:8])
			fm.NextHop = ip(r[8:12])
			fm.InIf = uint32(binary.BigEndian.Uint16(r[12:]))
			fm.OutIf = uint32(binary.BigEndian.Uint16(r[14:]))
			fm.Packets = uint64(binary.BigEndian.Uint32(r[16:]))
			fm.Bytes = uint64(binary.BigEndian.Uint32(r[20:]))
			fm.SrcPort = uint32(binary.BigEndian.Uint16(r[32:]))
			fm.DstPort = uint32(binary.BigEndian.Uint16(r[34:]))
			fm.TcpFlags = uint32(r[37])
			fm.Proto = uint32(r[38])
			fm.IpTos = uint32(r[39])
			fm.SrcAs = uint32(binary.BigEndian.Uint16(r[40:]))
			fm.DstAs = uint32(binary.BigEndian.Uint16(r[42:]))
			fm.SrcNet = uint32(r[44])
			fm.DstNet = uint32(r[45])
			fm.Etype = 0x800
			fm.ForwardingStatus = 64
			fm.AsPath = path
			buf = buf[:0]
			buf = protowire.AppendVarint(buf, uint64(proto.Size(&fm)))
			var err error
			if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf, &fm); err != nil {
				b.Fatal(err)
			}
			if n++; n == 29 {
				n = 0
			}
		}
		cpu.Stop(b)
	})
}
