package demo

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// WritePcap writes flows generated from seed as exporter datagrams into a pcap file (Ethernet,
// IPv4, UDP from 192.0.2.1 to 192.0.2.10:dstPort), as if captured in front of a collector
// from start on, one datagram per millisecond: the input of `flowzero replay` for load tests.
// protocol is netflow-v9, ipfix or sflow.
func WritePcap(w io.Writer, protocol string, flows int, seed uint64, start time.Time) (datagrams int, err error) {
	var enc encoder
	now := start
	var dstPort uint16
	switch protocol {
	case "netflow-v9":
		enc, dstPort = &NetFlowEncoder{SourceID: 1, SamplingRate: 1000, TemplateRefresh: 1000, Boot: now.Add(-time.Hour)}, 2055
	case "ipfix":
		enc, dstPort = &NetFlowEncoder{IPFIX: true, SourceID: 1, SamplingRate: 1000, TemplateRefresh: 1000, Boot: now.Add(-time.Hour)}, 4739
	case "sflow":
		enc, dstPort = &SFlowEncoder{Agent: netip.MustParseAddr("192.0.2.1"), SamplingRate: 1000, Boot: now.Add(-time.Hour)}, 6343
	default:
		return 0, fmt.Errorf("unknown protocol %q (netflow-v9, ipfix, sflow)", protocol)
	}
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		return 0, err
	}
	g := NewGenerator(seed)
	batch := make([]Flow, 0, 64)
	var payload, frame []byte
	for done := 0; done < flows; {
		batch = batch[:0]
		for i := 0; i < 64 && done+i < flows; i++ {
			batch = append(batch, g.Next(now))
		}
		for len(batch) > 0 {
			var n int
			payload, n = enc.Encode(payload[:0], batch, now, 1400)
			batch = batch[n:]
			done += n
			frame = udpFrame(frame[:0], payload, dstPort)
			ci := gopacket.CaptureInfo{Timestamp: now, CaptureLength: len(frame), Length: len(frame)}
			if err := pw.WritePacket(ci, frame); err != nil {
				return datagrams, err
			}
			datagrams++
			now = now.Add(time.Millisecond)
		}
	}
	return datagrams, nil
}

func udpFrame(dst, payload []byte, dstPort uint16) []byte {
	dst = append(dst, 0x02, 0, 0, 0, 0, 0x10, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00)
	total := 20 + 8 + len(payload)
	ip := []byte{0x45, 0, byte(total >> 8), byte(total), 0, 0, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 10}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	dst = append(dst, ip...)
	dst = binary.BigEndian.AppendUint16(dst, 40000)
	dst = binary.BigEndian.AppendUint16(dst, dstPort)
	dst = binary.BigEndian.AppendUint16(dst, uint16(8+len(payload)))
	dst = append(dst, 0, 0) // no UDP checksum (allowed over IPv4)
	return append(dst, payload...)
}
