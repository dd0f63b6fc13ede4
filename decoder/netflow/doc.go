// Package netflow decodes NetFlow v5, NetFlow v9 (RFC 3954) and IPFIX (RFC 7011) datagrams
// straight into schema.FlowMessage values.
//
// # Design
//
// Templates are compiled once, when received, into a list of fields, each with a length and
// an action (a byte) resolved from the information element, its enterprise number and the
// schema: a field whose column is disabled becomes a skip. A data record is then one loop over
// the fields that slices the record and switches on the action, writing hot columns into the
// FlowMessage fields and the others through its Append methods. There is no intermediate
// structure, no reflection, no binary.Read, and no allocation per flow; a template refresh
// with identical bytes costs one comparison.
//
// State lives per exporter session, keyed by exporter address and source port; inside it,
// templates are keyed by version, observation domain (source ID) and template ID, as RFC 7011
// §8.4 scopes them. Each session has a lock held while one of its datagrams is decoded, its
// own bounds (templates, sampling rates, pending data) and its Prometheus handles, resolved
// when the session is created. The number of sessions is bounded too.
//
// Data sets whose template is unknown are copied into a bounded per-session queue and decoded
// as soon as a template set brings their template, even later in the same datagram; the rest
// are counted as dropped.
//
// Sampling rates come, in order, from the flow record (IEs 34, 50, 305/306, 309/310), from
// options data records matched by sampler ID (IEs 48, 302) and observation domain, from the
// options record of the domain without sampler ID, from the NetFlow v5 header, and from the
// configuration (per-exporter default, or override which always wins). A flow for which
// nothing gives a rate gets 1, in every protocol (sFlow too): every volume is Bytes ×
// SamplingRate, and a flow stands at least for itself.
//
// Counters: Bytes and Packets come from the delta counters (IEs 1/2, 23/24, and Cisco NSEL's
// initiator counters 231/298); the total counters (IEs 85/86, NetFlow v9 IN_PERMANENT_*)
// only when the template has no delta counter of their kind. RFC 5103 biflows (reverse
// elements, PEN 29305) and NSEL records with responder counters (IEs 232/299) give two
// flows: the forward one, then the reverse one with sources and destinations swapped, the
// reverse elements in place of their forward counterparts, and counters from reverse
// elements only (same precedence). The reverse flow is emitted when its packet counter, or
// without one its byte counter, is not zero.
//
// Times relative to the exporter's uptime (v5 and v9 FIRST/LAST_SWITCHED, IPFIX IEs 22/21)
// are dated from the uptime at the export (the v9 header's, or the export time minus the
// system init time, IE 160, from the record or from options data): their difference,
// modulo 2³² and signed, is added to the export time, so that a 32-bit uptime that wrapped
// (a router up for more than 49.7 days) does not move a flow by 49.7 days. Absolute times
// (IEs 150-159) win over relative ones.
//
// A column given twice keeps its first value. An IANA element that a template repeats
// (Cisco's SRv6 templates carry the outer header's 27, 28, 7, 11 and 4, then the inner
// packet's) is read at its first occurrence, the outer header; elements of one column
// (IPv4 and IPv6 addresses, masks, next hops and ICMP type/code of dual-stack templates,
// MACs) give the first value that is not zero. Documented exceptions: the BGP next hop (IEs
// 18, 63) wins over the IP one, the logical interfaces (10, 14) over the physical ones
// (252, 253), an explicit IP version or EtherType (60, 256) over the addresses' family.
// With decapsulation configured, a template that repeats header elements is a tunnel's,
// and the flow is the inner packet, as for a decapsulated data-link frame: the last
// occurrence of each repeated element is read, and the outer header's addresses and
// protocol go to TunnelSrcAddr, TunnelDstAddr and TunnelProto. Vendor elements (Juniper
// repeats its commonPropertiesId, one property each) are not concerned.
//
// RFC 7133 data-link sections (IE 315) are decoded by flowzero/decoder/packet, with the
// decapsulation the configuration selects; the L3 length of the sampled packet becomes the
// byte count of a one-packet flow.
//
// Framing. Nothing is emitted from a part of a datagram whose framing contradicts itself,
// and it is counted (flowzero_netflow_errors_total, by exporter and reason): a NetFlow v5
// datagram whose record count disagrees with its length (zero padding after the records
// aside); a NetFlow v9 or IPFIX message whose set lengths do not chain to its end (a v9
// datagram may end with zero padding), since one wrong length moves every boundary after
// it; a data set whose records do not fill it (they are framed before any is decoded); a
// template set with a record that does not parse (no template of it is installed). What
// is safe is kept: the other sets of a message whose set lengths chain. Within a set,
// bytes after the last record that cannot hold one, or zeros from a record boundary on,
// are padding (RFC 7011 §3.3.1; Wireshark shows them as padding whatever their value),
// and an empty set (length 4) carries nothing: neither is an error. Template fields of
// length 0 are skipped; a template is refused when its records would be 0 bytes long
// (they could not be told from padding), when its ID is reserved, or when an options
// template's scope is not a multiple of 4 bytes (v9) or not 1 to the field count (IPFIX).
// Variable-length fields (RFC 7011 §7) are read in NetFlow v9 templates too (H3C
// NetStream sends them).
//
// Sessions. The session table is bounded (max-exporters). When it is full, a newcomer
// takes the place of the least recently active session if it has been idle for
// session-idle-timeout, else of the least recently active session not established yet (an
// established one sent two datagrams, one with a valid template or a flow): spoofed
// sources, which send one datagram or nothing valid, cannot lock a real exporter out.
// Evictions are counted by reason (flowzero_netflow_exporter_sessions_evicted_total);
// datagrams that find no room are dropped and counted. Spoofed sources that send valid
// datagrams cannot be told from exporters: the allow-list (collector.exporters.allow) is
// the defence. Session activity is the receive time of the datagrams.
//
// ExporterDetails describes, for the collector's /api/v0/exporters, every session of an
// exporter address: its templates (field list as received, when last received and used), the
// sampling rates learned per observation domain and sampler ID, and the pending data sets. It
// takes the sessions' locks one at a time and is not meant for a hot path. When the session
// limit evicts an idle session, the Prometheus series of its address go with it (unless
// another session of the address remains), so that spoofed sources cannot grow them forever.
//
// # Shared state
//
// Several decoders in different processes can decode one exporter's datagrams (mode: outlet
// spreads them over Kafka partitions): an Observer (SetObserver) hears of every template,
// options template, withdrawal, sampling rate and system init time a datagram brings or
// changes, to publish it, and ApplyState installs what another decoder published, through the
// same parser as a received template set, decoding the pending data sets it was missing.
// With an observer, a definition from an older datagram never replaces a newer one, so the
// decoders agree whatever order they see the datagrams in. DecodeTagged hands each flow to the
// caller with the tag of its datagram, also when it comes out of the pending buffer later, and
// the observer hears when a datagram's data set is held and released: a caller that commits
// what it consumed (the outlet's Kafka offsets) waits for them.
//
// # Templates file
//
// With templates-file set, templates and learned sampling rates are saved as JSON:
//
//	{"format": "flowzero-netflow-templates/1", "saved": "<RFC 3339 time>",
//	 "sessions": [{"exporter": "192.0.2.1:2055",
//	               "templates": [{"version": 9, "domain": 0, "options": false,
//	                              "record": "<hex of the template record as received>"}],
//	               "samplers": [{"version": 9, "domain": 0, "sampler": 1, "rate": 1000}]}]}
//
// A template record is stored exactly as it came off the wire (for IPFIX, with its
// enterprise numbers) and is loaded back through the same parser as a received template
// set. The file is replaced atomically (written aside, then renamed).
package netflow
