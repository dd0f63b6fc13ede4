package netflow

import (
	"cmp"
	"encoding/binary"
	"net/netip"

	"flowzero/schema"
)

// beUint reads an unsigned big-endian number of 0 to 8 bytes; longer values keep their
// last 8 bytes. Reduced-size encoding (RFC 7011 §6.2) is therefore transparent.
func beUint(v []byte) uint64 {
	switch len(v) {
	case 0:
		return 0
	case 1:
		return uint64(v[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(v))
	case 4:
		return uint64(binary.BigEndian.Uint32(v))
	case 8:
		return binary.BigEndian.Uint64(v)
	}
	if len(v) > 8 {
		v = v[len(v)-8:]
	}
	var x uint64
	for _, b := range v {
		x = x<<8 | uint64(b)
	}
	return x
}

// addrFrom reads a 4- or 16-byte address; the all-zero address counts as absent (templates
// often carry both IPv4 and IPv6 fields, one of them zero).
func addrFrom(v []byte) (netip.Addr, bool) {
	switch len(v) {
	case 4:
		if binary.BigEndian.Uint32(v) == 0 {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4([4]byte(v)), true
	case 16:
		if binary.BigEndian.Uint64(v) == 0 && binary.BigEndian.Uint64(v[8:]) == 0 {
			return netip.Addr{}, false
		}
		return netip.AddrFrom16([16]byte(v)), true
	}
	return netip.Addr{}, false
}

// ntpUnixOffset is the number of seconds from 1900-01-01 (NTP era 0) to 1970-01-01.
const ntpUnixOffset = 2208988800

// ntpToMillis converts an IPFIX dateTimeMicroseconds/Nanoseconds value (RFC 7011 §6.1.9,
// NTP format: seconds since 1900 and a binary fraction) to unix milliseconds.
func ntpToMillis(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	sec := uint64(binary.BigEndian.Uint32(v))
	frac := uint64(binary.BigEndian.Uint32(v[4:]))
	if sec < ntpUnixOffset {
		return 0
	}
	return (sec-ntpUnixOffset)*1000 + frac*1000>>32
}

// samplingFields accumulates the elements that give a sampling rate (in a flow record or an
// options record).
type samplingFields struct {
	rate                   uint64 // IE 34 or 50
	samplerID              uint64 // IE 48 or 302
	hasSampler             bool
	pktInterval, pktSpace  uint64 // IEs 305, 306
	sampleSize, population uint64 // IEs 309, 310
}

// value returns the rate the fields describe, 0 when none.
func (s *samplingFields) value() uint64 {
	switch {
	case s.rate != 0:
		return s.rate
	case s.pktInterval != 0:
		// RFC 5477 §8.2.2/§8.2.3: select Interval packets, skip Space packets.
		return (s.pktInterval + s.pktSpace) / s.pktInterval
	case s.sampleSize != 0 && s.population != 0:
		// RFC 5477 §8.2.4/§8.2.5: Size packets out of Population.
		return s.population / s.sampleSize
	}
	return 0
}

// dataRecord decodes one data record and emits its flow, and for an RFC 5103 biflow the
// reverse flow too. It returns the record length.
func (c *decodeContext) dataRecord(t *template, rec []byte) (int, reason) {
	n, r := c.record(t, rec, false)
	if r != reasonNone || !t.biflow {
		return n, r
	}
	c.record(t, rec, true)
	return n, reasonNone
}

// record decodes one data record (RFC 7011 §3.4.3, RFC 3954 §5.4) straight into the flow
// message, in one direction.
func (c *decodeContext) record(t *template, rec []byte, reverse bool) (int, reason) {
	d, e, fm := c.d, c.e, c.fm
	c.begin()
	var (
		etype, etypeExplicit uint64
		proto                uint8
		srcPort, dstPort     uint16
		icmpType, icmpCode   uint8
		icmpFound            bool
		bgpNextHop           bool
		sampling             samplingFields
		firstUp, lastUp      uint64
		hasFirst, hasLast    bool
		sysInit              uint64
		startMs, endMs       uint64
		nMPLS                int
		packets, bytes       uint64
		frame                []byte
	)
	steps := t.fwd
	if reverse {
		steps = t.rev
	}
	fixed := t.fixedLen >= 0
	if fixed {
		if len(rec) < t.fixedLen {
			return 0, reasonTruncatedRecord
		}
		rec = rec[:t.fixedLen]
	}
	off := 0
	for i := range steps {
		s := &steps[i]
		var v []byte
		if fixed {
			// Offsets are within fixedLen, checked above.
			v = rec[s.off : s.off+uint32(s.length)]
		} else {
			var ok bool
			if v, off, ok = fieldAt(rec, off, int(s.length)); !ok {
				return 0, reasonTruncatedRecord
			}
		}
		act, col := s.act, s.col
		switch act {
		case actSkip:
		case actUint:
			fm.AppendUint(col, beUint(v))
		case actMAC:
			if x := beUint(v); x != 0 {
				fm.AppendUint(col, x) // the first that is not zero
			}
		case actIP:
			if a, ok := addrFrom(v); ok {
				fm.AppendIP(col, a)
			}
		case actBytes:
			bytes = beUint(v)
			fm.AppendUint(col, bytes)
		case actPackets:
			packets = beUint(v)
			fm.AppendUint(col, packets)
		case actSrcAddr:
			if a, ok := addrFrom(v); ok && !fm.SrcAddr.IsValid() {
				fm.SrcAddr = a
				etype = etherTypeOf(a)
			}
		case actDstAddr:
			if a, ok := addrFrom(v); ok && !fm.DstAddr.IsValid() {
				fm.DstAddr = a
				etype = etherTypeOf(a)
			}
		case actSrcAddrTun:
			if a, ok := addrFrom(v); ok {
				if !c.tunnel[0].IsValid() {
					c.tunnel[0] = a
				}
				fm.SrcAddr = a
				etype = etherTypeOf(a)
			}
		case actDstAddrTun:
			if a, ok := addrFrom(v); ok {
				if !c.tunnel[1].IsValid() {
					c.tunnel[1] = a
				}
				fm.DstAddr = a
				etype = etherTypeOf(a)
			}
		case actNextHop:
			if a, ok := addrFrom(v); ok && !fm.NextHop.IsValid() {
				fm.NextHop = a
			}
		case actBGPNextHop:
			// The BGP next hop wins over the IP one, wherever it is.
			if a, ok := addrFrom(v); ok && !bgpNextHop {
				fm.NextHop = a
				bgpNextHop = true
			}
		case actSrcMask:
			if m := uint8(beUint(v)); fm.SrcNetMask == 0 {
				fm.SrcNetMask = m
			}
		case actDstMask:
			if m := uint8(beUint(v)); fm.DstNetMask == 0 {
				fm.DstNetMask = m
			}
		case actSrcAS:
			fm.SrcAS = uint32(beUint(v))
		case actDstAS:
			fm.DstAS = uint32(beUint(v))
		case actInIf:
			fm.InIf = uint32(beUint(v))
		case actOutIf:
			fm.OutIf = uint32(beUint(v))
		case actInIfPhys:
			if fm.InIf == 0 {
				fm.InIf = uint32(beUint(v))
			}
		case actOutIfPhys:
			if fm.OutIf == 0 {
				fm.OutIf = uint32(beUint(v))
			}
		case actSrcVlan:
			if fm.SrcVlan == 0 {
				fm.SrcVlan = uint16(beUint(v) & 0xfff)
			}
		case actDstVlan:
			if fm.DstVlan == 0 {
				fm.DstVlan = uint16(beUint(v) & 0xfff)
			}
		case actSrcPort:
			srcPort = uint16(beUint(v))
			fm.AppendUint(schema.ColumnSrcPort, uint64(srcPort))
		case actDstPort:
			dstPort = uint16(beUint(v))
			fm.AppendUint(schema.ColumnDstPort, uint64(dstPort))
		case actProto:
			proto = uint8(beUint(v))
			fm.AppendUint(schema.ColumnProto, uint64(proto))
		case actTunnelProto:
			fm.AppendUint(schema.ColumnTunnelProto, beUint(v))
		case actIPVersion:
			switch beUint(v) {
			case 4:
				etypeExplicit = cmp.Or(etypeExplicit, etherTypeIPv4)
			case 6:
				etypeExplicit = cmp.Or(etypeExplicit, etherTypeIPv6)
			}
		case actEtherType:
			etypeExplicit = cmp.Or(etypeExplicit, beUint(v))
		case actRate:
			sampling.rate = cmp.Or(sampling.rate, beUint(v))
		case actSamplerID:
			if !sampling.hasSampler {
				sampling.samplerID, sampling.hasSampler = beUint(v), true
			}
		case actPktInterval:
			sampling.pktInterval = beUint(v)
		case actPktSpace:
			sampling.pktSpace = beUint(v)
		case actSampSize:
			sampling.sampleSize = beUint(v)
		case actSampPop:
			sampling.population = beUint(v)
		case actFirstUptime:
			if !hasFirst {
				firstUp, hasFirst = beUint(v), true
			}
		case actLastUptime:
			if !hasLast {
				lastUp, hasLast = beUint(v), true
			}
		case actSysInit:
			sysInit = cmp.Or(sysInit, beUint(v))
		// Absolute times: the first that is not zero.
		case actStartSec:
			if startMs == 0 {
				startMs = beUint(v) * 1000
			}
		case actEndSec:
			if endMs == 0 {
				endMs = beUint(v) * 1000
			}
		case actStartMs:
			if startMs == 0 {
				startMs = beUint(v)
			}
		case actEndMs:
			if endMs == 0 {
				endMs = beUint(v)
			}
		case actStartNTP:
			if startMs == 0 {
				startMs = ntpToMillis(v)
			}
		case actEndNTP:
			if endMs == 0 {
				endMs = ntpToMillis(v)
			}
		case actStartDeltaUs:
			if startMs == 0 {
				startMs = uint64(c.exportSec)*1000 - beUint(v)/1000
			}
		case actEndDeltaUs:
			if endMs == 0 {
				endMs = uint64(c.exportSec)*1000 - beUint(v)/1000
			}
		case actMPLS:
			// RFC 3032 §2.1 label stack entry without TTL: label (20 bits), TC, S.
			if x := beUint(v); x != 0 && nMPLS < len(e.mpls) {
				e.mpls[nMPLS] = uint32(x >> 4)
				nMPLS++
			}
		case actICMPTypeCode:
			// The first that is not zero: dual-stack templates carry IEs 32 and 139.
			if x := beUint(v); icmpType == 0 && icmpCode == 0 {
				icmpType, icmpCode = uint8(x>>8), uint8(x)
			}
			icmpFound = true
		case actICMPType:
			if icmpType == 0 {
				icmpType = uint8(beUint(v))
			}
			icmpFound = true
		case actICMPCode:
			if icmpCode == 0 {
				icmpCode = uint8(beUint(v))
			}
			icmpFound = true
		case actDirection:
			switch beUint(v) {
			case 0:
				fm.AppendUint(schema.ColumnFlowDirection, schema.DirectionIngress)
			case 1:
				fm.AppendUint(schema.ColumnFlowDirection, schema.DirectionEgress)
			}
		case actJuniperCPID:
			// Juniper commonPropertiesId: the top 6 bits give the property; type 2 is the
			// forwarding exception code (10 bits), 0 when the packet was forwarded.
			if len(v) == 2 && v[0]>>2 == 2 {
				if binary.BigEndian.Uint16(v)&0x3ff == 0 {
					fm.AppendUint(schema.ColumnForwardingStatus, 64) // forwarded, unknown reason
				} else {
					fm.AppendUint(schema.ColumnForwardingStatus, 128) // dropped, unknown reason
				}
			}
		case actDataLink:
			frame = v
		}
	}

	if fixed {
		off = t.fixedLen
	}
	if reverse && (t.reverseCounter == actPackets && packets == 0 || t.reverseCounter == actBytes && bytes == 0 || t.reverseCounter == actSkip) {
		return off, reasonNone // no traffic in the reverse direction: no flow
	}

	// Timestamps: relative ones are ms of the exporter's uptime (RFC 3954 §8), a 32-bit
	// counter, dated from the uptime at the export: the NetFlow v9 header's, or the export
	// time minus the system init time (IE 160, in the record or from options data).
	if hasFirst || hasLast {
		exportMs := uint64(c.exportSec) * 1000
		uptime, known := c.sysUptime, c.version == 9
		if sysInit == 0 && c.version != 9 {
			sysInit = e.sysInit[c.domain]
		}
		if sysInit != 0 {
			uptime, known = uint32(exportMs-sysInit), true
		}
		if known {
			// Absolute times, when the record has them, win.
			if hasFirst && startMs == 0 {
				startMs = uptimeToUnixMs(exportMs, uptime, uint32(firstUp))
			}
			if hasLast && endMs == 0 {
				endMs = uptimeToUnixMs(exportMs, uptime, uint32(lastUp))
			}
		}
	}
	if startMs != 0 {
		fm.AppendUint(schema.ColumnTimeFlowStart, startMs/1000)
	}
	if endMs != 0 {
		fm.AppendUint(schema.ColumnTimeFlowEnd, endMs/1000)
	}
	switch d.tsSource {
	case tsFlowStart:
		if startMs != 0 {
			fm.TimeReceived = startMs / 1000
		}
	case tsFlowEnd:
		if endMs != 0 {
			fm.TimeReceived = endMs / 1000
		}
	}

	// RFC 7133 data-link frame: the sampled packet's own headers.
	if frame != nil {
		l3, drop, err := d.link.parse(frame, fm)
		if err != nil {
			e.m.errors[reasonDataLink].Inc()
			if drop {
				return off, reasonNone
			}
		}
		if l3 > 0 {
			fm.AppendUint(schema.ColumnBytes, uint64(l3))
			fm.AppendUint(schema.ColumnPackets, 1)
		}
	}

	if proto == 1 || proto == 58 {
		if !icmpFound && srcPort == 0 {
			// Type and code in the destination port (Cisco, NetFlow v5 heritage).
			icmpType, icmpCode, icmpFound = uint8(dstPort>>8), uint8(dstPort), true
		}
		if icmpFound {
			if proto == 1 {
				fm.AppendUint(schema.ColumnICMPv4Type, uint64(icmpType))
				fm.AppendUint(schema.ColumnICMPv4Code, uint64(icmpCode))
			} else {
				fm.AppendUint(schema.ColumnICMPv6Type, uint64(icmpType))
				fm.AppendUint(schema.ColumnICMPv6Code, uint64(icmpCode))
			}
		}
	}
	if t.tunnel {
		// The outer header's addresses, when the record has an inner header.
		if a := c.tunnel[0]; a.IsValid() && a != fm.SrcAddr {
			fm.AppendIP(schema.ColumnTunnelSrcAddr, a)
		}
		if a := c.tunnel[1]; a.IsValid() && a != fm.DstAddr {
			fm.AppendIP(schema.ColumnTunnelDstAddr, a)
		}
		c.tunnel = [2]netip.Addr{}
	}
	if etypeExplicit != 0 {
		etype = etypeExplicit
	}
	if etype != 0 {
		fm.AppendUint(schema.ColumnEType, etype)
	}
	if nMPLS > 0 {
		fm.AppendArrayUint32(schema.ColumnMPLSLabels, e.mpls[:nMPLS])
	}

	// Sampling rate: the record's own, else its sampler's from options data, else the
	// observation domain's (sampler ID 0), else the configured default (in finish).
	rate := sampling.value()
	if rate == 0 && len(e.samplers) > 0 {
		rc := &c.rateCache
		if rc.valid && rc.hasSampler == sampling.hasSampler && rc.sampler == sampling.samplerID && rc.domain == c.domain {
			rate = rc.rate
		} else {
			if sampling.hasSampler {
				rate = e.samplers[samplerKey{c.version, c.domain, sampling.samplerID}]
			}
			if rate == 0 {
				rate = e.samplers[samplerKey{c.version, c.domain, 0}]
			}
			rc.valid, rc.hasSampler, rc.sampler, rc.domain, rc.rate = true, sampling.hasSampler, sampling.samplerID, c.domain, rate
		}
	}
	c.finish(rate)
	return off, reasonNone
}

func etherTypeOf(a netip.Addr) uint64 {
	if a.Is4() {
		return etherTypeIPv4
	}
	return etherTypeIPv6
}

// optionsRecord reads one options data record (RFC 7011 §3.4.2.2) for the sampling rate
// and system init time it announces.
func (c *decodeContext) optionsRecord(t *template, rec []byte) (int, reason) {
	var sampling samplingFields
	var sysInit uint64
	off := 0
	for i := range t.fields {
		f := &t.fields[i]
		v, next, ok := fieldAt(rec, off, int(f.length))
		if !ok {
			return 0, reasonTruncatedRecord
		}
		off = next
		switch f.act {
		case actRate:
			sampling.rate = cmp.Or(sampling.rate, beUint(v))
		case actSamplerID:
			if !sampling.hasSampler {
				sampling.samplerID, sampling.hasSampler = beUint(v), true
			}
		case actPktInterval:
			sampling.pktInterval = beUint(v)
		case actPktSpace:
			sampling.pktSpace = beUint(v)
		case actSampSize:
			sampling.sampleSize = beUint(v)
		case actSampPop:
			sampling.population = beUint(v)
		case actSysInit:
			sysInit = beUint(v)
		}
	}
	e := c.e
	limit := c.d.cfg.MaxSamplersPerExporter
	if rate := sampling.value(); rate != 0 {
		k := samplerKey{c.version, c.domain, sampling.samplerID}
		if old, ok := e.samplers[k]; !ok || old != rate {
			if putBounded(e.samplers, k, rate, limit) {
				c.rateCache.valid = false
				e.dirty = true
				e.m.samplers.Inc()
				c.learnedState(StateSamplingRate, sampling.samplerID, rate)
			} else {
				e.m.errors[reasonTooManySamplers].Inc()
			}
		}
	}
	if sysInit != 0 {
		if old, ok := e.sysInit[c.domain]; !ok || old != sysInit {
			if putBounded(e.sysInit, c.domain, sysInit, limit) {
				c.learnedState(StateSystemInit, 0, sysInit)
			} else {
				e.m.errors[reasonTooManySamplers].Inc()
			}
		}
	}
	return off, reasonNone
}

// putBounded stores v at k unless m already holds limit keys and k is not one of them: a
// known key is always updated. It reports whether v was stored.
func putBounded[K comparable, V any](m map[K]V, k K, v V, limit int) (stored bool) {
	if _, ok := m[k]; !ok && len(m) >= limit {
		return false
	}
	m[k] = v
	return true
}

// fieldAt returns the value of a field whose template length is l, starting at off in rec,
// and the offset after it. A variable-length field (RFC 7011 §7) starts with one length
// byte, or 255 then two length bytes. ok is false when the record is too short.
func fieldAt(rec []byte, off, l int) (v []byte, next int, ok bool) {
	if l == variableLength {
		if off >= len(rec) {
			return nil, off, false
		}
		l = int(rec[off])
		off++
		if l == 255 {
			if off+2 > len(rec) {
				return nil, off, false
			}
			l = int(binary.BigEndian.Uint16(rec[off:]))
			off += 2
		}
	}
	if l > len(rec)-off {
		return nil, off, false
	}
	return rec[off : off+l], off + l, true
}
