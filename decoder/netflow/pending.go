package netflow

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// pendingSet is a data set received before its template, kept (copied) until the template
// arrives. Exporters send templates only every few minutes or packets, so without this the
// first data after a collector restart or a template change is lost.
type pendingSet struct {
	key       templateKey
	tag       uint64 // the datagram's Packet.Tag
	exportSec uint32
	sysUptime uint32
	recv      time.Time
	data      []byte
}

// keepPending stores a data set whose template is unknown, within the session's bounds.
func (c *decodeContext) keepPending(key templateKey, body []byte) error {
	e, cfg := c.e, &c.d.cfg
	if len(e.pending) >= cfg.PendingSets || e.pendingBytes+len(body) > cfg.PendingBytes {
		c.expirePending()
	}
	if len(e.pending) >= cfg.PendingSets || e.pendingBytes+len(body) > cfg.PendingBytes {
		if cfg.PendingSets == 0 {
			return e.fail(reasonTemplateNotFound)
		}
		return e.fail(reasonPendingFull)
	}
	// Reuse the buffer of a slot freed earlier.
	n := len(e.pending)
	if n < cap(e.pending) {
		e.pending = e.pending[:n+1]
	} else {
		e.pending = append(e.pending, pendingSet{})
	}
	p := &e.pending[n]
	p.key, p.tag, p.exportSec, p.sysUptime, p.recv = key, c.tag, c.exportSec, c.sysUptime, c.recv
	p.data = append(p.data[:0], body...)
	e.pendingBytes += len(body)
	e.m.pending.Inc()
	if o := c.d.observer; o != nil {
		o.PendingHeld(c.tag)
	}
	return nil
}

// replayPending decodes the pending data sets whose template just arrived, in arrival
// order, with the header values of the datagram that carried them.
func (c *decodeContext) replayPending() {
	e := c.e
	saved := *c
	kept := e.pending[:0]
	var free []pendingSet
	for i := range e.pending {
		p := e.pending[i]
		t := e.templates[p.key]
		if t == nil {
			kept = append(kept, p)
			continue
		}
		e.pendingBytes -= len(p.data)
		decoded := false
		if c.d.cfg.PendingMaxAge > 0 && !saved.recv.IsZero() && saved.recv.Sub(p.recv) > c.d.cfg.PendingMaxAge {
			e.m.errors[reasonPendingExpired].Inc()
		} else {
			c.version, c.domain, c.exportSec, c.sysUptime, c.recv = p.key.version, p.key.domain, p.exportSec, p.sysUptime, p.recv
			c.recvSec = uint64(p.recv.Unix())
			c.tag = p.tag
			c.rateCache.valid = false
			_ = c.decodeDataSet(t, p.data) // errors are counted
			decoded = true
		}
		if o := c.d.observer; o != nil {
			o.PendingReleased(p.tag, decoded) // after the set's flows
		}
		free = append(free, p)
	}
	// Keep the freed buffers after the kept entries for reuse.
	n := len(kept)
	e.pending = append(kept, free...)[:n]
	flows := c.flows
	*c = saved
	c.flows = flows
	c.rateCache.valid = false // options data may have been replayed
}

// expirePending drops the pending data sets older than pending-max-age, whose template
// never came, to make room.
func (c *decodeContext) expirePending() {
	e, maxAge := c.e, c.d.cfg.PendingMaxAge
	if maxAge <= 0 || c.recv.IsZero() || c.pendingExpired {
		return
	}
	// Once per datagram is enough: its sets share the receive time, so a second pass would
	// find nothing more, and a datagram of thousands of small sets for unknown templates
	// would otherwise cost a pass each.
	c.pendingExpired = true
	n := 0
	for i := range e.pending {
		if c.recv.Sub(e.pending[i].recv) > maxAge {
			e.pendingBytes -= len(e.pending[i].data)
			e.m.errors[reasonPendingExpired].Inc()
			if o := c.d.observer; o != nil {
				o.PendingReleased(e.pending[i].tag, false)
			}
			continue
		}
		// Swap rather than copy so that the dropped entry's buffer stays for reuse.
		e.pending[n], e.pending[i] = e.pending[i], e.pending[n]
		n++
	}
	e.pending = e.pending[:n]
}

// PendingRoom tells whether decoding pkt now keeps all its data sets: false when some have
// no template yet and its session's pending buffer (pending-sets, pending-bytes, counting
// the sets that pkt's receive time would expire) cannot take them all, so that they would
// be dropped (reason pending-full). A caller that can hold the datagram back until its
// template comes (mode: outlet, from another partition or the state topic) asks first. A
// datagram that carries templates, or that does not parse, gets true: decoding it teaches
// state, or counts its error. PendingRoom changes nothing and allocates nothing.
func (d *Decoder) PendingRoom(pkt Packet) bool {
	sets, size, teaches := d.unknownSets(pkt)
	if teaches || sets == 0 {
		return true
	}
	heldSets, heldSize := d.pendingHeld(pkt)
	return sets+heldSets <= d.cfg.PendingSets && size+heldSize <= d.cfg.PendingBytes
}

// PendingBatch asks PendingRoom of the datagrams of one record together: their data sets
// without a template add up per session, and the record is decoded whole or held back
// whole. The zero value is ready; Reset it before each record. It reuses its memory.
type PendingBatch struct {
	teaches bool
	needs   []pendingNeed
}

type pendingNeed struct {
	pkt        Packet // the session's first datagram in the record
	sets, size int
}

// Reset empties b for the next record.
func (b *PendingBatch) Reset() { b.teaches, b.needs = false, b.needs[:0] }

// PendingAdd adds what decoding pkt would add to its session's pending buffer.
func (d *Decoder) PendingAdd(b *PendingBatch, pkt Packet) {
	sets, size, teaches := d.unknownSets(pkt)
	if teaches {
		b.teaches = true
	}
	if sets == 0 {
		return
	}
	for i := range b.needs {
		if b.needs[i].pkt.Exporter == pkt.Exporter {
			b.needs[i].sets += sets
			b.needs[i].size += size
			return
		}
	}
	b.needs = append(b.needs, pendingNeed{pkt: pkt, sets: sets, size: size})
}

// PendingFits tells whether decoding the datagrams added to b keeps all their data sets, as
// PendingRoom for one; if not, it names the exporter whose buffer cannot take them. The
// exporters in skip (those the caller no longer holds back) are not asked. A record with
// templates gets true: they may be the ones its other datagrams wait for.
func (d *Decoder) PendingFits(b *PendingBatch, skip map[netip.AddrPort]struct{}) (exporter netip.AddrPort, ok bool) {
	if b.teaches {
		return netip.AddrPort{}, true
	}
	for _, n := range b.needs {
		if _, ok := skip[n.pkt.Exporter]; ok {
			continue
		}
		heldSets, heldSize := d.pendingHeld(n.pkt)
		if n.sets+heldSets > d.cfg.PendingSets || n.size+heldSize > d.cfg.PendingBytes {
			return n.pkt.Exporter, false
		}
	}
	return netip.AddrPort{}, true
}

// unknownSets returns the count and bytes of pkt's data sets that have no template yet, and
// whether pkt carries templates or does not parse (decoding it teaches or counts an error).
func (d *Decoder) unknownSets(pkt Packet) (sets, size int, teaches bool) {
	data := pkt.Payload
	if len(data) < 2 {
		return 0, 0, true
	}
	version := binary.BigEndian.Uint16(data)
	var hdrLen int
	var domain uint32
	switch version {
	case 9: // RFC 3954 §5.1
		hdrLen = 20
		if len(data) < hdrLen {
			return 0, 0, true
		}
		domain = binary.BigEndian.Uint32(data[16:])
	case 10: // RFC 7011 §3.1
		hdrLen = 16
		if len(data) < hdrLen {
			return 0, 0, true
		}
		length := int(binary.BigEndian.Uint16(data[2:]))
		if length < hdrLen || length > len(data) {
			return 0, 0, true
		}
		data = data[:length]
		domain = binary.BigEndian.Uint32(data[12:])
	default:
		return 0, 0, true
	}
	p := data[hdrLen:]
	if !setsChain(version, p) {
		return 0, 0, true
	}
	d.mu.RLock()
	e := d.exporters[pkt.Exporter]
	d.mu.RUnlock()
	if e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
	}
	for len(p) >= 4 {
		id := binary.BigEndian.Uint16(p)
		length := int(binary.BigEndian.Uint16(p[2:]))
		if length < 4 {
			break
		}
		body := p[4:length]
		p = p[length:]
		switch {
		case len(body) == 0:
		case id >= minDataSetID:
			if e == nil || e.templates[templateKey{version: version, id: id, domain: domain}] == nil {
				sets++
				size += len(body)
			}
		case version == 9 && (id == v9TemplateSetID || id == v9OptionsTemplateSetID),
			version == 10 && (id == ipfixTemplateSetID || id == ipfixOptionsSetID):
			return 0, 0, true
		}
	}
	return sets, size, false
}

// pendingHeld returns the sets and bytes held for pkt's session that pkt's receive time
// would not expire first.
func (d *Decoder) pendingHeld(pkt Packet) (sets, size int) {
	d.mu.RLock()
	e := d.exporters[pkt.Exporter]
	d.mu.RUnlock()
	if e == nil {
		return 0, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	maxAge := d.cfg.PendingMaxAge
	for i := range e.pending {
		if maxAge > 0 && !pkt.TimeReceived.IsZero() && pkt.TimeReceived.Sub(e.pending[i].recv) > maxAge {
			continue // keepPending expires it first
		}
		sets++
		size += len(e.pending[i].data)
	}
	return sets, size
}

// DropPending removes, without decoding them, counting them or telling the observer, the
// pending data sets of the datagrams whose tag drop accepts, and returns how many it removed:
// the caller decodes those datagrams again (an outlet reading a partition again from its
// committed offset), which holds their sets again.
func (d *Decoder) DropPending(drop func(tag uint64) bool) int {
	d.mu.RLock()
	sessions := make([]*exporter, 0, len(d.exporters))
	for _, e := range d.exporters {
		sessions = append(sessions, e)
	}
	d.mu.RUnlock()
	dropped := 0
	for _, e := range sessions {
		e.mu.Lock()
		n := 0
		for i := range e.pending {
			if drop(e.pending[i].tag) {
				e.pendingBytes -= len(e.pending[i].data)
				dropped++
				continue
			}
			// Swap rather than copy so that the dropped entry's buffer stays for reuse.
			e.pending[n], e.pending[i] = e.pending[i], e.pending[n]
			n++
		}
		e.pending = e.pending[:n]
		e.mu.Unlock()
	}
	return dropped
}
