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
// options record of the domain without sampler ID, and from the configuration (per-exporter
// default, or override which always wins). A flow for which nothing gives a rate carries 0,
// except NetFlow v5, whose header says when the export is not sampled (rate 1).
//
// RFC 5103 biflows (reverse elements, PEN 29305) give two flows: the forward one, then, when
// the reverse packet counter is not zero, the reverse one with sources and destinations
// swapped and the reverse elements in place of their forward counterparts.
//
// RFC 7133 data-link sections (IE 315) are decoded by flowzero/decoder/packet, with the
// decapsulation the configuration selects; the L3 length of the sampled packet becomes the
// byte count of a one-packet flow.
//
// Self-inconsistent input is refused and counted (flowzero_netflow_errors_total, by exporter
// and reason): a set shorter than its header or longer than the datagram, a set without
// records, a template without fields or whose records would be 0 bytes long, a non-scope
// field of length 0 (scope fields are exempt: NetFlow v9 exporters send the System scope with
// length 0), a variable-length field in NetFlow v9 or longer than its record, an options
// template whose scope is not a multiple of 4 bytes (v9) or not 1 to the field count (IPFIX).
// The complete records before a cut are still decoded.
//
// ExporterDetails describes, for the collector's /api/v0/exporters, every session of an
// exporter address: its templates (field list as received, when last received and used), the
// sampling rates learned per observation domain and sampler ID, and the pending data sets. It
// takes the sessions' locks one at a time and is not meant for a hot path. When the session
// limit evicts an idle session, the Prometheus series of its address go with it (unless
// another session of the address remains), so that spoofed sources cannot grow them forever.
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
