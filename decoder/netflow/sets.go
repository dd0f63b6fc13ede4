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
	var firstErr error
	keep := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	p := data[hdrLen:]
	for len(p) > 0 {
		if len(p) < 4 {
			if c.version == 9 && allZero(p) {
				break // some v9 exporters pad the datagram
			}
			keep(c.e.fail(reasonBadSet))
			break
		}
		id := binary.BigEndian.Uint16(p)
		length := int(binary.BigEndian.Uint16(p[2:]))
		if length < 4 || length > len(p) {
			if c.version == 9 && id == 0 && length == 0 && allZero(p) {
				break
			}
			if length > len(p) && id >= minDataSetID {
				// A cut datagram: decode the complete records it still has.
				_ = c.dataSet(id, p[4:])
			}
			keep(c.e.fail(reasonBadSet))
			break
		}
		body := p[4:length]
		p = p[length:]
		if len(body) == 0 {
			// A set has at least one record (RFC 7011 §3.3.1, RFC 3954 §5.3).
			keep(c.e.fail(reasonBadSet))
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
		if err != nil {
			keep(err)
		}
	}
	return firstErr
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
// §5.2 and §6.1, IPFIX RFC 7011 §3.4.1 and §3.4.2, with IPFIX withdrawals (§8.1).
func (c *decodeContext) templateSet(setID uint16, body []byte, options bool) error {
	e := c.e
	e.newTemplates = e.newTemplates[:0]
	var err error
	for len(body) >= 4 {
		if allZero(body) {
			break // padding longer than the usual alignment
		}
		id := binary.BigEndian.Uint16(body)
		var count, scope, hdr int
		switch {
		case !options:
			count, hdr = int(binary.BigEndian.Uint16(body[2:])), 4
		case c.version == 9:
			// template ID, option scope length, option length (in bytes)
			if len(body) < 6 {
				err = e.fail(reasonBadTemplate)
				body = nil
				continue
			}
			scopeLen, optLen := int(binary.BigEndian.Uint16(body[2:])), int(binary.BigEndian.Uint16(body[4:]))
			if scopeLen%4 != 0 || optLen%4 != 0 {
				err = e.fail(reasonBadTemplate)
				body = nil
				continue
			}
			scope, count, hdr = scopeLen/4, (scopeLen+optLen)/4, 6
		default:
			// template ID, field count, scope field count
			count, hdr = int(binary.BigEndian.Uint16(body[2:])), 4
			if count > 0 {
				if len(body) < 6 {
					err = e.fail(reasonBadTemplate)
					body = nil
					continue
				}
				scope, hdr = int(binary.BigEndian.Uint16(body[4:])), 6
				if scope == 0 || scope > count {
					err = e.fail(reasonBadTemplate)
					body = nil
					continue
				}
			}
		}
		key := templateKey{version: c.version, id: id, domain: c.domain}
		if c.version == 10 && count == 0 {
			// Withdrawal; the set ID as template ID withdraws all of that kind.
			c.d.withdrawTemplate(e, key, id == setID, options)
			body = body[4:]
			continue
		}
		if id < minDataSetID {
			err = e.fail(reasonBadTemplate)
			break
		}
		n, ok := specifiersLength(c.version, body[hdr:], count)
		if !ok {
			err = e.fail(reasonBadTemplate)
			break
		}
		wire := body[:hdr+n]
		if !c.d.storeTemplate(e, key, c.version, body[hdr:hdr+n], count, scope, options, wire, int64(c.recvSec)) && err == nil {
			err = ErrBadTemplate
		}
		body = body[hdr+n:]
	}
	// What is left is padding (RFC 7011 §3.3.1, RFC 3954 §5.3).
	if len(e.newTemplates) > 0 && len(e.pending) > 0 && c.fm != nil {
		c.replayPending()
	}
	return err
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

// decodeDataSet decodes every record of a data set; trailing bytes shorter than the
// smallest record are padding.
func (c *decodeContext) decodeDataSet(t *template, body []byte) error {
	if now := int64(c.recvSec); now > t.used {
		t.used = now // replayed pending sets carry their own, older, time
	}
	for len(body) > 0 && len(body) >= t.minRecord {
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
			break // options templates with only zero-length fields
		}
		body = body[n:]
	}
	// Padding is shorter than a record and should be zero (RFC 7011 §3.3.1); anything
	// else is a record cut short.
	if len(body) >= 4 && !allZero(body) {
		return c.e.fail(reasonTruncatedRecord)
	}
	return nil
}
