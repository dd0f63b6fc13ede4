package netflow

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"flowzero/schema"
)

// Observer is told what a decoder learns from the datagrams it decodes, for decoders in other
// processes to apply the same state (mode: outlet publishes it to a Kafka topic), and of the
// data sets it holds in the pending buffer, for a caller that must know when every flow of a
// datagram was emitted. Its methods are called with the exporter session's lock held: they
// must return quickly and must not call the decoder. The slices they get are valid during the
// call only.
type Observer interface {
	// StateLearned reports a template or options template installed, changed or withdrawn,
	// and a sampling rate or system init time learned or changed from options data. A
	// refresh that changes nothing, and what ApplyState installs, are not reported.
	StateLearned(StateRecord)
	// PendingHeld reports that a data set of the datagram tagged tag went to the pending
	// buffer to wait for its template.
	PendingHeld(tag uint64)
	// PendingReleased reports that a held data set of the datagram tagged tag left the
	// buffer: decoded (its flows were emitted before the call) or dropped (too old, session
	// evicted; counted in the decoder's metrics).
	PendingReleased(tag uint64, decoded bool)
}

// StateKind is what a StateRecord holds.
type StateKind uint8

const (
	// StateTemplate is a data template (RFC 3954 §5.2, RFC 7011 §3.4.1).
	StateTemplate StateKind = 1
	// StateOptionsTemplate is an options template (RFC 3954 §6.1, RFC 7011 §3.4.2).
	StateOptionsTemplate StateKind = 2
	// StateSamplingRate is a sampling rate from options data, per sampler ID (0: the whole
	// observation domain).
	StateSamplingRate StateKind = 3
	// StateSystemInit is an observation domain's systemInitTimeMilliseconds (IE 160) from
	// options data.
	StateSystemInit StateKind = 4
)

// StateRecord is one piece of the state of an exporter session: what an Observer reports and
// ApplyState installs.
type StateRecord struct {
	Kind StateKind
	// Exporter is the session: the exporter's address and source port.
	Exporter netip.AddrPort
	// Version is 9 (NetFlow v9) or 10 (IPFIX).
	Version uint16
	// Domain is the observation domain (NetFlow v9 source ID).
	Domain uint32
	// ID is the template ID (templates) or the sampler ID (sampling rates); 0 otherwise.
	ID uint64
	// Received is the receive time of the datagram the state came from.
	Received time.Time
	// Withdrawn is set for a withdrawn template (Record is then empty).
	Withdrawn bool
	// Record is the template record as received, in its version's format (templates).
	Record []byte
	// Value is the sampling rate or the system init time in ms.
	Value uint64
}

// SetObserver sets the observer; call it before the first datagram. With an observer, a
// template definition that differs from the one installed replaces it only when it comes from
// a datagram received later (by the receive times given in Packet and StateRecord): decoders
// that decode an exporter's datagrams in different orders then agree on its templates. A
// definition refused so is counted (errors_total, reason stale-template).
func (d *Decoder) SetObserver(o Observer) { d.observer = o }

// DecodeTagged is Decode, but emit also gets the tag of the datagram each flow comes from:
// pkt.Tag, or for data sets decoded from the pending buffer the tag of the datagram that
// brought them.
func (d *Decoder) DecodeTagged(pkt Packet, fm *schema.FlowMessage, emit func(*schema.FlowMessage, uint64)) error {
	now := pkt.TimeReceived.Unix()
	e, err := d.session(pkt.Exporter, now)
	if err != nil {
		return err
	}
	e.lastSeen.Store(now)
	valid, err := d.decode(e, pkt, fm, nil, emit)
	if !e.established.Load() {
		d.sessionSeen(e, valid)
	}
	return err
}

// ApplyState installs state that another decoder learned (see Observer), without reporting
// it, and decodes the pending data sets that a template it installs was missing: their flows
// go to emit with their datagrams' tags. A template record goes through the parser of
// received template sets; a record that does not parse, or that is not the template r.ID,
// is an error and installs nothing.
func (d *Decoder) ApplyState(r StateRecord, fm *schema.FlowMessage, emit func(*schema.FlowMessage, uint64)) error {
	if r.Version != 9 && r.Version != 10 {
		return fmt.Errorf("netflow: state for %s: version %d is not 9 or 10", r.Exporter, r.Version)
	}
	switch r.Kind {
	case StateTemplate, StateOptionsTemplate:
		if r.ID < minDataSetID || r.ID > 0xffff {
			return fmt.Errorf("netflow: state for %s: template ID %d is not in 256..65535", r.Exporter, r.ID)
		}
		if !r.Withdrawn && (len(r.Record) < 4 || uint64(binary.BigEndian.Uint16(r.Record)) != r.ID) {
			return fmt.Errorf("netflow: state for %s: the record is not template %d", r.Exporter, r.ID)
		}
	case StateSamplingRate, StateSystemInit:
		if r.Value == 0 {
			return fmt.Errorf("netflow: state for %s: zero %s", r.Exporter, map[StateKind]string{StateSamplingRate: "sampling rate", StateSystemInit: "system init time"}[r.Kind])
		}
	default:
		return fmt.Errorf("netflow: state for %s: unknown kind %d", r.Exporter, r.Kind)
	}
	e, err := d.session(r.Exporter, r.Received.Unix())
	if err != nil {
		return err
	}
	// Like a session loaded from the templates file: it has state, so it is established.
	d.mu.Lock()
	d.unproven.remove(e)
	e.established.Store(true)
	d.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	c := decodeContext{d: d, e: e, fm: fm, emitTag: emit, applying: true, version: r.Version, domain: r.Domain,
		recv: r.Received, recvSec: uint64(max(r.Received.Unix(), 0))}
	learned := learnedAt(r.Received)
	switch r.Kind {
	case StateTemplate, StateOptionsTemplate:
		options := r.Kind == StateOptionsTemplate
		key := templateKey{version: r.Version, id: uint16(r.ID), domain: r.Domain}
		if r.Withdrawn {
			if t := e.templates[key]; t != nil && t.options == options && t.learned <= learned {
				d.withdrawTemplate(e, key, false, options, learned, true)
			}
			return nil
		}
		setID := uint16(v9TemplateSetID)
		switch {
		case r.Version == 9 && options:
			setID = v9OptionsTemplateSetID
		case r.Version == 10 && options:
			setID = ipfixOptionsSetID
		case r.Version == 10:
			setID = ipfixTemplateSetID
		}
		if fm == nil {
			c.fm = nil // no replay of pending sets without a message to fill
		}
		return c.templateSet(setID, r.Record, options)
	case StateSamplingRate:
		k := samplerKey{r.Version, r.Domain, r.ID}
		if old, ok := e.samplers[k]; !ok || old != r.Value {
			if !putBounded(e.samplers, k, r.Value, d.cfg.MaxSamplersPerExporter) {
				return e.fail(reasonTooManySamplers)
			}
			e.dirty = true
		}
	case StateSystemInit:
		if !putBounded(e.sysInit, r.Domain, r.Value, d.cfg.MaxSamplersPerExporter) {
			return e.fail(reasonTooManySamplers)
		}
	}
	return nil
}

// ExpirePending drops the pending data sets older than pending-max-age at now, in every
// session. A decoder expires them when a later data set comes for the same session; a caller
// waiting for held sets calls this periodically, so that a session that sends nothing more
// does not hold them forever.
func (d *Decoder) ExpirePending(now time.Time) {
	if d.cfg.PendingMaxAge <= 0 || now.IsZero() {
		return
	}
	d.mu.RLock()
	sessions := make([]*exporter, 0, len(d.exporters))
	for _, e := range d.exporters {
		sessions = append(sessions, e)
	}
	d.mu.RUnlock()
	for _, e := range sessions {
		e.mu.Lock()
		if len(e.pending) > 0 {
			c := decodeContext{d: d, e: e, recv: now}
			c.expirePending()
		}
		e.mu.Unlock()
	}
}

// learnedState reports state learned from options data to the observer.
func (c *decodeContext) learnedState(kind StateKind, id, value uint64) {
	if c.d.observer == nil || c.applying {
		return
	}
	c.d.observer.StateLearned(StateRecord{Kind: kind, Exporter: c.e.addr, Version: c.version, Domain: c.domain,
		ID: id, Received: c.recv, Value: value})
}

// learnedAt is the receive time of a template's datagram in unix ns, 0 when unknown (a
// template loaded from the templates file).
func learnedAt(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
