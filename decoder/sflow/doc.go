// Package sflow decodes sFlow version 5 datagrams (https://sflow.org/sflow_version_5.txt)
// into flows, writing each one straight into a schema.FlowMessage.
//
// What is decoded: flow samples and expanded flow samples (one flow each, Packets = 1, the
// sample's sampling rate) and discarded-packet events (format 5 of sflow.org/sflow_drops.txt:
// one flow each, sampling rate 1, the drop reason in ForwardingStatus), with these flow
// records: raw packet header (Ethernet, IPv4 or IPv6, parsed by decoder/packet with its
// decapsulation setting), sampled Ethernet, sampled IPv4 and IPv6, extended switch (VLANs),
// extended router (next hop, masks), extended gateway (AS numbers, AS path, communities, next
// hop), extended NAT and NAT port (post-NAT addresses and ports) and extended VNI (VXLAN VNI,
// from sflow_tunnels.txt). Other flow records (user, URL, MPLS...) and enterprise-specific
// samples and records are skipped and counted in flowzero_sflow_skipped_records_total and
// flowzero_sflow_samples_total{type="other"}.
//
// Counter samples (formats 2 and 4) are counted, by agent, in
// flowzero_sflow_samples_total{type="counters"|"expanded-counters"}; their records (interface
// counters and the like) are NOT exposed as metrics: they are ignored. Polling SNMP or
// gNMI gives interface counters with names and without the cardinality of one series per
// agent and interface; flowzero keeps sFlow for what it samples.
//
// Interfaces (§5 "interface" and the expanded form): the agent encodes an input or output
// interface as a 2-bit format and a 30-bit value (two 32-bit words in expanded samples).
// Format 0 is an ifIndex, except 0x3FFFFFFF, traffic originated or terminated by the agent
// itself, stored as interface 0. Format 1 (output only) means the packet was discarded: the
// value is the reason, mapped to an IPFIX forwarding status (RFC 7270: 128 and up) in
// ForwardingStatus, and OutIf is 0. Format 2 means several output interfaces (broadcast,
// multicast): OutIf is 0. This follows Akvorado and GoFlow2.
//
// Field precedence: records are read in the order of the sample, and a column given by
// several of them keeps its first value, as in NetFlow and IPFIX (a zero next hop, and a
// VLAN of 0 or above 4095, are no value); the BGP next hop of extended_gateway wins over
// extended_router's, wherever they are. Bytes is the L3 length (the IP total length) of the
// sampled packet, from the raw header or the sampled IPv4/IPv6 record; when none is known
// (a non-IP frame), the L2 frame length. SamplingRate is the sample's rate, or 1 when it
// is 0 (no sampling information, as for NetFlow). When decapsulation is configured, only
// the tunnelled packet is reported: the outer-packet records (sampled Ethernet/IPv4/IPv6,
// switch, router, gateway, NAT) are skipped, and a sample whose header does not carry the
// tunnel is dropped and counted (reason not-encapsulated), as Akvorado does.
//
// Framing. The samples a datagram announces must be framed by their lengths inside it: when
// a length or the count says otherwise, nothing of the datagram is decoded (reason
// truncated-datagram), since every sample boundary after the error is in doubt. Bytes after
// the announced samples are ignored, not counted: the Akvorado fixtures
// data-{discard,local,multiple}-interface(s) announce 1 sample and carry more. Inside a
// sample, lengths or counts of records beyond its bytes (truncated-*), records left over
// after the announced record count (trailing-bytes), a sampled header longer than the frame
// it was taken from (header-longer-than-frame) or an address of unknown type (bad-address)
// drop that sample only, and are counted in flowzero_sflow_errors_total by exporter, agent
// and reason. A sampled header the packet parser cannot read to the end (header-truncated,
// header-bad-ip, header-mpls-payload, header-too-deep) is a matter of content, not
// framing: its flow is emitted with what could be read, and counted.
//
// ExporterDetails reports, per agent behind an exporter address, its sub-agents (datagrams,
// last sequence number and uptime) and the data sources of their flow samples (sampling rate,
// samples, last sample). A datagram collects its data sources on the stack and takes the
// agent's lock once (once more per 16 distinct sources); sub-agents (16) and data sources (256 per agent) are bounded.
//
// Design note. Decode checks the chain of sample lengths, then walks the datagram once with
// bounds-checked big-endian reads and no intermediate structures; each sample is framed by
// its length, so a malformed sample is counted and skipped while the next ones are still
// decoded. Per (exporter, agent) state holds
// the Prometheus handles, resolved once and looked up with a read lock per datagram; the
// number of such states is bounded (max-agents) so that spoofed agent addresses cannot grow
// memory or series without limit. AS paths and communities need a buffer that outlives the
// record (the FlowMessage keeps the slice until the flow is emitted): it comes from a
// sync.Pool, one per datagram, so that nothing allocates per flow.
package sflow
