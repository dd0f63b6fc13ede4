package sflow

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/decoder/packet"
	"flowzero/schema"
)

// Packet is one UDP payload to decode.
type Packet struct {
	Payload []byte
	// Exporter is the UDP source of the datagram.
	Exporter     netip.AddrPort
	TimeReceived time.Time
}

// Decoder decodes sFlow v5 datagrams. It is safe for concurrent use; each worker brings its
// own FlowMessage.
type Decoder struct {
	schema  *schema.Schema
	parser  *packet.Parser
	decap   bool
	metrics *metrics
	agents  agentTable

	wantASPath, wantCommunities bool
	wantL2, wantL3L4            bool
}

// New returns a decoder whose metrics are registered on r (nil: not registered).
func New(r prometheus.Registerer, cfg Configuration, s *schema.Schema) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, err := packet.New(cfg.Packet)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(r)
	if err != nil {
		return nil, err
	}
	return &Decoder{
		schema:  s,
		parser:  p,
		decap:   cfg.Packet.Decapsulation != packet.DecapNone,
		metrics: m,
		agents: agentTable{
			states:   map[agentKey]*agentState{},
			overflow: map[netip.Addr]*agentState{},
			max:      cfg.MaxAgents,
		},
		wantASPath:      s.Enabled(schema.ColumnDstASPath),
		wantCommunities: s.Enabled(schema.ColumnDstCommunities),
		wantL2:          s.GroupEnabled(schema.GroupL2),
		wantL3L4:        s.GroupEnabled(schema.GroupL3L4),
	}, nil
}

// Error is a decoding error; Reason is the label of flowzero_sflow_errors_total.
type Error struct {
	Reason string
}

func (e *Error) Error() string { return "sflow: " + e.Reason }

// errs holds one fixed error per reason, so that failing allocates nothing.
var errs = func() (out [reasonCount]*Error) {
	for r := range out {
		out[r] = &Error{Reason: reasonNames[r]}
	}
	return out
}()

// Interface encodings (sFlow v5 §5, "interface" and "interface_expanded").
const (
	ifFormatIndex    = 0
	ifFormatDiscard  = 1
	ifFormatMultiple = 2
	// ifLocal is the ifIndex of traffic originated or terminated by the agent.
	ifLocal = 0x3fffffff
)

// Bounds of the AS path and community lists kept per flow; longer lists are cut.
const (
	maxASPath      = 128
	maxCommunities = 128
)

// scratch holds the lists a FlowMessage references until the flow is emitted.
type scratch struct {
	asPath      [maxASPath]uint32
	communities [maxCommunities]uint32
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// datagram is the state of one Decode call.
type datagram struct {
	d       *Decoder
	agent   *agentState
	fm      *schema.FlowMessage
	emit    func(*schema.FlowMessage)
	ts      uint64
	address netip.Addr // agent address
	scratch *scratch
	flows   int
	skipped int
	err     error

	// bgpNextHop is set once the flow being decoded has its next hop from an
	// extended_gateway record, which wins over extended_router's.
	bgpNextHop bool

	// Datagram header fields and the data sources of its flow samples, for ExporterDetails.
	subAgent, sequence, uptime uint32
	seenSources                [seenSourcesPerBatch]seenSource
	nSeen                      int
}

// fail counts an error and remembers the first one.
func (g *datagram) fail(r reason) error {
	g.agent.error(r).Inc()
	if g.err == nil {
		g.err = errs[r]
	}
	return errs[r]
}

// drop counts a flow dropped on purpose (not an error of the datagram).
func (g *datagram) drop(r reason) {
	g.agent.error(r).Inc()
}

// Decode decodes one sFlow datagram. For every flow sample it resets fm, fills it and calls
// emit(fm), which must be done with fm (finalized and copied its bytes) when it returns.
// Errors are counted by exporter, agent and reason; the first one is returned, and the samples
// around a malformed one are still decoded when its length allows to skip it.
func (d *Decoder) Decode(pkt Packet, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	b := pkt.Payload
	exporter := pkt.Exporter.Addr().Unmap()

	// sFlow v5 §5 datagram header: version, agent address (type, then 4 or 16 bytes),
	// sub-agent id, sequence number, uptime, number of samples.
	var (
		agent netip.Addr
		r     = reasonNone
		off   int
	)
	switch {
	case len(b) < 8:
		r = reasonTruncatedDatagram
	case be32(b) != 5:
		r = reasonBadVersion
	default:
		switch be32(b[4:]) {
		case 1:
			off = 12
			if len(b) >= off+16 {
				agent = netip.AddrFrom4([4]byte(b[8:12]))
			}
		case 2:
			off = 24
			if len(b) >= off+16 {
				agent = netip.AddrFrom16([16]byte(b[8:24]))
			}
		default:
			r = reasonBadAgentAddress
		}
		if r == reasonNone && !agent.IsValid() {
			r = reasonTruncatedDatagram
		}
	}
	g := datagram{
		d:       d,
		agent:   d.agents.get(d.metrics, agentKey{exporter, agent}),
		fm:      fm,
		emit:    emit,
		ts:      uint64(pkt.TimeReceived.Unix()),
		address: agent,
	}
	g.agent.packets.Inc()
	if r != reasonNone {
		return g.fail(r)
	}
	g.subAgent, g.sequence, g.uptime = be32(b[off:]), be32(b[off+4:]), be32(b[off+8:])
	samples := be32(b[off+12:])
	b = b[off+16:]

	// The announced samples must be framed by their lengths inside the datagram: a length
	// or a count that contradicts it leaves every sample boundary in doubt, so that nothing
	// of the datagram is decoded.
	if !samplesFit(b, samples) {
		return g.fail(reasonTruncatedDatagram)
	}
	for range samples {
		// §5 sample_record: data format (enterprise << 12 | format), then opaque data.
		format, length := be32(b), be32(b[4:])
		sample := b[8 : 8+length]
		b = b[8+length:]
		t := sampleOther
		if format>>12 == 0 {
			switch format {
			case 1:
				t = sampleFlow
				g.flowSample(sample, kindCompact)
			case 3:
				t = sampleExpandedFlow
				g.flowSample(sample, kindExpanded)
			case 5:
				t = sampleDiscard
				g.flowSample(sample, kindDiscard)
			case 2:
				t = sampleCounters
			case 4:
				t = sampleExpandedCounters
			}
		}
		g.agent.sample(t).Inc()
	}

	// Bytes after the announced samples are ignored: the discard, local and multiple
	// interface captures (from Akvorado's fixtures) announce 1 sample and carry more.
	g.commitDetails(true)
	if g.flows > 0 {
		g.agent.flows.Add(float64(g.flows))
	}
	if g.skipped > 0 {
		g.agent.skippedRecords.Add(float64(g.skipped))
	}
	if g.scratch != nil {
		// The last flow may still point into the scratch lists: let go of them first.
		fm.DstASPath, fm.DstCommunities = nil, nil
		scratchPool.Put(g.scratch)
	}
	if g.err != nil {
		return g.err
	}
	return nil
}

// samplesFit reports whether n sample records (§5: data format, length, then as many bytes)
// fit in b.
func samplesFit(b []byte, n uint32) bool {
	for range n {
		if len(b) < 8 || uint64(be32(b[4:])) > uint64(len(b)-8) {
			return false
		}
		b = b[8+be32(b[4:]):]
	}
	return true
}

// Kinds of samples that carry a flow.
const (
	kindCompact  = iota // flow_sample, format 1
	kindExpanded        // flow_sample_expanded, format 3
	kindDiscard         // discarded_packet, format 5 (sflow.org/sflow_drops.txt)
)

// flowSample decodes a flow_sample (§5, format 1), a flow_sample_expanded (format 3) or a
// discarded_packet event (format 5) and emits its flow. A malformed sample emits nothing.
func (g *datagram) flowSample(s []byte, kind int) {
	var (
		rate, inFormat, inValue, outFormat, outValue, records uint32
		forwardingStatus                                      uint64
	)
	switch kind {
	case kindDiscard:
		// sequence, source id type, source id index, drops, input ifIndex, output ifIndex,
		// reason, record count. Discard events are not sampled: each one is one packet.
		if len(s) < 32 {
			g.fail(reasonTruncatedSample)
			return
		}
		rate = 1
		inValue, outValue = be32(s[16:]), be32(s[20:])
		forwardingStatus = discardStatus(be32(s[24:]))
		records = be32(s[28:])
		s = s[32:]
	case kindExpanded:
		// sequence, source id type, source id index, sampling rate, sample pool, drops,
		// input format, input value, output format, output value, record count.
		if len(s) < 44 {
			g.fail(reasonTruncatedSample)
			return
		}
		rate = be32(s[12:])
		g.seen(sourceID{be32(s[4:]), be32(s[8:])}, rate)
		inFormat, inValue = be32(s[24:]), be32(s[28:])
		outFormat, outValue = be32(s[32:]), be32(s[36:])
		records = be32(s[40:])
		s = s[44:]
	default:
		// sequence, source id, sampling rate, sample pool, drops, input, output, record count.
		if len(s) < 32 {
			g.fail(reasonTruncatedSample)
			return
		}
		rate = be32(s[8:])
		src := be32(s[4:]) // type (8 bits), index (24 bits)
		g.seen(sourceID{src >> 24, src & 0xffffff}, rate)
		in, out := be32(s[20:]), be32(s[24:])
		inFormat, inValue = in>>30, in&0x3fffffff
		outFormat, outValue = out>>30, out&0x3fffffff
		records = be32(s[28:])
		s = s[32:]
	}

	d, fm := g.d, g.fm
	fm.Reset()
	g.bgpNextHop = false
	fm.TimeReceived = g.ts
	// A rate of 0 says nothing about sampling: the flow stands for itself, as NetFlow and
	// IPFIX flows without sampling information do.
	fm.SamplingRate = uint64(max(rate, 1))
	fm.ExporterAddress = g.address
	if inFormat == ifFormatIndex && inValue != ifLocal {
		fm.InIf = inValue
	}
	switch outFormat {
	case ifFormatIndex:
		if outValue != ifLocal {
			fm.OutIf = outValue
		}
	case ifFormatDiscard:
		forwardingStatus = discardStatus(outValue)
	case ifFormatMultiple:
		// OutIf stays 0: the value is the number of interfaces.
	}

	var (
		l3Length, l2Length uint64
		decapsulated       bool
	)
	for range records {
		// §5 flow_record: data format, then opaque data.
		if len(s) < 8 {
			g.fail(reasonTruncatedSample)
			return
		}
		format, length := be32(s), be32(s[4:])
		if uint64(length) > uint64(len(s)-8) {
			g.fail(reasonTruncatedSample)
			return
		}
		rec := s[8 : 8+length]
		s = s[8+length:]
		if format>>12 != 0 {
			g.skipped++ // enterprise-specific
			continue
		}
		switch format {
		case 1: // sampled_header
			if len(rec) < 16 {
				g.fail(reasonTruncatedRecord)
				return
			}
			protocol, frameLength, headerLength := be32(rec), be32(rec[4:]), be32(rec[12:])
			if uint64(headerLength) > uint64(len(rec)-16) {
				g.fail(reasonTruncatedRecord)
				return
			}
			if headerLength > frameLength {
				// The header is a prefix of the frame: this record contradicts itself.
				g.fail(reasonHeaderLength)
				return
			}
			header := rec[16 : 16+headerLength]
			var (
				n   int
				err error
			)
			switch protocol {
			case 1: // ETHERNET-ISO88023
				n, err = d.parser.ParseEthernet(header, fm)
			case 11: // IPv4
				n, err = d.parser.ParseIPv4(header, fm)
			case 12: // IPv6
				n, err = d.parser.ParseIPv6(header, fm)
			default:
				g.skipped++
				continue
			}
			if err != nil {
				g.headerError(err)
				if d.decap {
					return // the flow is the tunnelled packet, which we do not have
				}
			} else if d.decap {
				decapsulated = true
			}
			if n > 0 && l3Length == 0 {
				l3Length = uint64(n)
			} else if l2Length == 0 && protocol == 1 {
				l2Length = uint64(frameLength)
			}
		case 2: // sampled_ethernet: length, src MAC, dst MAC (each padded to 8), type
			if d.decap {
				continue
			}
			if len(rec) < 24 {
				g.fail(reasonTruncatedRecord)
				return
			}
			if d.wantL2 {
				fm.AppendUint(schema.ColumnSrcMAC, mac48(rec[4:10]))
				fm.AppendUint(schema.ColumnDstMAC, mac48(rec[12:18]))
			}
			if l2Length == 0 {
				l2Length = uint64(be32(rec))
			}
		case 3: // sampled_ipv4: length, protocol, src, dst, src port, dst port, TCP flags, ToS
			if d.decap {
				continue
			}
			if len(rec) < 32 {
				g.fail(reasonTruncatedRecord)
				return
			}
			firstAddrs(fm, netip.AddrFrom4([4]byte(rec[8:12])), netip.AddrFrom4([4]byte(rec[12:16])))
			g.sampledIP(rec[4:8], rec[16:32], 0x0800)
			if l3Length == 0 {
				l3Length = uint64(be32(rec))
			}
		case 4: // sampled_ipv6: length, protocol, src, dst, src port, dst port, TCP flags, priority
			if d.decap {
				continue
			}
			if len(rec) < 56 {
				g.fail(reasonTruncatedRecord)
				return
			}
			firstAddrs(fm, netip.AddrFrom16([16]byte(rec[8:24])), netip.AddrFrom16([16]byte(rec[24:40])))
			g.sampledIP(rec[4:8], rec[40:56], 0x86dd)
			if l3Length == 0 {
				l3Length = uint64(be32(rec))
			}
		case 1001: // extended_switch: src VLAN, src priority, dst VLAN, dst priority
			if d.decap {
				continue
			}
			if len(rec) < 16 {
				g.fail(reasonTruncatedRecord)
				return
			}
			if v := be32(rec); v != 0 && v < 4096 && fm.SrcVlan == 0 {
				fm.SrcVlan = uint16(v)
			}
			if v := be32(rec[8:]); v != 0 && v < 4096 && fm.DstVlan == 0 {
				fm.DstVlan = uint16(v)
			}
		case 1002: // extended_router: next hop, src mask length, dst mask length
			if d.decap {
				continue
			}
			nextHop, rest, ok := readAddress(rec)
			if !ok {
				g.fail(reasonBadAddress)
				return
			}
			if len(rest) < 8 {
				g.fail(reasonTruncatedRecord)
				return
			}
			if !g.bgpNextHop && !fm.NextHop.IsValid() {
				setNextHop(fm, nextHop)
			}
			if fm.SrcNetMask == 0 {
				fm.SrcNetMask = mask(be32(rest))
			}
			if fm.DstNetMask == 0 {
				fm.DstNetMask = mask(be32(rest[4:]))
			}
		case 1003: // extended_gateway
			if d.decap {
				continue
			}
			if r := g.gateway(rec); r != reasonNone {
				g.fail(r)
				return
			}
		case 1007: // extended_nat: source and destination addresses after translation
			if d.decap {
				continue
			}
			src, rest, ok := readAddress(rec)
			if !ok {
				g.fail(reasonBadAddress)
				return
			}
			dst, _, ok := readAddress(rest)
			if !ok {
				g.fail(reasonBadAddress)
				return
			}
			fm.AppendIP(schema.ColumnSrcAddrNAT, src)
			fm.AppendIP(schema.ColumnDstAddrNAT, dst)
		case 1020: // extended_nat_port: source and destination ports after translation
			if d.decap {
				continue
			}
			if len(rec) < 8 {
				g.fail(reasonTruncatedRecord)
				return
			}
			fm.AppendUint(schema.ColumnSrcPortNAT, uint64(be32(rec)))
			fm.AppendUint(schema.ColumnDstPortNAT, uint64(be32(rec[4:])))
		case 1029, 1030: // extended_vni_egress, extended_vni_ingress (sflow_tunnels.txt)
			if len(rec) < 4 {
				g.fail(reasonTruncatedRecord)
				return
			}
			fm.AppendUint(schema.ColumnVXLANVNI, uint64(be32(rec)))
		default:
			g.skipped++
		}
	}
	if d.decap && !decapsulated {
		g.drop(reasonNotEncapsulated)
		return
	}
	if len(s) > 0 {
		// The record count is lower than the records present: the sample contradicts
		// itself, and the records left out could have changed the flow.
		g.fail(reasonTrailingBytes)
		return
	}

	if l3Length > 0 {
		fm.AppendUint(schema.ColumnBytes, l3Length)
	} else if l2Length > 0 {
		fm.AppendUint(schema.ColumnBytes, l2Length)
	}
	fm.AppendUint(schema.ColumnPackets, 1)
	if forwardingStatus != 0 {
		fm.AppendUint(schema.ColumnForwardingStatus, forwardingStatus)
	}
	g.emit(fm)
	g.flows++
}

// sampledIP records the common part of sampled_ipv4 and sampled_ipv6: the protocol, then
// the 16 bytes of source port, destination port, TCP flags and ToS/priority.
func (g *datagram) sampledIP(protocol, rest []byte, etherType uint64) {
	fm := g.fm
	proto := be32(protocol)
	fm.AppendUint(schema.ColumnEType, etherType)
	fm.AppendUint(schema.ColumnProto, uint64(proto))
	fm.AppendUint(schema.ColumnSrcPort, uint64(be32(rest)))
	fm.AppendUint(schema.ColumnDstPort, uint64(be32(rest[4:])))
	if g.d.wantL3L4 {
		if proto == 6 {
			fm.AppendUint(schema.ColumnTCPFlags, uint64(be32(rest[8:])))
		}
		fm.AppendUint(schema.ColumnIPTos, uint64(be32(rest[12:])))
	}
}

// gateway decodes an extended_gateway record (§5, format 1003): next hop, router AS, source
// AS, source peer AS, destination AS path (segments), communities, local preference.
func (g *datagram) gateway(rec []byte) reason {
	fm := g.fm
	nextHop, rec, ok := readAddress(rec)
	if !ok {
		return reasonBadAddress
	}
	if len(rec) < 16 {
		return reasonTruncatedRecord
	}
	routerAS, srcAS := be32(rec), be32(rec[4:])
	segments := be32(rec[12:])
	rec = rec[16:]

	var (
		pathLen int
		lastAS  uint32
	)
	if g.d.wantASPath && segments > 0 && g.scratch == nil {
		g.scratch = scratchPool.Get().(*scratch)
	}
	for range segments {
		// as_path_segment: type (set or sequence), then a counted list of AS numbers.
		if len(rec) < 8 {
			return reasonTruncatedRecord
		}
		n := be32(rec[4:])
		rec = rec[8:]
		if uint64(n)*4 > uint64(len(rec)) {
			return reasonTruncatedRecord
		}
		for i := range int(n) {
			lastAS = be32(rec[4*i:])
			if g.d.wantASPath && pathLen < maxASPath {
				g.scratch.asPath[pathLen] = lastAS
				pathLen++
			}
		}
		rec = rec[4*n:]
	}
	if len(rec) < 4 {
		return reasonTruncatedRecord
	}
	count := be32(rec)
	rec = rec[4:]
	if uint64(count)*4 > uint64(len(rec)) {
		return reasonTruncatedRecord
	}
	if g.d.wantCommunities && count > 0 {
		if g.scratch == nil {
			g.scratch = scratchPool.Get().(*scratch)
		}
		n := min(int(count), maxCommunities)
		communities := g.scratch.communities[:n]
		for i := range communities {
			communities[i] = be32(rec[4*i:])
		}
		fm.AppendArrayUint32(schema.ColumnDstCommunities, communities)
	}

	// The BGP next hop wins over the router's (extended_router), wherever it is.
	if !g.bgpNextHop && nextHop.IsValid() && !nextHop.IsUnspecified() {
		fm.NextHop = nextHop
		g.bgpNextHop = true
	}
	// The router's AS is the source AS when the agent does not know it, and the destination
	// AS when the path is empty (the destination is local); otherwise the path's last AS is.
	if fm.SrcAS == 0 {
		fm.SrcAS = routerAS
		if srcAS != 0 {
			fm.SrcAS = srcAS
		}
	}
	if fm.DstAS == 0 {
		fm.DstAS = routerAS
		if lastAS != 0 {
			fm.DstAS = lastAS
		}
	}
	if pathLen > 0 {
		fm.AppendArrayUint32(schema.ColumnDstASPath, g.scratch.asPath[:pathLen])
	}
	return reasonNone
}

// headerError counts the error of a sampled header's parsing.
func (g *datagram) headerError(err error) {
	switch err {
	case packet.ErrTruncated:
		g.fail(reasonHeaderTruncated)
	case packet.ErrBadIPHeader:
		g.fail(reasonHeaderBadIP)
	case packet.ErrMPLSPayload:
		g.fail(reasonHeaderMPLS)
	case packet.ErrNotEncapsulated:
		g.drop(reasonNotEncapsulated)
	case packet.ErrTooDeep:
		g.fail(reasonHeaderTooDeep)
	default:
		g.fail(reasonHeaderBadIP)
	}
}

// readAddress reads an sFlow address (§5: type 0 unknown, 1 IPv4, 2 IPv6) and returns the
// bytes after it.
func readAddress(b []byte) (netip.Addr, []byte, bool) {
	if len(b) < 4 {
		return netip.Addr{}, nil, false
	}
	switch be32(b) {
	case 0:
		return netip.Addr{}, b[4:], true
	case 1:
		if len(b) >= 8 {
			return netip.AddrFrom4([4]byte(b[4:8])), b[8:], true
		}
	case 2:
		if len(b) >= 20 {
			return netip.AddrFrom16([16]byte(b[4:20])), b[20:], true
		}
	}
	return netip.Addr{}, nil, false
}

// firstAddrs sets the addresses of a sampled_ipv4/ipv6 record, unless a record before it
// (the sampled header) gave them: every column keeps its first value.
func firstAddrs(fm *schema.FlowMessage, src, dst netip.Addr) {
	if !fm.SrcAddr.IsValid() {
		fm.SrcAddr = src
	}
	if !fm.DstAddr.IsValid() {
		fm.DstAddr = dst
	}
}

// setNextHop records a next hop unless it is unspecified (0.0.0.0 or ::, which agents send
// when they do not know it): it must not hide one given by another record.
func setNextHop(fm *schema.FlowMessage, a netip.Addr) {
	if a.IsValid() && !a.IsUnspecified() {
		fm.NextHop = a
	}
}

// mask bounds a prefix length read from the wire.
func mask(v uint32) uint8 {
	return uint8(min(v, 128))
}

// discardStatus maps the reason of a discarded packet (sFlow v5 §5 output interface format 1:
// ICMP unreachable codes 0-255, then 256 unknown, 257 TTL exceeded, 258 ACL, 259 no buffer
// space, 260 RED, 261 traffic shaping, 262 packet too big; 263 and up from sflow_drops.txt)
// to an IPFIX forwarding status (RFC 7270 §4.12, dropped: 128 and up).
func discardStatus(reason uint32) uint64 {
	switch reason {
	case 0, 1, 2, 3, 5, 6, 7, 11, 12: // network, host, protocol, port unreachable...
		return 131 // dropped: unroutable
	case 4: // fragmentation needed and DF set
		return 133
	case 9, 10, 13: // administratively prohibited
		return 129 // dropped: ACL deny
	case 257: // TTL exceeded
		return 137
	case 258: // ACL
		return 130 // dropped: ACL drop
	case 260: // RED
		return 139
	case 261: // traffic shaping, rate limiting
		return 138 // dropped: policer
	case 262: // packet too big (protocols without fragmentation)
		return 133
	case 302: // unicast reverse path forwarding
		return 140
	}
	return 128 // dropped: unknown
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

func mac48(b []byte) uint64 {
	_ = b[5]
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}
