package pbwire

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
)

const flowProto = `
syntax = "proto3";
package flowzero.pbwire.test;
message Exporter {
  uint32 unix_secs = 1;
  bytes address = 2;
}
message Flow {
  bytes src_addr = 1;
  bytes dst_addr = 2;
  bytes next_hop = 3;
  uint32 in_if = 4;
  uint32 out_if = 5;
  uint64 packets = 6;
  uint64 bytes = 7;
  uint32 src_port = 8;
  uint32 dst_port = 9;
  uint32 proto = 10;
  uint32 src_as = 11;
  uint32 dst_as = 12;
  Exporter exporter = 13;
}
`

var (
	flowSrcAddr  = MakeTag(1, Bytes)
	flowDstAddr  = MakeTag(2, Bytes)
	flowNextHop  = MakeTag(3, Bytes)
	flowInIf     = MakeTag(4, Varint)
	flowOutIf    = MakeTag(5, Varint)
	flowPackets  = MakeTag(6, Varint)
	flowBytes    = MakeTag(7, Varint)
	flowSrcPort  = MakeTag(8, Varint)
	flowDstPort  = MakeTag(9, Varint)
	flowProtocol = MakeTag(10, Varint)
	flowSrcAS    = MakeTag(11, Varint)
	flowDstAS    = MakeTag(12, Varint)
	flowExporter = MakeTag(13, Bytes)
	exporterTime = MakeTag(1, Varint)
	exporterAddr = MakeTag(2, Bytes)
)

// appendNFv5Record writes one NetFlow v5 flow record (RFC-less Cisco format: 48 bytes) as a
// Flow message, the exporter as a nested message.
func appendNFv5Record(dst []byte, unixSecs uint32, exporter netip.Addr, r []byte) []byte {
	be16 := func(b []byte) uint64 { return uint64(binary.BigEndian.Uint16(b)) }
	be32 := func(b []byte) uint64 { return uint64(binary.BigEndian.Uint32(b)) }
	dst = AppendBytesField(dst, flowSrcAddr, r[0:4])
	dst = AppendBytesField(dst, flowDstAddr, r[4:8])
	dst = AppendBytesField(dst, flowNextHop, r[8:12])
	dst = AppendVarintField(dst, flowInIf, be16(r[12:]))
	dst = AppendVarintField(dst, flowOutIf, be16(r[14:]))
	dst = AppendVarintField(dst, flowPackets, be32(r[16:]))
	dst = AppendVarintField(dst, flowBytes, be32(r[20:]))
	dst = AppendVarintField(dst, flowSrcPort, be16(r[32:]))
	dst = AppendVarintField(dst, flowDstPort, be16(r[34:]))
	dst = AppendVarintField(dst, flowProtocol, uint64(r[38]))
	dst = AppendVarintField(dst, flowSrcAS, be16(r[40:]))
	dst = AppendVarintField(dst, flowDstAS, be16(r[42:]))
	dst, mark := BeginNested(dst, flowExporter)
	dst = AppendVarintField(dst, exporterTime, uint64(unixSecs))
	dst = AppendBytesField(dst, exporterAddr, exporter.AsSlice())
	return EndNested(dst, mark)
}

// TestCaptureFlows encodes the 29 flows of a real NetFlow v5 datagram as a stream of
// length-delimited Flow messages, reads the stream back and decodes every message with the
// protobuf runtime.
func TestCaptureFlows(t *testing.T) {
	datagrams, err := pcapfile.ReadUDP(testdata.Path(t, "netflow", "nfv5.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(datagrams) != 1 {
		t.Fatalf("%d datagrams, want 1", len(datagrams))
	}
	p := datagrams[0].Payload
	count := int(binary.BigEndian.Uint16(p[2:]))
	unixSecs := binary.BigEndian.Uint32(p[8:])
	if count != 29 || len(p) != 24+48*count {
		t.Fatalf("NetFlow v5 header: %d flows in %d bytes", count, len(p))
	}

	var stream []byte
	buf := make([]byte, 0, 256)
	for i := range count {
		buf = buf[:ReserveDelimited]
		buf = appendNFv5Record(buf, unixSecs, datagrams[0].Src.Addr(), p[24+48*i:24+48*(i+1)])
		stream = append(stream, FinishDelimited(buf, 0)...)
	}

	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"flow.proto": flowProto}),
	}}
	files, err := c.Compile(context.Background(), "flow.proto")
	if err != nil {
		t.Fatal(err)
	}
	md := files[0].Messages().ByName("Flow")
	fd := md.Fields().ByName
	addr := func(m protoreflect.Message, name protoreflect.Name) netip.Addr {
		a, _ := netip.AddrFromSlice(m.Get(fd(name)).Bytes())
		return a
	}

	type flow struct {
		src, dst, nextHop   string
		inIf, outIf         uint32
		packets, bytes      uint64
		srcPort, dstPort    uint32
		proto, srcAS, dstAS uint32
	}
	// The first flows of the capture, as in the datagram.
	want := []flow{
		{"161.202.212.212", "202.152.70.24", "61.6.255.150", 117, 86, 1, 133, 30104, 11963, 6, 36351, 10101},
		{"173.194.4.8", "202.160.21.5", "61.6.255.150", 115, 86, 7, 10262, 443, 37422, 6, 15169, 0},
		{"172.217.31.10", "61.6.236.37", "202.160.6.115", 115, 126, 1, 1246, 443, 52290, 17, 15169, 10094},
	}
	d := NewDelimitedReader(bytes.NewReader(stream), 1024)
	n := 0
	for ; ; n++ {
		msg, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("message %d: %v", n, err)
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(msg, m); err != nil {
			t.Fatalf("message %d: proto.Unmarshal() error: %v", n, err)
		}
		exp := m.Get(fd("exporter")).Message()
		expFields := exp.Descriptor().Fields().ByName
		if got := exp.Get(expFields("unix_secs")).Uint(); got != 1680626679 {
			t.Errorf("flow %d: exporter time %d, want 1680626679", n, got)
		}
		if got, _ := netip.AddrFromSlice(exp.Get(expFields("address")).Bytes()); got != datagrams[0].Src.Addr() {
			t.Errorf("flow %d: exporter %s, want %s", n, got, datagrams[0].Src.Addr())
		}
		if n >= len(want) {
			continue
		}
		got := flow{
			addr(m, "src_addr").String(), addr(m, "dst_addr").String(), addr(m, "next_hop").String(),
			uint32(m.Get(fd("in_if")).Uint()), uint32(m.Get(fd("out_if")).Uint()),
			m.Get(fd("packets")).Uint(), m.Get(fd("bytes")).Uint(),
			uint32(m.Get(fd("src_port")).Uint()), uint32(m.Get(fd("dst_port")).Uint()),
			uint32(m.Get(fd("proto")).Uint()), uint32(m.Get(fd("src_as")).Uint()), uint32(m.Get(fd("dst_as")).Uint()),
		}
		if got != want[n] {
			t.Errorf("flow %d = %+v, want %+v", n, got, want[n])
		}
	}
	if n != 29 {
		t.Fatalf("read %d messages, want 29", n)
	}
}
