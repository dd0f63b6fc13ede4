package netflow

import (
	"encoding/binary"
)

// Set IDs (RFC 3954 §5.2-5.3, RFC 7011 §3.3.2).
const (
	v9TemplateSetID        = 0
	v9OptionsTemplateSetID = 1
	ipfixTemplateSetID     = 2
	ipfixOptionsSetID      = 3
	minDataSetID           = 256
)

// decodeV9IPFIX decodes a NetFlow v9 (RFC 3954 §5.1) or IPFIX (RFC 7011 §3.1) datagram:
// a header, then sets walked in order, so that templates apply to the data sets after them
// and pending data sets are decoded as soon as their template is read.
func (c *decodeContext) decodeV9IPFIX(data []byte) error {
	c.version = binary.BigEndian.Uint16(data)
	var hdrLen int
	if c.version == 9 {
		// version, count, sysUptime, unix secs, sequence, source ID
		hdrLen = 20
		if len(data) < hdrLen {
			return c.e.fail(reasonTruncatedHeader)
		}
		c.sysUptime = binary.BigEndian.Uint32(data[4:])
		c.exportSec = binary.BigEndian.Uint32(data[8:])
		c.domain = binary.BigEndian.Uint32(data[16:])
	} else {
		// version, length, export time, sequence, observation domain
		hdrLen = 16
		if len(data) < hdrLen {
			return c.e.fail(reasonTruncatedHeader)
		}
		length := int(binary.BigEndian.Uint16(data[2:]))
		if length < hdrLen || length > len(data) {
			return c.e.fail(reasonBadLength)
		}
		data = data[:length]
		c.exportSec = binary.BigEndian.Uint32(data[4:])
		c.domain = binary.BigEndian.Uint32(data[12:])
	}
	p := data[hdrLen:]
	// RFC 3954 §5, RFC 7011 §3.3: the sets follow one another up to the end of the message.
	// A length that breaks this chain moves every boundary after the header, so that no set
	// of the message can be trusted: nothing of it is decoded, not even its templates.
	if !setsChain(c.version, p) {
		return c.e.fail(reasonBadSet)
	}
	var firstErr error
	c.inDatagram = true
	for len(p) >= 4 {
		id := binary.BigEndian.Uint16(p)
		length := int(binary.BigEndian.Uint16(p[2:]))
		if length < 4 {
			break // NetFlow v9 zero padding, see setsChain
		}
		body := p[4:length]
		p = p[length:]
		if len(body) == 0 {
			// A set should hold a record (RFC 7011 §3.3.1, RFC 3954 §5.3); an empty one
			// carries nothing and loses nothing.
			continue
		}
		var err error
		switch {
		case id >= minDataSetID:
			err = c.dataSet(id, body)
		case c.version == 9 && id == v9TemplateSetID, c.version == 10 && id == ipfixTemplateSetID:
			err = c.templateSet(id, body, false)
		case c.version == 9 && id == v9OptionsTemplateSetID, c.version == 10 && id == ipfixOptionsSetID:
			err = c.templateSet(id, body, true)
		default:
			// Reserved set IDs are skipped (RFC 7011 §3.3.2).
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	// The data sets its templates released, now that its options data are known as well: a
	// datagram bringing templates and the sampling rate releases the data held before it
	// with that rate.
	c.inDatagram = false
	if c.replayDue {
		c.replayDue = false
		if len(c.e.pending) > 0 {
			c.replayPending()
		}
	}
	return firstErr
}

// setsChain reports whether the set headers of p chain exactly to its end; a NetFlow v9
// datagram may end with zero bytes (some exporters pad it).
func setsChain(version uint16, p []byte) bool {
	for len(p) > 0 {
		if len(p) < 4 {
			return version == 9 && allZero(p)
		}
		length := int(binary.BigEndian.Uint16(p[2:]))
		if length < 4 || length > len(p) {
			return version == 9 && allZero(p)
		}
		p = p[length:]
	}
	return true
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// specifiersLength returns the byte length of count field specifiers at the start of p.
func specifiersLength(version uint16, p []byte, count int) (int, bool) {
	if version == 9 {
		n := count * 4
		return n, n <= len(p)
	}
	n := 0
	for i := 0; i < count; i++ {
		if n+4 > len(p) {
			return 0, false
		}
		if p[n]&0x80 != 0 {
			n += 8
		} else {
			n += 4
		}
	}
	return n, n <= len(p)
}

// templateSet reads the template records of a (options) template set: NetFlow v9 RFC 3954
// §5.2 and §6.1, IPFIX RFC 7011 §3.4.1 and §3.4.2, with IPFIX withdrawals (§8.1). The
// records are framed first: when one does not parse, the framing of the others (their
// field counts) is in doubt too, and none is installed.
func (c *decodeContext) templateSet(setID uint16, body []byte, options bool) error {
	e := c.e
	e.newTemplates = e.newTemplates[:0]
	if !c.templateRecords(setID, body, options, false) {
		return e.fail(reasonBadTemplate)
	}
	var err error
	if !c.templateRecords(setID, body, options, true) {
		err = ErrBadTemplate // refused templates, counted by reason
	}
	if len(e.newTemplates) > 0 && len(e.pending) > 0 && c.fm != nil {
		if c.inDatagram {
			c.replayDue = true
		} else {
			c.replayPending()
		}
	}
	return err
}

// templateRecords walks the template records of a set body. Without store, it reports
// whether they all parse; with store, it installs them and reports whether none was refused
// (no field to frame records, a bound). What follows the last record is padding (RFC 7011
// §3.3.1, RFC 3954 §5.3).
func (c *decodeContext) templateRecords(setID uint16, body []byte, options, store bool) bool {
	e := c.e
	ok := true
	for len(body) >= 4 && !allZero(body) {
		id := binary.BigEndian.Uint16(body)
		var count, scope, hdr int
		switch {
		case !options:
			count, hdr = int(binary.BigEndian.Uint16(body[2:])), 4
		case c.version == 9:
			// template ID, option scope length, option length (in bytes)
			if len(body) < 6 {
				return false
			}
			scopeLen, optLen := int(binary.BigEndian.Uint16(body[2:])), int(binary.BigEndian.Uint16(body[4:]))
			if scopeLen%4 != 0 || optLen%4 != 0 {
				return false
			}
			scope, count, hdr = scopeLen/4, (scopeLen+optLen)/4, 6
		default:
			// template ID, field count, scope field count
			count, hdr = int(binary.BigEndian.Uint16(body[2:])), 4
			if count > 0 {
				if len(body) < 6 {
					return false
				}
				scope, hdr = int(binary.BigEndian.Uint16(body[4:])), 6
			}
		}
		key := templateKey{version: c.version, id: id, domain: c.domain}
		if c.version == 10 && count == 0 {
			// Withdrawal; the set ID as template ID withdraws all of that kind.
			if store {
				c.d.withdrawTemplate(e, key, id == setID, options, c.recv.UnixNano(), c.applying)
			}
			body = body[4:]
			continue
		}
		n, framed := specifiersLength(c.version, body[hdr:], count)
		// A reserved template ID or an IPFIX scope count outside the fields does not come
		// from an exporter: most likely, a field count before it was wrong, and this
		// record header is a field specifier.
		if !framed || id < minDataSetID || (c.version == 10 && options && (scope == 0 || scope > count)) {
			return false
		}
		if store && !c.d.storeTemplate(e, key, c.version, body[hdr:hdr+n], count, scope, options, body[:hdr+n], int64(c.recvSec), learnedAt(c.recv), c.applying) {
			ok = false
		}
		body = body[hdr+n:]
	}
	return ok
}

// dataSet decodes a data set, or keeps it until its template arrives.
func (c *decodeContext) dataSet(id uint16, body []byte) error {
	key := templateKey{version: c.version, id: id, domain: c.domain}
	t := c.e.templates[key]
	if t == nil {
		return c.keepPending(key, body)
	}
	return c.decodeDataSet(t, body)
}

// decodeDataSet decodes every record of a data set. The records are framed first, so that a
// set whose records do not fill it emits nothing (its template is not the one the exporter
// used, or the set is corrupt).
func (c *decodeContext) decodeDataSet(t *template, body []byte) error {
	if now := int64(c.recvSec); now > t.used {
		t.used = now // replayed pending sets carry their own, older, time
	}
	n, ok := t.recordsLength(body)
	if !ok {
		return c.e.fail(reasonTruncatedRecord)
	}
	body = body[:n]
	for len(body) > 0 {
		var n int
		var r reason
		if t.options {
			n, r = c.optionsRecord(t, body)
		} else {
			n, r = c.dataRecord(t, body)
		}
		if r != 0 {
			return c.e.fail(r)
		}
		if n == 0 {
			break
		}
		body = body[n:]
	}
	return nil
}

// recordsLength returns the length of the records at the start of a data set's body; the
// bytes after them are padding (RFC 7011 §3.3.1): fewer than the shortest record, or zeros
// from a record boundary on (an all-zero record would be a flow of nothing). Wireshark shows
// both as padding, whatever their value. ok is false when a variable-length record runs
// past the set.
func (t *template) recordsLength(body []byte) (n int, ok bool) {
	if t.fixedLen > 0 {
		n = len(body) / t.fixedLen * t.fixedLen
		for n > 0 && allZero(body[n-t.fixedLen:n]) {
			n -= t.fixedLen
		}
		return n, true
	}
	for n < len(body) {
		rest := body[n:]
		if len(rest) < t.minRecord || allZero(rest) {
			break
		}
		off := 0
		for i := range t.fields {
			if _, off, ok = fieldAt(rest, off, int(t.fields[i].length)); !ok {
				return 0, false
			}
		}
		n += off
	}
	return n, true
}
