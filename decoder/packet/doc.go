// Package packet parses the headers of a sampled packet (an sFlow raw packet header, an IPFIX
// data-link frame section, a captured packet) straight into a schema.FlowMessage: Ethernet with
// 802.1Q/802.1ad tags, MPLS, IPv4, IPv6 with its extension headers, then TCP, UDP and ICMP.
//
// Design note. A Parser is configured once (which tunnel to look through, if any) and then is
// only read, so one Parser serves every worker. Parsing walks the bytes once, front to back,
// with explicit bounds checks and no intermediate structure: each field is written to the
// FlowMessage as soon as it is read; columns switched off in the schema cost one bit test in
// the FlowMessage, and whole groups (L2, L3/L4 extras) are skipped when none of their columns
// is on. Nothing allocates: the MPLS label stack, which FlowMessage.AppendArrayUint32 would
// force onto the heap, is collected in a pooled buffer.
//
// The headers are a sample: the exporter usually truncates them (sFlow's default is 128
// bytes), so a missing transport header is not an error, the flow simply has no ports. What
// is an error (an *Error, whose Reason labels the caller's counter): an Ethernet, VLAN, MPLS
// or IP header cut short, an IP header that contradicts itself, an MPLS payload that is none
// of IPv4, IPv6 or Ethernet behind a zero control word, Ethernet nested (through MPLS
// pseudowires, VXLAN or GRE bridging) more than 4 levels deep, and, when decapsulation is
// configured, a packet without the configured tunnel. Only one tunnel level is removed: GRE in
// GRE reports the second GRE packet, so nesting costs nothing beyond the first level. A frame whose EtherType is not IP (ARP,
// LLDP...) is not an error: its L2 fields are recorded and the returned length is 0.
//
// Decapsulation (Configuration.Decapsulation) reports the inner packet instead of the outer
// one: the outer L2/L3 headers are walked but not recorded, and the flow describes the
// tunnelled traffic (addresses, ports, L3 length of the inner packet). Once the tunnel is
// found, the tunnel columns (off by default) get the outer IP addresses (TunnelSrcAddr,
// TunnelDstAddr), the outer IP protocol or next header (TunnelProto: 47 GRE, 4 or 41
// IP-in-IP, 17 VXLAN, 43 SRv6 with a segment routing header), the VXLAN VNI, the GRE key and
// the SRv6 segment list (SRv6SIDs: the SRH's segments in header order, or the outer
// destination when there is no SRH).
//
// MPLS payload detection (no EtherType follows a label stack): label 0 (IPv4 explicit null)
// means IPv4 and label 2 (IPv6 explicit null) IPv6; otherwise the first nibble of the payload
// decides, 4 for IPv4, 6 for IPv6, and 0 for a pseudowire control word (RFC 4385), which must
// be all zeros (no sequencing, as every EoMPLS exporter we have seen sends) and is followed by
// an Ethernet frame. Anything else is reported as ReasonMPLSPayload (this follows Akvorado).
//
// QinQ: the innermost VLAN tag (the customer VLAN) is the one recorded, as SrcVlan and
// DstVlan when they are not already set (sFlow's extended switch record sets them first).
// Addresses too are set only when no record before the header gave them: every column of a
// flow keeps its first value, as the appended ones (protocol, ports) do.
package packet
