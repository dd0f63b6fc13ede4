package collector

import "encoding/binary"

// flowCounter counts the flows of an exporter's datagrams from their headers and the
// templates they carry, without decoding the records: what an inlet, which decodes nothing,
// rate-limits by. It is one exporter's (address and port), used by one worker.
//
// NetFlow v5 gives its flow count in the header. NetFlow v9 (RFC 3954 §5) and IPFIX (RFC 7011
// §3) data sets hold records of the length their template gives, so the counter keeps the
// record length of every template it sees; a data set of a template not seen yet counts
// nothing (its flows are held by the outlets until the template comes, and may never be
// decoded), and one of a template with variable-length fields counts one record (its length
// is not known without decoding). Options data records are not flows. sFlow v5 flows are its
// flow samples (sFlow v5 §5, formats 1 and 3).
type flowCounter struct {
	templates map[templateKey]template
}

type templateKey struct {
	domain uint32
	id     uint16
}

type template struct {
	length  uint16 // data record length; 0 for variable length
	options bool
}

// maxTemplates bounds the templates kept per exporter: beyond, new ones are not learned.
const maxTemplates = 4096

// count returns the flows a datagram holds and whether it defines templates (such a datagram
// is never refused: the data of other datagrams need it). Malformed parts count nothing: the
// outlets' decoders report them.
func (c *flowCounter) count(p []byte) (flows int, templates bool) {
	if len(p) < 4 {
		return 0, false
	}
	if binary.BigEndian.Uint32(p) == 5 {
		return countSFlow(p), false
	}
	switch binary.BigEndian.Uint16(p) {
	case 5:
		if len(p) < 24 {
			return 0, false
		}
		// At most the records the datagram has room for (48 bytes each).
		return min(int(binary.BigEndian.Uint16(p[2:])), (len(p)-24)/48), false
	case 9:
		if len(p) < 20 {
			return 0, false
		}
		return c.countSets(p[20:], binary.BigEndian.Uint32(p[16:]), false)
	case 10:
		if len(p) < 16 {
			return 0, false
		}
		if l := int(binary.BigEndian.Uint16(p[2:])); l >= 16 && l < len(p) {
			p = p[:l]
		}
		return c.countSets(p[16:], binary.BigEndian.Uint32(p[12:]), true)
	}
	return 0, false
}

// countSets walks the sets (v9 flowsets) of a NetFlow v9 or IPFIX datagram: set ID 0 and 1
// (v9) or 2 and 3 (IPFIX) define templates and options templates, 256 and above are data.
func (c *flowCounter) countSets(p []byte, domain uint32, ipfix bool) (flows int, templates bool) {
	tmpl, opts := uint16(0), uint16(1)
	if ipfix {
		tmpl, opts = 2, 3
	}
	// Templates first: a datagram may carry data sets before the template they need.
	for pass := range 2 {
		for q := p; len(q) >= 4; {
			id, l := binary.BigEndian.Uint16(q), int(binary.BigEndian.Uint16(q[2:]))
			if l < 4 || l > len(q) {
				break
			}
			body := q[4:l]
			q = q[l:]
			switch {
			case pass == 0 && (id == tmpl || id == opts):
				templates = true
				c.learn(body, domain, id == opts, ipfix)
			case pass == 1 && id >= 256:
				t, ok := c.templates[templateKey{domain, id}]
				switch {
				case !ok || t.options:
				case t.length == 0:
					flows++
				default:
					flows += len(body) / int(t.length)
				}
			}
		}
	}
	return flows, templates
}

// learn records the data record length of each template of a template or options template
// set.
func (c *flowCounter) learn(p []byte, domain uint32, options, ipfix bool) {
	for len(p) >= 4 {
		id, fields := binary.BigEndian.Uint16(p), int(binary.BigEndian.Uint16(p[2:]))
		p = p[4:]
		if id < 256 {
			return // padding, or malformed
		}
		if options {
			if ipfix {
				// RFC 7011 §3.4.2.2: the scope field count follows the field count.
				if len(p) < 2 {
					return
				}
				p = p[2:]
			} else {
				// RFC 3954 §6.1: scope and option lengths in bytes, 4 per field.
				if len(p) < 2 {
					return
				}
				fields = (fields + int(binary.BigEndian.Uint16(p))) / 4
				p = p[2:]
			}
		}
		length, variable := 0, false
		for range fields {
			if len(p) < 4 {
				return
			}
			typ, fl := binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:])
			p = p[4:]
			if ipfix && typ&0x8000 != 0 {
				if len(p) < 4 {
					return
				}
				p = p[4:] // enterprise number
			}
			if fl == 0xffff {
				variable = true
			}
			length += int(fl)
		}
		t := template{options: options}
		if !variable && length > 0 && length <= 0xffff {
			t.length = uint16(length)
		}
		if fields == 0 {
			delete(c.templates, templateKey{domain, id}) // IPFIX withdrawal
			continue
		}
		if c.templates == nil {
			c.templates = make(map[templateKey]template)
		}
		if _, ok := c.templates[templateKey{domain, id}]; ok || len(c.templates) < maxTemplates {
			c.templates[templateKey{domain, id}] = t
		}
	}
}

// countSFlow counts the flow samples of an sFlow v5 datagram.
func countSFlow(p []byte) int {
	if len(p) < 8 {
		return 0
	}
	switch binary.BigEndian.Uint32(p[4:]) { // agent address type
	case 1:
		if len(p) < 12 {
			return 0
		}
		p = p[12:]
	case 2:
		if len(p) < 24 {
			return 0
		}
		p = p[24:]
	default:
		return 0
	}
	if len(p) < 16 {
		return 0
	}
	n := int(binary.BigEndian.Uint32(p[12:]))
	p = p[16:]
	flows := 0
	for range n {
		if len(p) < 8 {
			break
		}
		format, l := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		if uint64(l) > uint64(len(p)-8) {
			break
		}
		if format == 1 || format == 3 { // enterprise 0: flow sample, expanded flow sample
			flows++
		}
		p = p[8+l:]
	}
	return flows
}
