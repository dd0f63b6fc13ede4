package netflow

import (
	"bytes"
	"encoding/binary"
	"time"

	"flowzero/decoder/packet"
	"flowzero/schema"
)

// step is one field as the record decoder walks it.
type step struct {
	off    uint32 // offset in a fixed-length record
	length uint16 // 0xFFFF: variable length
	act    action
	col    schema.ColumnKey
}

// templateKey identifies a template inside one exporter session (the session itself is the
// exporter address and source port): RFC 7011 §8.4 scopes template IDs to the transport
// session and observation domain. The version is part of the key so that a NetFlow v9 and
// an IPFIX process sharing a socket do not overwrite each other.
type templateKey struct {
	version uint16
	id      uint16
	domain  uint32
}

// field is one compiled template field.
type field struct {
	length uint16 // 0xFFFF: variable length (RFC 7011 §7)
	act    action // forward direction
	ract   action // reverse direction of a biflow (RFC 5103)
	col    schema.ColumnKey
	rcol   schema.ColumnKey
}

// template is a compiled (options) template.
type template struct {
	fields []field
	// minRecord is the smallest record (variable fields count 1 byte): fewer bytes left in
	// a set are padding (RFC 7011 §3.3.1).
	minRecord int
	options   bool
	// biflow is set when the template has reverse elements (RFC 5103, NSEL responder
	// counters); reverseCounter is the action of the counter that decides whether a
	// reverse flow is emitted (not when it is 0), actSkip when there is none.
	biflow         bool
	reverseCounter action
	// tunnel is set when the template repeats header elements (an outer and an inner
	// header) and decapsulation is configured: see resolveRepeats.
	tunnel bool
	// fixedLen is the record length when no field has a variable length, else -1.
	fixedLen int
	// fwd and rev are the steps of the record decoder in each direction: for fixed-length
	// records only the fields that do something, with their offsets; otherwise every field.
	fwd, rev []step
	// wire is the template record as received (version-specific format), compared on
	// refresh and saved by the persistence file.
	wire []byte
	// received and used are the unix seconds at which the template record was last
	// received and a data set last decoded with it (for ExporterDetails; 0: never).
	received, used int64
	// learned is the receive time, in unix ns, of the datagram that brought this definition
	// (0 when loaded from the templates file): with an observer, a different definition
	// from an older datagram does not replace it (see SetObserver).
	learned int64
}

const variableLength = 0xFFFF

// fieldSpec is one field specifier of a template record.
type fieldSpec struct {
	ie     uint16 // without the enterprise bit
	length uint16
	pen    uint32 // 0: IANA
}

// compileTemplate builds a template from its wire record. fields is the field specifiers
// part: for NetFlow v9 (RFC 3954 §5.2/§6.1) pairs of type/length; for IPFIX (RFC 7011
// §3.4.1/§3.4.2) type/length with the enterprise bit followed by a 4-byte PEN. scopeFields
// is the number of scope fields at the start (options templates), which are skipped.
func (d *Decoder) compileTemplate(version uint16, fieldSpecs []byte, count int, scopeFields int, options bool, wire []byte) (*template, reason, bool) {
	if count > d.cfg.MaxFieldsPerTemplate {
		return nil, reasonTooManyFields, false
	}
	specs := make([]fieldSpec, count)
	p := fieldSpecs
	for i := range specs {
		if len(p) < 4 {
			return nil, reasonBadTemplate, false
		}
		sp := &specs[i]
		sp.ie, sp.length = binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:])
		p = p[4:]
		if version == 10 && sp.ie&0x8000 != 0 {
			if len(p) < 4 {
				return nil, reasonBadTemplate, false
			}
			sp.ie &= 0x7fff
			sp.pen = binary.BigEndian.Uint32(p)
			p = p[4:]
		}
	}
	t := &template{options: options, fields: make([]field, count)}
	// reverse marks the fields that belong to the reverse direction only: RFC 5103 reverse
	// elements, and the responder counters of Cisco's NSEL (IEs 232, 299).
	reverse := make([]bool, count)
	for i, sp := range specs {
		// A variable-length field (0xFFFF) is read as RFC 7011 §7 says in NetFlow v9 too:
		// H3C NetStream sends them, and Wireshark decodes them so.
		f := &t.fields[i]
		f.length = sp.length
		if sp.length == variableLength {
			t.minRecord++
		} else {
			t.minRecord += int(sp.length)
		}
		// A field of no bytes carries nothing: it is skipped (softflowd-era v9 exporters
		// send type-0/length-0 entries, some IPFIX exporters IEs 150/151 of length 0, and
		// v9 exporters the System scope with length 0).
		if i < scopeFields || sp.length == 0 {
			continue
		}
		switch sp.pen {
		case 0:
			s := d.specFor(ianaSpecs[sp.ie])
			if sp.ie == ieResponderOctets || sp.ie == ieResponderPackets {
				f.ract, f.rcol = s.act, s.col
				reverse[i] = true
				break
			}
			f.act, f.col = s.act, s.col
			r := d.specFor(reverseSpec(ianaSpecs[sp.ie]))
			f.ract, f.rcol = r.act, r.col
		case penReverse:
			// Reverse element: ignored in the forward direction, used as is in the
			// reverse one, where it replaces the forward element of the same type.
			s := d.specFor(ianaSpecs[sp.ie])
			f.ract, f.rcol = s.act, s.col
			reverse[i] = true
		case penJuniper:
			if sp.ie == 137 {
				f.act, f.ract = actJuniperCPID, actJuniperCPID
			}
		}
		if options && !f.act.optionsAction() {
			f.act, f.ract = actSkip, actSkip
		}
	}
	if t.minRecord == 0 {
		// No fields: records of 0 bytes could not be told from padding.
		return nil, reasonBadTemplate, false
	}
	for i := range reverse {
		if reverse[i] {
			t.biflow = true
			break
		}
	}
	if t.biflow {
		// In the reverse direction, a forward element whose reverse element is in the
		// template is not used.
		for i, sp := range specs {
			if reverse[i] || sp.pen != 0 {
				continue
			}
			for j, rp := range specs {
				if reverse[j] && rp.pen == penReverse && rp.ie == sp.ie {
					t.fields[i].ract = actSkip
				}
			}
		}
	}
	t.tunnel = d.resolveRepeats(t, specs)
	// Counters, in each direction: a total counter (octetTotalCount, packetTotalCount: IEs
	// 85, 86) counts only when the template has no delta counter of its kind.
	for _, dir := range []bool{false, true} {
		var delta [2]bool // bytes, packets
		for i, sp := range specs {
			if k := counterKind(t.fields[i].actIn(dir)); k >= 0 && sp.ie != ieOctetTotal && sp.ie != iePacketTotal {
				delta[k] = true
			}
		}
		for i, sp := range specs {
			f := &t.fields[i]
			if k := counterKind(f.actIn(dir)); k >= 0 && delta[k] && (sp.ie == ieOctetTotal || sp.ie == iePacketTotal) {
				f.setActIn(dir, actSkip)
			}
		}
	}
	// A reverse flow is emitted when its packet counter, or without one its byte counter,
	// is not zero.
	for _, f := range t.fields {
		switch {
		case f.ract == actPackets:
			t.reverseCounter = actPackets
		case f.ract == actBytes && t.reverseCounter == actSkip:
			t.reverseCounter = actBytes
		}
	}
	t.fixedLen = 0
	for _, f := range t.fields {
		if f.length == variableLength {
			t.fixedLen = -1
			break
		}
	}
	off := 0
	for _, f := range t.fields {
		if t.fixedLen < 0 || f.act != actSkip {
			t.fwd = append(t.fwd, step{off: uint32(off), length: f.length, act: f.act, col: f.col})
		}
		if t.biflow && (t.fixedLen < 0 || f.ract != actSkip) {
			t.rev = append(t.rev, step{off: uint32(off), length: f.length, act: f.ract, col: f.rcol})
		}
		off += int(f.length)
	}
	if t.fixedLen == 0 {
		t.fixedLen = off
	}
	t.wire = append([]byte(nil), wire...)
	return t, 0, true
}

// resolveRepeats applies the rule for the IANA information elements (and their RFC 5103
// reverse) that a template holds more than once: Cisco's SRv6 templates carry the outer IPv6 header's addresses, ports and protocol,
// then the inner packet's. Each is read once, at its first occurrence (the outer header),
// like every column. With decapsulation configured, a template that repeats header
// elements describes a tunnel, and the flow is the inner packet, as for a decapsulated
// data-link frame: the last occurrence of each element is read, the addresses are the last
// ones that are not zero, and the outer header's (the first ones) go to TunnelSrcAddr,
// TunnelDstAddr, its protocol to TunnelProto. It reports whether the template is a tunnel's.
func (d *Decoder) resolveRepeats(t *template, specs []fieldSpec) bool {
	type key struct {
		ie  uint16
		pen uint32
	}
	first := make(map[key]int, len(specs))
	last := make(map[key]int, len(specs))
	repeats, header := false, false
	for i, sp := range specs {
		if sp.pen != 0 && sp.pen != penReverse {
			continue // a vendor's elements are its own (Juniper repeats commonPropertiesId, one property each)
		}
		k := key{sp.ie, sp.pen}
		if _, ok := first[k]; ok {
			repeats = true
			header = header || (sp.pen == 0 && headerElement(sp.ie))
		} else {
			first[k] = i
		}
		last[k] = i
	}
	if !repeats {
		return false
	}
	tunnel := header && d.cfg.Packet.Decapsulation != packet.DecapNone
	for i, sp := range specs {
		k := key{sp.ie, sp.pen}
		if _, ok := first[k]; !ok {
			continue // a vendor's element
		}
		f := &t.fields[i]
		if !tunnel {
			if first[k] != i {
				f.act, f.ract = actSkip, actSkip
			}
			continue
		}
		for _, dir := range []bool{false, true} {
			switch a := f.actIn(dir); {
			case a == actSrcAddr:
				f.setActIn(dir, actSrcAddrTun)
			case a == actDstAddr:
				f.setActIn(dir, actDstAddrTun)
			case a == actProto && first[k] == i && last[k] != i:
				f.setActIn(dir, actTunnelProto)
				if dir {
					f.rcol = schema.ColumnTunnelProto
				} else {
					f.col = schema.ColumnTunnelProto
				}
			case last[k] != i:
				f.setActIn(dir, actSkip)
			}
		}
	}
	return tunnel
}

// headerElement tells if an IANA element describes a packet's IP or transport header, whose
// repetition in a template means an outer and an inner header.
func headerElement(ie uint16) bool {
	switch ie {
	case 4, 7, 8, 11, 12, 27, 28: // protocol, ports, IPv4 and IPv6 addresses
		return true
	}
	return false
}

// actIn returns the field's action in one direction.
func (f *field) actIn(reverse bool) action {
	if reverse {
		return f.ract
	}
	return f.act
}

// setActIn sets the field's action in one direction.
func (f *field) setActIn(reverse bool, a action) {
	if reverse {
		f.ract = a
	} else {
		f.act = a
	}
}

// counterKind tells what an action counts: 0 bytes, 1 packets, -1 neither.
func counterKind(a action) int {
	switch a {
	case actBytes:
		return 0
	case actPackets:
		return 1
	}
	return -1
}

// specFor turns a spec into actSkip when its column is disabled and nothing else needs it.
func (d *Decoder) specFor(s spec) spec {
	if s.act == actSkip || s.act.alwaysNeeded() {
		return s
	}
	if s.col != 0 && !d.schema.Enabled(s.col) {
		return spec{}
	}
	return s
}

// storeTemplate adds or replaces a template; it returns false (and counts) when the
// session is full. A refresh with identical bytes changes nothing.
func (d *Decoder) storeTemplate(e *exporter, key templateKey, version uint16, fieldSpecs []byte, count, scopeFields int, options bool, wire []byte, received, learned int64, applying bool) bool {
	e.templatesStored++
	old := e.templates[key]
	if old != nil && old.options == options && bytes.Equal(old.wire, wire) {
		old.received = max(old.received, received)
		old.learned = max(old.learned, learned)
		return true
	}
	if old != nil && d.observer != nil && learned < old.learned {
		// Several decoders share this state (mode: outlet): the definition from the most
		// recent datagram wins everywhere, whatever order they decode in.
		e.m.errors[reasonStaleTemplate].Inc()
		return true
	}
	if old == nil && len(e.templates) >= d.cfg.MaxTemplatesPerExporter {
		e.m.errors[reasonTooManyTemplates].Inc()
		return false
	}
	t, r, ok := d.compileTemplate(version, fieldSpecs, count, scopeFields, options, wire)
	if !ok {
		e.m.errors[r].Inc()
		return false
	}
	t.received, t.learned = received, learned
	e.templates[key] = t
	e.dirty = true
	if d.observer != nil && !applying {
		kind := StateTemplate
		if options {
			kind = StateOptionsTemplate
		}
		e.reports = append(e.reports, StateRecord{Kind: kind, Exporter: e.addr, Version: version, Domain: key.domain,
			ID: uint64(key.id), Received: time.Unix(0, learned), Record: wire})
	}
	if options {
		e.m.templates[tplOptions].Inc()
	} else {
		e.m.templates[tplData].Inc()
	}
	e.newTemplates = append(e.newTemplates, key)
	return true
}

// withdrawTemplate removes one template, or all templates of a domain (and set kind) when
// id is the set ID (RFC 7011 §8.1).
func (d *Decoder) withdrawTemplate(e *exporter, key templateKey, all bool, options bool, learned int64, applying bool) {
	report := func(k templateKey, options bool) {
		if d.observer == nil || applying {
			return
		}
		kind := StateTemplate
		if options {
			kind = StateOptionsTemplate
		}
		e.reports = append(e.reports, StateRecord{Kind: kind, Exporter: e.addr, Version: k.version, Domain: k.domain,
			ID: uint64(k.id), Received: time.Unix(0, learned), Withdrawn: true})
	}
	if all {
		for k, t := range e.templates {
			if k.version == key.version && k.domain == key.domain && t.options == options {
				delete(e.templates, k)
				report(k, options)
			}
		}
	} else if t := e.templates[key]; t != nil {
		delete(e.templates, key)
		report(key, t.options)
	}
	e.dirty = true
	e.m.templates[tplWithdrawn].Inc()
}
