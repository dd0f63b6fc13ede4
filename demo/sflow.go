package demo

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// SFlowEncoder builds sFlow v5 datagrams (sflow.org sFlow Version 5, XDR big-endian): one flow
// sample per flow, each with the sampled packet's raw header (Ethernet, 802.1Q, IPv4/IPv6,
// TCP/UDP/ICMP), an extended switch record (VLAN), an extended router record (next hop,
// masks) and an extended gateway record (AS path).
type SFlowEncoder struct {
	Agent        netip.Addr
	SubAgent     uint32
	SamplingRate uint32
	Boot         time.Time

	seq       uint32
	sampleSeq uint32
	pool      uint32
}

// Encode appends one datagram holding as many of flows as fit in maxSize bytes and returns
// it with the number of flows consumed.
func (e *SFlowEncoder) Encode(dst []byte, flows []Flow, now time.Time, maxSize int) ([]byte, int) {
	base := len(dst)
	e.seq++
	dst = be32(dst, 5)
	if e.Agent.Is4() {
		dst = be32(dst, 1)
	} else {
		dst = be32(dst, 2)
	}
	dst = append(dst, e.Agent.AsSlice()...)
	dst = be32(dst, e.SubAgent)
	dst = be32(dst, e.seq)
	dst = be32(dst, uint32(now.Sub(e.Boot).Milliseconds()))
	countAt := len(dst)
	dst = be32(dst, 0)
	n := 0
	var scratch [512]byte
	for n < len(flows) {
		sample := e.sample(scratch[:0], &flows[n])
		if len(dst)-base+len(sample) > maxSize {
			break
		}
		dst = append(dst, sample...)
		n++
	}
	binary.BigEndian.PutUint32(dst[countAt:], uint32(n))
	return dst, n
}

func be32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }

func (e *SFlowEncoder) sample(dst []byte, f *Flow) []byte {
	e.sampleSeq++
	e.pool += e.SamplingRate
	dst = be32(dst, 1) // enterprise 0, format 1: flow sample
	lenAt := len(dst)
	dst = be32(dst, 0)
	dst = be32(dst, e.sampleSeq)
	dst = be32(dst, f.InIf) // source id: type 0 (ifIndex), index
	dst = be32(dst, e.SamplingRate)
	dst = be32(dst, e.pool)
	dst = be32(dst, 0) // drops
	dst = be32(dst, f.InIf)
	dst = be32(dst, f.OutIf)
	dst = be32(dst, 4) // records

	// Raw packet header (format 1).
	var hdr [128]byte
	h := packetHeader(hdr[:0], f)
	dst = be32(dst, 1)
	dst = be32(dst, uint32(16+(len(h)+3)&^3))
	dst = be32(dst, 1) // header protocol: Ethernet
	frameLen := uint32(f.Bytes / max(f.Packets, 1))
	frameLen = max(frameLen, uint32(len(h))+4)
	dst = be32(dst, frameLen+4) // frame length including FCS
	dst = be32(dst, 4)          // stripped: the FCS
	dst = be32(dst, uint32(len(h)))
	dst = append(dst, h...)
	for len(dst)%4 != 0 {
		dst = append(dst, 0)
	}
	// Extended switch (1001).
	dst = be32(dst, 1001)
	dst = be32(dst, 16)
	dst = be32(dst, uint32(f.VLAN))
	dst = be32(dst, 0)
	dst = be32(dst, uint32(f.VLAN))
	dst = be32(dst, 0)
	// Extended router (1002).
	dst = be32(dst, 1002)
	if f.NextHop.Is4() {
		dst = be32(dst, 16)
		dst = be32(dst, 1)
	} else {
		dst = be32(dst, 28)
		dst = be32(dst, 2)
	}
	dst = append(dst, f.NextHop.AsSlice()...)
	dst = be32(dst, uint32(f.SrcMask))
	dst = be32(dst, uint32(f.DstMask))
	// Extended gateway (1003): next hop, AS, src AS, src peer AS, AS path (one AS_SEQUENCE),
	// communities, local pref.
	dst = be32(dst, 1003)
	gwAt := len(dst)
	dst = be32(dst, 0)
	if f.NextHop.Is4() {
		dst = be32(dst, 1)
	} else {
		dst = be32(dst, 2)
	}
	dst = append(dst, f.NextHop.AsSlice()...)
	dst = be32(dst, LocalAS)
	dst = be32(dst, f.SrcAS)
	dst = be32(dst, f.SrcAS)
	dst = be32(dst, 1) // one segment
	dst = be32(dst, 2) // AS_SEQUENCE
	dst = be32(dst, uint32(len(f.ASPath)))
	for _, as := range f.ASPath {
		dst = be32(dst, as)
	}
	dst = be32(dst, 0)   // communities
	dst = be32(dst, 100) // local pref
	binary.BigEndian.PutUint32(dst[gwAt:], uint32(len(dst)-gwAt-4))
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst
}

// packetHeader writes the first bytes of a packet of the flow: Ethernet with an 802.1Q tag,
// then IPv4 or IPv6, then TCP, UDP or ICMP.
func packetHeader(dst []byte, f *Flow) []byte {
	dst = append(dst, 0x00, 0x1b, 0x21, 0x3c, 0x9d, 0xf8) // destination MAC
	dst = append(dst, 0x00, 0x0e, 0x0c, 0x85, 0x4a, 0x10) // source MAC
	dst = append(dst, 0x81, 0x00, byte(f.VLAN>>8), byte(f.VLAN))
	size := int(f.Bytes / max(f.Packets, 1))
	l4 := l4Header(nil, f)
	if f.Src.Is4() {
		dst = append(dst, 0x08, 0x00)
		total := max(size, 20+len(l4))
		dst = append(dst, 0x45, f.TOS, byte(total>>8), byte(total), 0x12, 0x34, 0x40, 0, 62, f.Proto, 0, 0)
		dst = append(dst, f.Src.AsSlice()...)
		dst = append(dst, f.Dst.AsSlice()...)
	} else {
		dst = append(dst, 0x86, 0xdd)
		payload := max(size-40, len(l4))
		dst = append(dst, 0x60|f.TOS>>4, f.TOS<<4, 0, 0, byte(payload>>8), byte(payload), f.Proto, 62)
		dst = append(dst, f.Src.AsSlice()...)
		dst = append(dst, f.Dst.AsSlice()...)
	}
	return append(dst, l4...)
}

func l4Header(dst []byte, f *Flow) []byte {
	switch f.Proto {
	case 6:
		dst = binary.BigEndian.AppendUint16(dst, f.SrcPort)
		dst = binary.BigEndian.AppendUint16(dst, f.DstPort)
		dst = append(dst, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, f.TCPFlags, 0xff, 0xff, 0, 0, 0, 0)
	case 17:
		dst = binary.BigEndian.AppendUint16(dst, f.SrcPort)
		dst = binary.BigEndian.AppendUint16(dst, f.DstPort)
		dst = append(dst, 0, 8, 0, 0)
	case 1, 58:
		dst = append(dst, f.ICMPType, f.ICMPCode, 0, 0, 0, 1, 0, 1)
	}
	return dst
}
