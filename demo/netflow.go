package demo

import (
	"encoding/binary"
	"time"
)

// NetFlow v9 (RFC 3954) and IPFIX (RFC 7011) encoders. Templates are sent in the first
// datagram and refreshed every TemplateRefresh datagrams, with an options template and an
// options data record carrying the sampling rate (IE 34, samplingInterval).

// Template IDs used by the demo exporter.
const (
	templateIPv4    = 256
	templateIPv6    = 257
	templateOptions = 258
)

type field struct{ id, length uint16 }

// Fields of the v4 and v6 data templates, in record order (RFC 3954 §8 / IANA IPFIX IEs).
var (
	fieldsV4 = []field{
		{1, 8}, {2, 8}, {4, 1}, {5, 1}, {6, 1}, {7, 2}, {8, 4}, {9, 1}, {10, 4}, {11, 2},
		{12, 4}, {13, 1}, {14, 4}, {15, 4}, {16, 4}, {17, 4}, {61, 1}, {89, 1}, {58, 2}, {32, 2},
	}
	fieldsV6 = []field{
		{1, 8}, {2, 8}, {4, 1}, {5, 1}, {6, 1}, {7, 2}, {27, 16}, {29, 1}, {10, 4}, {11, 2},
		{28, 16}, {30, 1}, {14, 4}, {62, 16}, {16, 4}, {17, 4}, {61, 1}, {89, 1}, {58, 2}, {139, 2},
	}
)

// NetFlowEncoder builds NetFlow v9 or IPFIX datagrams.
type NetFlowEncoder struct {
	// IPFIX selects IPFIX (version 10) instead of NetFlow v9.
	IPFIX bool
	// SourceID is the v9 source ID or the IPFIX observation domain.
	SourceID uint32
	// SamplingRate is announced in options records (1 in N packets).
	SamplingRate uint32
	// TemplateRefresh is the number of datagrams between template refreshes.
	TemplateRefresh int
	// Boot is the exporter's boot time (sysUptime base for NetFlow v9).
	Boot time.Time

	seq      uint32 // v9: datagrams; IPFIX: data records
	sent     int
	recCount int
}

func (e *NetFlowEncoder) header(dst []byte, now time.Time) []byte {
	if e.IPFIX {
		// Version, length (patched), export time, sequence, observation domain (RFC 7011 §3.1).
		dst = binary.BigEndian.AppendUint16(dst, 10)
		dst = binary.BigEndian.AppendUint16(dst, 0)
		dst = binary.BigEndian.AppendUint32(dst, uint32(now.Unix()))
		dst = binary.BigEndian.AppendUint32(dst, e.seq)
		return binary.BigEndian.AppendUint32(dst, e.SourceID)
	}
	// Version, count (patched), sysUptime, unix secs, sequence, source ID (RFC 3954 §5.1).
	dst = binary.BigEndian.AppendUint16(dst, 9)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(now.Sub(e.Boot).Milliseconds()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(now.Unix()))
	dst = binary.BigEndian.AppendUint32(dst, e.seq)
	return binary.BigEndian.AppendUint32(dst, e.SourceID)
}

func (e *NetFlowEncoder) templates(dst []byte) []byte {
	start := len(dst)
	setID := uint16(0)
	if e.IPFIX {
		setID = 2
	}
	dst = binary.BigEndian.AppendUint16(dst, setID)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	for _, t := range []struct {
		id     uint16
		fields []field
	}{{templateIPv4, e.fieldsV4()}, {templateIPv6, e.fieldsV6()}} {
		dst = binary.BigEndian.AppendUint16(dst, t.id)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(t.fields)))
		for _, f := range t.fields {
			dst = binary.BigEndian.AppendUint16(dst, f.id)
			dst = binary.BigEndian.AppendUint16(dst, f.length)
		}
		e.recCount++
	}
	binary.BigEndian.PutUint16(dst[start+2:], uint16(len(dst)-start))
	// Options template: scope = the exporting system (v9 scope type 1) or the observation
	// domain (IPFIX IE 149); option = samplingInterval (IE 34).
	start = len(dst)
	if e.IPFIX {
		dst = binary.BigEndian.AppendUint16(dst, 3)
		dst = binary.BigEndian.AppendUint16(dst, 0)
		dst = binary.BigEndian.AppendUint16(dst, templateOptions)
		dst = binary.BigEndian.AppendUint16(dst, 2) // field count
		dst = binary.BigEndian.AppendUint16(dst, 1) // scope field count
		dst = append(dst, 0, 149, 0, 4, 0, 34, 0, 4)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, 1)
		dst = binary.BigEndian.AppendUint16(dst, 0)
		dst = binary.BigEndian.AppendUint16(dst, templateOptions)
		dst = binary.BigEndian.AppendUint16(dst, 4) // scope length in bytes
		dst = binary.BigEndian.AppendUint16(dst, 4) // options length in bytes
		dst = append(dst, 0, 1, 0, 4, 0, 34, 0, 4)
		dst = append(dst, 0, 0) // padding to 4 bytes
	}
	e.recCount++
	binary.BigEndian.PutUint16(dst[start+2:], uint16(len(dst)-start))
	// Options data: the sampling rate.
	start = len(dst)
	dst = binary.BigEndian.AppendUint16(dst, templateOptions)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, e.SourceID)
	dst = binary.BigEndian.AppendUint32(dst, e.SamplingRate)
	e.recCount++
	binary.BigEndian.PutUint16(dst[start+2:], uint16(len(dst)-start))
	return dst
}

func (e *NetFlowEncoder) fieldsV4() []field {
	if e.IPFIX {
		// IPFIX carries absolute times (flowStartMilliseconds, flowEndMilliseconds).
		return append(fieldsV4[:len(fieldsV4):len(fieldsV4)], field{152, 8}, field{153, 8})
	}
	return append(fieldsV4[:len(fieldsV4):len(fieldsV4)], field{22, 4}, field{21, 4})
}

func (e *NetFlowEncoder) fieldsV6() []field {
	if e.IPFIX {
		return append(fieldsV6[:len(fieldsV6):len(fieldsV6)], field{152, 8}, field{153, 8})
	}
	return append(fieldsV6[:len(fieldsV6):len(fieldsV6)], field{22, 4}, field{21, 4})
}

// Encode appends one datagram holding as many of flows as fit in maxSize bytes and returns
// it with the number of flows consumed.
func (e *NetFlowEncoder) Encode(dst []byte, flows []Flow, now time.Time, maxSize int) ([]byte, int) {
	base := len(dst)
	e.recCount = 0
	dst = e.header(dst, now)
	if e.TemplateRefresh <= 0 || e.sent%e.TemplateRefresh == 0 {
		dst = e.templates(dst)
	}
	e.sent++
	n := 0
	for n < len(flows) {
		v6 := flows[n].Src.Is6()
		id, rec := uint16(templateIPv4), 91+8
		if v6 {
			id, rec = templateIPv6, 139+8
		}
		if len(dst)-base+4+rec > maxSize {
			break
		}
		start := len(dst)
		dst = binary.BigEndian.AppendUint16(dst, id)
		dst = binary.BigEndian.AppendUint16(dst, 0)
		for n < len(flows) && flows[n].Src.Is6() == v6 && len(dst)-base+rec <= maxSize {
			dst = e.record(dst, &flows[n])
			n++
			e.recCount++
			if e.IPFIX {
				e.seq++
			}
		}
		for (len(dst)-start)%4 != 0 { // RFC 3954 §5.3: pad data flowsets to 32 bits
			dst = append(dst, 0)
		}
		binary.BigEndian.PutUint16(dst[start+2:], uint16(len(dst)-start))
	}
	if e.IPFIX {
		binary.BigEndian.PutUint16(dst[base+2:], uint16(len(dst)-base))
	} else {
		binary.BigEndian.PutUint16(dst[base+2:], uint16(e.recCount))
		e.seq++
	}
	return dst, n
}

func (e *NetFlowEncoder) record(dst []byte, f *Flow) []byte {
	dst = binary.BigEndian.AppendUint64(dst, f.Bytes)
	dst = binary.BigEndian.AppendUint64(dst, f.Packets)
	dst = append(dst, f.Proto, f.TOS, f.TCPFlags)
	dst = binary.BigEndian.AppendUint16(dst, f.SrcPort)
	dst = append(dst, f.Src.AsSlice()...)
	dst = append(dst, f.SrcMask)
	dst = binary.BigEndian.AppendUint32(dst, f.InIf)
	dst = binary.BigEndian.AppendUint16(dst, f.DstPort)
	dst = append(dst, f.Dst.AsSlice()...)
	dst = append(dst, f.DstMask)
	dst = binary.BigEndian.AppendUint32(dst, f.OutIf)
	dst = append(dst, f.NextHop.AsSlice()...)
	dst = binary.BigEndian.AppendUint32(dst, f.SrcAS)
	dst = binary.BigEndian.AppendUint32(dst, f.DstAS)
	dst = append(dst, f.Direction, 64) // forwarding status 64: forwarded
	dst = binary.BigEndian.AppendUint16(dst, f.VLAN)
	dst = binary.BigEndian.AppendUint16(dst, uint16(f.ICMPType)<<8|uint16(f.ICMPCode)) // IE 32/139
	if e.IPFIX {
		dst = binary.BigEndian.AppendUint64(dst, uint64(f.Start.UnixMilli()))
		return binary.BigEndian.AppendUint64(dst, uint64(f.End.UnixMilli()))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(f.Start.Sub(e.Boot).Milliseconds()))
	return binary.BigEndian.AppendUint32(dst, uint32(f.End.Sub(e.Boot).Milliseconds()))
}
