package netflow

import "flowzero/schema"

// action is what the record decoder does with one field's value. Templates are compiled to
// a list of actions once, when they are received: the per-record loop is a switch on a
// byte, and a field whose column is disabled compiles to actSkip.
type action uint8

const (
	actSkip       action = iota
	actUint              // fm.AppendUint(col, value)
	actMAC               // fm.AppendUint(col, 48-bit value)
	actIP                // fm.AppendIP(col, address)
	actBytes             // byte counter (decides whether a reverse flow without packet counter is empty)
	actPackets           // packet counter (also decides whether a reverse flow is empty)
	actSrcAddr           // the first address that is not zero
	actDstAddr           //
	actSrcAddrTun        // in a tunnel's template: the last address, the first to TunnelSrcAddr
	actDstAddrTun        //
	actNextHop           // IP next hop (IEs 15, 62): used when no BGP next hop is set
	actBGPNextHop        // BGP next hop (IEs 18, 63)
	actSrcMask
	actDstMask
	actSrcAS
	actDstAS
	actInIf
	actOutIf
	actInIfPhys  // physical interfaces (IEs 252/253): used when the logical one is absent
	actOutIfPhys //
	actSrcVlan
	actDstVlan
	actSrcPort
	actDstPort
	actProto
	actTunnelProto  // in a tunnel's template: the outer header's protocol
	actIPVersion    // IE 60
	actEtherType    // IE 256
	actRate         // IEs 34, 50: sampling interval carried in the record
	actSamplerID    // IEs 48, 302
	actPktInterval  // IE 305
	actPktSpace     // IE 306
	actSampSize     // IE 309
	actSampPop      // IE 310
	actFirstUptime  // IE 22: flow start, ms of sysUptime
	actLastUptime   // IE 21
	actSysInit      // IE 160: systemInitTimeMilliseconds
	actStartSec     // IE 150
	actEndSec       // IE 151
	actStartMs      // IE 152
	actEndMs        // IE 153
	actStartNTP     // IEs 154, 156 (dateTimeMicroseconds/Nanoseconds, NTP format)
	actEndNTP       // IEs 155, 157
	actStartDeltaUs // IE 158: microseconds before export time
	actEndDeltaUs   // IE 159
	actMPLS         // IEs 70-79: label stack entries, label = value >> 4
	actICMPTypeCode // IEs 32, 139
	actICMPType     // IEs 176, 178
	actICMPCode     // IEs 177, 179
	actDirection    // IE 61
	actJuniperCPID  // Juniper (PEN 2636) IE 137 commonPropertiesId
	actDataLink     // IE 315 dataLinkFrameSection (RFC 7133)
)

// spec maps an IANA information element to an action and, for the generic actions, a column.
type spec struct {
	act action
	col schema.ColumnKey
}

const (
	penReverse = 29305 // RFC 5103 reverse information elements
	penJuniper = 2636
)

// Counters with a rule of their own (see compileTemplate).
const (
	ieOctetTotal       = 85
	iePacketTotal      = 86
	ieResponderOctets  = 232
	ieResponderPackets = 299
)

// ianaSpecs maps IANA IPFIX information elements (also NetFlow v9 field types 1-127, which
// RFC 7012 keeps compatible) to actions. Absent elements are skipped.
var ianaSpecs = map[uint16]spec{
	1:   {actBytes, schema.ColumnBytes},     // octetDeltaCount
	23:  {actBytes, schema.ColumnBytes},     // postOctetDeltaCount
	85:  {actBytes, schema.ColumnBytes},     // octetTotalCount (v9 IN_PERMANENT_BYTES)
	231: {actBytes, schema.ColumnBytes},     // initiatorOctets
	232: {actBytes, schema.ColumnBytes},     // responderOctets: reverse direction
	2:   {actPackets, schema.ColumnPackets}, // packetDeltaCount
	24:  {actPackets, schema.ColumnPackets}, // postPacketDeltaCount
	86:  {actPackets, schema.ColumnPackets}, // packetTotalCount (v9 IN_PERMANENT_PKTS)
	298: {actPackets, schema.ColumnPackets}, // initiatorPackets
	299: {actPackets, schema.ColumnPackets}, // responderPackets: reverse direction
	4:   {actProto, schema.ColumnProto},
	5:   {actUint, schema.ColumnIPTos},
	6:   {actUint, schema.ColumnTCPFlags},
	7:   {actSrcPort, schema.ColumnSrcPort},
	11:  {actDstPort, schema.ColumnDstPort},
	8:   {actSrcAddr, schema.ColumnSrcAddr},
	27:  {actSrcAddr, schema.ColumnSrcAddr},
	12:  {actDstAddr, schema.ColumnDstAddr},
	28:  {actDstAddr, schema.ColumnDstAddr},
	9:   {actSrcMask, schema.ColumnSrcNetMask},
	29:  {actSrcMask, schema.ColumnSrcNetMask},
	13:  {actDstMask, schema.ColumnDstNetMask},
	30:  {actDstMask, schema.ColumnDstNetMask},
	15:  {actNextHop, schema.ColumnNextHop},
	62:  {actNextHop, schema.ColumnNextHop},
	18:  {actBGPNextHop, schema.ColumnNextHop},
	63:  {actBGPNextHop, schema.ColumnNextHop},
	16:  {actSrcAS, schema.ColumnSrcAS},
	17:  {actDstAS, schema.ColumnDstAS},
	10:  {actInIf, schema.ColumnInIf},
	14:  {actOutIf, schema.ColumnOutIf},
	252: {actInIfPhys, schema.ColumnInIf},
	253: {actOutIfPhys, schema.ColumnOutIf},
	58:  {actSrcVlan, schema.ColumnSrcVlan}, // vlanId
	243: {actSrcVlan, schema.ColumnSrcVlan}, // dot1qVlanId
	59:  {actDstVlan, schema.ColumnDstVlan}, // postVlanId
	254: {actDstVlan, schema.ColumnDstVlan}, // postDot1qVlanId
	56:  {actMAC, schema.ColumnSrcMAC},      // sourceMacAddress
	81:  {actMAC, schema.ColumnSrcMAC},      // postSourceMacAddress
	80:  {actMAC, schema.ColumnDstMAC},      // destinationMacAddress
	57:  {actMAC, schema.ColumnDstMAC},      // postDestinationMacAddress
	60:  {actIPVersion, schema.ColumnEType},
	256: {actEtherType, schema.ColumnEType},
	192: {actUint, schema.ColumnIPTTL}, // ipTTL
	52:  {actUint, schema.ColumnIPTTL}, // minimumTTL
	31:  {actUint, schema.ColumnIPv6FlowLabel},
	54:  {actUint, schema.ColumnIPFragmentID},
	88:  {actUint, schema.ColumnIPFragmentOffset},
	32:  {actICMPTypeCode, 0},
	139: {actICMPTypeCode, 0},
	176: {actICMPType, 0},
	178: {actICMPType, 0},
	177: {actICMPCode, 0},
	179: {actICMPCode, 0},
	61:  {actDirection, schema.ColumnFlowDirection},
	89:  {actUint, schema.ColumnForwardingStatus},
	225: {actIP, schema.ColumnSrcAddrNAT}, // postNATSourceIPv4Address
	281: {actIP, schema.ColumnSrcAddrNAT}, // postNATSourceIPv6Address
	226: {actIP, schema.ColumnDstAddrNAT},
	282: {actIP, schema.ColumnDstAddrNAT},
	227: {actUint, schema.ColumnSrcPortNAT}, // postNAPTSourceTransportPort
	228: {actUint, schema.ColumnDstPortNAT},
	234: {actUint, schema.ColumnIngressVRFID},
	235: {actUint, schema.ColumnEgressVRFID},
	34:  {actRate, 0}, // samplingInterval
	50:  {actRate, 0}, // samplerRandomInterval
	48:  {actSamplerID, 0},
	302: {actSamplerID, 0}, // selectorId
	305: {actPktInterval, 0},
	306: {actPktSpace, 0},
	309: {actSampSize, 0},
	310: {actSampPop, 0},
	22:  {actFirstUptime, schema.ColumnTimeFlowStart},
	21:  {actLastUptime, schema.ColumnTimeFlowEnd},
	160: {actSysInit, 0},
	150: {actStartSec, schema.ColumnTimeFlowStart},
	151: {actEndSec, schema.ColumnTimeFlowEnd},
	152: {actStartMs, schema.ColumnTimeFlowStart},
	153: {actEndMs, schema.ColumnTimeFlowEnd},
	154: {actStartNTP, schema.ColumnTimeFlowStart},
	156: {actStartNTP, schema.ColumnTimeFlowStart},
	155: {actEndNTP, schema.ColumnTimeFlowEnd},
	157: {actEndNTP, schema.ColumnTimeFlowEnd},
	158: {actStartDeltaUs, schema.ColumnTimeFlowStart},
	159: {actEndDeltaUs, schema.ColumnTimeFlowEnd},
	315: {actDataLink, 0},
}

func init() {
	for ie := uint16(70); ie <= 79; ie++ { // mplsTopLabelStackSection .. mplsLabelStackSection10
		ianaSpecs[ie] = spec{actMPLS, schema.ColumnMPLSLabels}
	}
}

// sampling actions are needed for the rate even when the SamplingRate column is off.
func (a action) alwaysNeeded() bool {
	switch a {
	case actRate, actSamplerID, actPktInterval, actPktSpace, actSampSize, actSampPop, actSysInit,
		actBytes, actPackets, actProto, actSrcPort, actDstPort, actTunnelProto:
		return true
	case actFirstUptime, actLastUptime, actStartSec, actEndSec, actStartMs, actEndMs,
		actStartNTP, actEndNTP, actStartDeltaUs, actEndDeltaUs:
		// Needed for TimeReceived when the timestamp source is the flow's time.
		return true
	case actICMPTypeCode, actICMPType, actICMPCode, actDataLink, actJuniperCPID:
		return true // their columns are checked when they are appended
	}
	return false
}

// optionsAction tells if an options data record's field is read: only what gives sampling
// rates and the system init time.
func (a action) optionsAction() bool {
	switch a {
	case actRate, actSamplerID, actPktInterval, actPktSpace, actSampSize, actSampPop, actSysInit:
		return true
	}
	return false
}

// reverseSpec returns the spec that a non-reverse field has in the reverse direction of an
// RFC 5103 biflow: source and destination swap.
func reverseSpec(s spec) spec {
	swap := func(a action, c schema.ColumnKey) spec { return spec{a, c} }
	switch s.act {
	case actSrcAddr:
		return swap(actDstAddr, schema.ColumnDstAddr)
	case actDstAddr:
		return swap(actSrcAddr, schema.ColumnSrcAddr)
	case actSrcAddrTun:
		return swap(actDstAddrTun, schema.ColumnDstAddr)
	case actDstAddrTun:
		return swap(actSrcAddrTun, schema.ColumnSrcAddr)
	case actSrcMask:
		return swap(actDstMask, schema.ColumnDstNetMask)
	case actDstMask:
		return swap(actSrcMask, schema.ColumnSrcNetMask)
	case actSrcAS:
		return swap(actDstAS, schema.ColumnDstAS)
	case actDstAS:
		return swap(actSrcAS, schema.ColumnSrcAS)
	case actInIf:
		return swap(actOutIf, schema.ColumnOutIf)
	case actOutIf:
		return swap(actInIf, schema.ColumnInIf)
	case actInIfPhys:
		return swap(actOutIfPhys, schema.ColumnOutIf)
	case actOutIfPhys:
		return swap(actInIfPhys, schema.ColumnInIf)
	case actSrcVlan:
		return swap(actDstVlan, schema.ColumnDstVlan)
	case actDstVlan:
		return swap(actSrcVlan, schema.ColumnSrcVlan)
	case actSrcPort:
		return swap(actDstPort, schema.ColumnDstPort)
	case actDstPort:
		return swap(actSrcPort, schema.ColumnSrcPort)
	case actMAC, actIP, actUint:
		switch s.col {
		case schema.ColumnSrcMAC:
			return swap(s.act, schema.ColumnDstMAC)
		case schema.ColumnDstMAC:
			return swap(s.act, schema.ColumnSrcMAC)
		case schema.ColumnSrcAddrNAT:
			return swap(s.act, schema.ColumnDstAddrNAT)
		case schema.ColumnDstAddrNAT:
			return swap(s.act, schema.ColumnSrcAddrNAT)
		case schema.ColumnSrcPortNAT:
			return swap(s.act, schema.ColumnDstPortNAT)
		case schema.ColumnDstPortNAT:
			return swap(s.act, schema.ColumnSrcPortNAT)
		case schema.ColumnIngressVRFID:
			return swap(s.act, schema.ColumnEgressVRFID)
		case schema.ColumnEgressVRFID:
			return swap(s.act, schema.ColumnIngressVRFID)
		}
	case actDirection:
		return spec{actSkip, 0} // the direction of the forward flow does not describe the reverse one
	case actBytes, actPackets:
		return spec{actSkip, 0} // the forward counters do not count the reverse traffic
	}
	return s
}
