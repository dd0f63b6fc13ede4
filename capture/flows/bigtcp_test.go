package flows

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"flowzero/decoder/packet"
	"flowzero/internal/pcapfile"
	"flowzero/schema"
)

func testSchemaParser(t *testing.T) (*schema.Schema, *packet.Parser) {
	t.Helper()
	sch, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	parser, err := packet.New(packet.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	return sch, parser
}

// firstFrame returns a copy of the first untagged Ethernet frame of the captures carrying
// the given EtherType and, if not negative, IP protocol.
func firstFrame(t *testing.T, etherType uint16, proto int) []byte {
	t.Helper()
	for _, path := range allCaptures(t) {
		frames, err := pcapfile.ReadFrames(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range frames {
			d := fr.Data
			if fr.LinkType != layers.LinkTypeEthernet || len(d) < 14+40 || binary.BigEndian.Uint16(d[12:14]) != etherType {
				continue
			}
			if proto < 0 || (etherType == 0x0800 && int(d[14+9]) == proto) || (etherType == 0x86dd && int(d[14+6]) == proto) {
				return bytes.Clone(d)
			}
		}
	}
	t.Fatalf("no frame of EtherType %#x and protocol %d in the captures", etherType, proto)
	return nil
}

// TestZeroLengthIP counts a real frame whose IP length field was zeroed as Linux leaves it
// in a packet captured before segmentation (TSO, BIG TCP): the L3 length is the original
// length minus the Ethernet header, in the key and in the flow's bytes.
func TestZeroLengthIP(t *testing.T) {
	const bigLen = 100_014 // a BIG TCP packet's original length, captured with a snap length
	v4 := firstFrame(t, 0x0800, 6)
	v4[14+2], v4[14+3] = 0, 0
	v6 := firstFrame(t, 0x86dd, -1)
	v6[14+4], v6[14+5] = 0, 0
	// RFC 2675 jumbogram: a hop-by-hop header with the jumbo payload option (type 0xc2).
	jumbo := append(bytes.Clone(v6[:14+40]), 6, 0, 0xc2, 4, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(jumbo[14+40+4:], bigLen-14-40)
	jumbo[14+6] = 0
	jumbo = append(jumbo, v6[14+40:]...)
	for _, c := range []struct {
		name   string
		data   []byte
		length int
		want   int
	}{
		{"IPv4 BIG TCP", v4, bigLen, bigLen - 14},
		{"IPv4 TSO within 64 KiB, whole frame captured", v4, len(v4), len(v4) - 14},
		{"IPv4 original length below the captured one", v4, 10, len(v4) - 14},
		{"IPv6 BIG TCP without hop-by-hop", v6, bigLen, bigLen - 14},
		{"IPv6 empty payload", v6, len(v6), 40},
		{"IPv6 jumbogram", jumbo, bigLen, bigLen - 14},
	} {
		k, l3, _, ok := extractFlowKey(c.data, uint16(layers.LinkTypeEthernet), c.length)
		if !ok || k.proto == 0 || l3 != c.want {
			t.Errorf("%s: l3 %d (key found %v, protocol %d), want %d", c.name, l3, ok, k.proto, c.want)
		}
	}

	// The flow table takes the original length the server passes.
	sch, parser := testSchemaParser(t)
	fc := &flowCollector{s: sch}
	table := newFlowTable(DefaultConfiguration(), parser, sch, fc.emit, "t")
	table.Packet(0, uint16(layers.LinkTypeEthernet), 1, bigLen, v4)
	table.expire(true)
	if flows := fc.flows(t); len(flows) != 1 || flows[0]["Bytes"] != uint64(bigLen-14) {
		t.Fatalf("flows %v, want one of %d bytes", flows, bigLen-14)
	}
}
