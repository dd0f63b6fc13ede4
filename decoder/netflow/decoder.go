package netflow

import (
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/schema"
)

// Packet is one UDP datagram from an exporter.
type Packet struct {
	Payload      []byte
	Exporter     netip.AddrPort
	TimeReceived time.Time
	// Tag is the caller's identifier of the datagram, handed back with each of its flows by
	// DecodeTagged and ApplyState, also for the flows of its data sets decoded later from the
	// pending buffer, and to the Observer's pending calls.
	Tag uint64
}

// Errors returned by Decode. They are sentinel values so that returning one allocates
// nothing; each is also counted by exporter and reason.
var (
	ErrTruncated        = errors.New("netflow: truncated datagram")
	ErrVersion          = errors.New("netflow: unsupported version")
	ErrBadLength        = errors.New("netflow: header length does not match the datagram")
	ErrBadSet           = errors.New("netflow: malformed set header")
	ErrBadTemplate      = errors.New("netflow: malformed template")
	ErrTruncatedRecord  = errors.New("netflow: truncated data record")
	ErrTemplateNotFound = errors.New("netflow: data set for an unknown template")
	ErrTooManyExporters = errors.New("netflow: too many exporter sessions")
)

var reasonErrors = [reasonCount]error{
	reasonTruncatedHeader:  ErrTruncated,
	reasonBadVersion:       ErrVersion,
	reasonBadLength:        ErrBadLength,
	reasonBadSet:           ErrBadSet,
	reasonBadTemplate:      ErrBadTemplate,
	reasonTruncatedRecord:  ErrTruncatedRecord,
	reasonTemplateNotFound: ErrTemplateNotFound,
	reasonTooManyTemplates: ErrBadTemplate,
	reasonTooManyFields:    ErrBadTemplate,
	reasonPendingFull:      ErrTemplateNotFound,
	reasonPendingExpired:   ErrTemplateNotFound,
	reasonDataLink:         ErrTruncatedRecord,
}

// Decoder decodes NetFlow v5, v9 and IPFIX datagrams into schema.FlowMessage values. It is
// safe for concurrent use: each exporter session has its own lock, held while one of its
// datagrams is decoded.
type Decoder struct {
	cfg     Configuration
	schema  *schema.Schema
	metrics *metrics
	link    dataLinkParser

	mu        sync.RWMutex
	exporters map[netip.AddrPort]*exporter
	// unproven lists the sessions not established yet (see exporter.established), the
	// least recently active first; guarded by mu.
	unproven sessionList
	// idleAfter is the unix second before which no session can be idle for
	// session-idle-timeout (the oldest activity seen by the last scan, plus the timeout),
	// so that a full table is not scanned for every newcomer; guarded by mu.
	idleAfter int64

	// tsSource is cfg.TimestampSource as a small integer for the per-flow switch.
	tsSource tsSource

	persist persistState

	// observer, when set, is told of the state learned and of the data sets held (see
	// SetObserver).
	observer Observer
}

// exporter is the state of one exporter transport session (address and source port).
type exporter struct {
	mu        sync.Mutex
	addr      netip.AddrPort
	templates map[templateKey]*template
	// samplers maps (domain, sampler ID) to a rate learned from options data records;
	// sampler ID 0 holds the rate announced for the whole observation domain.
	samplers map[samplerKey]uint64
	// sysInit maps a domain to its systemInitTimeMilliseconds from options records.
	sysInit map[uint32]uint64

	defaultRate, overrideRate uint64

	pending      []pendingSet
	pendingBytes int
	newTemplates []templateKey
	dirty        bool
	// reports are the template changes of the datagram being decoded, told to the observer
	// at its end, after the sampling rates its options data gave (see decode).
	reports []StateRecord

	lastSeen atomic.Int64 // unix seconds of the last datagram, for eviction

	// A session is established once it sent two datagrams and one of them brought a valid
	// template or a flow; until then, it can be evicted for a newcomer (spoofed sources
	// send one datagram, or nothing valid). established is read without d.mu; datagrams,
	// valid and the list links are guarded by d.mu.
	established atomic.Bool
	// templatesStored counts the templates stored or refreshed (guarded by mu).
	templatesStored int
	datagrams       int
	valid           bool
	prev, next      *exporter
	listed          bool

	mpls [10]uint32 // scratch for the MPLS label stack of one record
	m    exporterMetrics
}

type samplerKey struct {
	version uint16
	domain  uint32
	id      uint64
}

// New returns a decoder. Metrics are registered on r (nil: not registered).
func New(r prometheus.Registerer, cfg Configuration, s *schema.Schema) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("netflow: a schema is required")
	}
	m, err := newMetrics(r)
	if err != nil {
		return nil, err
	}
	d := &Decoder{
		cfg:       cfg,
		schema:    s,
		metrics:   m,
		exporters: make(map[netip.AddrPort]*exporter),
		tsSource:  tsSourceOf(cfg.TimestampSource),
		idleAfter: math.MinInt64,
	}
	if err := d.initDataLink(); err != nil {
		return nil, err
	}
	return d, nil
}

// session returns the state of an exporter session, creating it when allowed; now is the
// receive time of its datagram, in unix seconds.
func (d *Decoder) session(ap netip.AddrPort, now int64) (*exporter, error) {
	d.mu.RLock()
	e := d.exporters[ap]
	d.mu.RUnlock()
	if e != nil {
		return e, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e = d.exporters[ap]; e != nil {
		return e, nil
	}
	if len(d.exporters) >= d.cfg.MaxExporters && !d.evictSession(now) {
		d.metrics.sessionsDropped.Inc()
		return nil, ErrTooManyExporters
	}
	e = d.newExporter(ap)
	e.lastSeen.Store(now)
	d.exporters[ap] = e
	d.unproven.pushBack(e)
	d.metrics.sessions.Set(float64(len(d.exporters)))
	return e, nil
}

// evictSession makes room for a new session when the table is full: it removes the least
// recently active session when it has been idle for session-idle-timeout (an exporter that
// restarted comes back from another source port and its old session would otherwise stay
// forever), else the least recently active session that is not established, so that
// spoofed sources cannot lock a real exporter out. Called with d.mu held.
func (d *Decoder) evictSession(now int64) bool {
	timeout := int64(d.cfg.SessionIdleTimeout / time.Second)
	if now >= d.idleAfter {
		var oldest *exporter
		for _, e := range d.exporters {
			if oldest == nil || e.lastSeen.Load() < oldest.lastSeen.Load() {
				oldest = e
			}
		}
		if oldest != nil && now-oldest.lastSeen.Load() >= timeout {
			d.evict(oldest, evictIdle)
			return true
		}
		if oldest != nil {
			d.idleAfter = oldest.lastSeen.Load() + timeout
		}
	}
	if e := d.unproven.head; e != nil {
		d.evict(e, evictNotEstablished)
		return true
	}
	return false
}

// evict removes a session, and its Prometheus series unless another session of the address
// remains: otherwise spoofed sources would grow the series (about 25 per address) without
// bound. Called with d.mu held.
func (d *Decoder) evict(e *exporter, why evictReason) {
	delete(d.exporters, e.addr)
	if d.observer != nil {
		e.mu.Lock()
		for _, p := range e.pending {
			d.observer.PendingReleased(p.tag, false)
		}
		e.pending, e.pendingBytes = nil, 0
		e.mu.Unlock()
	}
	d.unproven.remove(e)
	d.metrics.evicted[why].Inc()
	addr := e.addr.Addr().Unmap()
	for ap := range d.exporters {
		if ap.Addr().Unmap() == addr {
			return
		}
	}
	d.metrics.deleteExporter(addr.String())
}

// sessionSeen accounts a datagram of a session not established yet, valid when it brought
// a template or a flow: the session becomes established, or the most recently active of
// the unproven ones.
func (d *Decoder) sessionSeen(e *exporter, valid bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !e.listed {
		return // evicted meanwhile, or established by another datagram
	}
	e.datagrams++
	e.valid = e.valid || valid
	d.unproven.remove(e)
	if e.datagrams >= 2 && e.valid {
		e.established.Store(true)
		return
	}
	d.unproven.pushBack(e)
}

// sessionList is a doubly linked list of sessions, through their prev and next fields.
type sessionList struct {
	head, tail *exporter
}

func (l *sessionList) pushBack(e *exporter) {
	e.prev, e.next, e.listed = l.tail, nil, true
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *sessionList) remove(e *exporter) {
	if !e.listed {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next, e.listed = nil, nil, false
}

func (d *Decoder) newExporter(ap netip.AddrPort) *exporter {
	e := &exporter{
		addr:      ap,
		templates: make(map[templateKey]*template),
		samplers:  make(map[samplerKey]uint64),
		sysInit:   make(map[uint32]uint64),
		m:         d.metrics.forExporter(ap.Addr().Unmap().String()),
	}
	e.defaultRate, e.overrideRate = d.cfg.samplingRates(ap.Addr())
	return e
}

// fail counts an error for the exporter and returns its sentinel error.
func (e *exporter) fail(r reason) error {
	e.m.errors[r].Inc()
	return reasonErrors[r]
}

// Decode decodes one UDP payload. For every flow it fills fm (after fm.Reset()) and calls
// emit(fm); emit must finalize or copy what it needs before returning. Errors are counted
// by exporter and reason and returned; the good flows before a bad record are still emitted.
func (d *Decoder) Decode(pkt Packet, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	now := pkt.TimeReceived.Unix()
	e, err := d.session(pkt.Exporter, now)
	if err != nil {
		return err
	}
	e.lastSeen.Store(now)
	valid, err := d.decode(e, pkt, fm, emit, nil)
	if !e.established.Load() {
		d.sessionSeen(e, valid) // after e.mu: d.mu comes first (see saveTemplates)
	}
	return err
}

// decode decodes a datagram of session e under its lock. valid tells whether it brought a
// template or a flow.
func (d *Decoder) decode(e *exporter, pkt Packet, fm *schema.FlowMessage, emit func(*schema.FlowMessage), emitTag func(*schema.FlowMessage, uint64)) (valid bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	data := pkt.Payload
	if len(data) < 2 {
		return false, e.fail(reasonTruncatedHeader)
	}
	stored := e.templatesStored
	ctx := decodeContext{d: d, e: e, fm: fm, emit: emit, emitTag: emitTag, tag: pkt.Tag, recv: pkt.TimeReceived, recvSec: uint64(pkt.TimeReceived.Unix())}
	switch binary.BigEndian.Uint16(data) {
	case 5:
		e.m.packets[verV5].Inc()
		err = ctx.decodeV5(data)
	case 9:
		e.m.packets[verV9].Inc()
		err = ctx.decodeV9IPFIX(data)
	case 10:
		e.m.packets[verIPFIX].Inc()
		err = ctx.decodeV9IPFIX(data)
	default:
		return false, e.fail(reasonBadVersion)
	}
	// Template changes are reported after the options data of the same datagram: a decoder
	// applying them in that order has the sampling rate before a template releases its
	// pending data sets, as if it had decoded the datagram itself.
	if len(e.reports) > 0 {
		for _, r := range e.reports {
			d.observer.StateLearned(r)
		}
		clear(e.reports) // the records point into the payload
		e.reports = e.reports[:0]
	}
	if ctx.flows > 0 {
		e.m.flows.Add(float64(ctx.flows))
	}
	return ctx.flows > 0 || e.templatesStored != stored, err
}

// decodeContext carries what one datagram's records need; it lives on the stack.
type decodeContext struct {
	d    *Decoder
	e    *exporter
	fm   *schema.FlowMessage
	emit func(*schema.FlowMessage)
	// emitTag, when set, is called instead of emit with the tag of the datagram a flow
	// comes from (DecodeTagged, ApplyState).
	emitTag func(*schema.FlowMessage, uint64)
	tag     uint64
	// applying is set while a state record is applied (ApplyState): what it installs is not
	// reported to the observer, which published it.
	applying bool
	// inDatagram is set while the sets of a received datagram are decoded: pending data sets
	// that its templates release are decoded at its end (replayDue), once its options data
	// (sampling rates) are known too.
	inDatagram, replayDue bool
	recv                  time.Time
	// recvSec is recv in unix seconds, computed once per datagram.
	recvSec uint64

	version   uint16
	domain    uint32
	exportSec uint32 // header export time, unix seconds
	sysUptime uint32 // NetFlow v9 header, ms
	flows     int
	// pendingExpired is set once the pending data sets were checked for expiry.
	pendingExpired bool
	// tunnel holds the outer header's addresses of the record being decoded, for the
	// templates of a tunnel (see resolveRepeats); zero otherwise.
	tunnel [2]netip.Addr

	// rateCache remembers the last sampler lookup of this datagram: records of one
	// datagram nearly always share their sampler.
	rateCache struct {
		valid      bool
		hasSampler bool
		domain     uint32
		sampler    uint64
		rate       uint64
	}
}

// begin resets the flow message and sets the per-datagram fields.
func (c *decodeContext) begin() {
	fm := c.fm
	fm.Reset()
	fm.ExporterAddress = c.e.addr.Addr()
	switch c.d.tsSource {
	case tsReceive:
		fm.TimeReceived = c.recvSec
	default:
		fm.TimeReceived = uint64(c.exportSec)
	}
}

// finish applies the sampling rate override/default and emits the flow. Without sampling
// information, a flow stands for itself (rate 1): every volume is Bytes × SamplingRate.
func (c *decodeContext) finish(rate uint64) {
	if rate == 0 {
		rate = c.e.defaultRate
	}
	if rate == 0 {
		rate = 1
	}
	if c.e.overrideRate != 0 {
		rate = c.e.overrideRate
	}
	c.fm.SamplingRate = rate
	c.flows++
	if c.emitTag != nil {
		c.emitTag(c.fm, c.tag)
		return
	}
	c.emit(c.fm)
}

// decodeV5 decodes a NetFlow v5 datagram: a 24-byte header and 48-byte records.
func (c *decodeContext) decodeV5(data []byte) error {
	const headerLen, recordLen = 24, 48
	if len(data) < headerLen {
		return c.e.fail(reasonTruncatedHeader)
	}
	count := int(binary.BigEndian.Uint16(data[2:]))
	sysUptime := binary.BigEndian.Uint32(data[4:])
	c.exportSec = binary.BigEndian.Uint32(data[8:])
	// Sampling: 2 bits of mode, 14 bits of interval (0: not sampled, see finish).
	rate := uint64(binary.BigEndian.Uint16(data[22:]) & 0x3fff)
	// The header's count and the records must agree: nothing is decoded from a datagram
	// cut short, nor from one with more bytes than the count says, unless they are zero
	// padding, since either contradicts itself.
	records := data[headerLen:]
	if len(records) < count*recordLen {
		return c.e.fail(reasonTruncatedRecord)
	}
	if !allZero(records[count*recordLen:]) {
		return c.e.fail(reasonBadLength)
	}
	d, fm := c.d, c.fm
	exportMs := uint64(c.exportSec) * 1000
	for i := 0; i < count; i++ {
		r := records[i*recordLen : (i+1)*recordLen]
		c.begin()
		fm.SrcAddr = netip.AddrFrom4([4]byte(r[0:4]))
		fm.DstAddr = netip.AddrFrom4([4]byte(r[4:8]))
		fm.NextHop = netip.AddrFrom4([4]byte(r[8:12]))
		fm.InIf = uint32(binary.BigEndian.Uint16(r[12:]))
		fm.OutIf = uint32(binary.BigEndian.Uint16(r[14:]))
		fm.AppendUint(schema.ColumnPackets, uint64(binary.BigEndian.Uint32(r[16:])))
		fm.AppendUint(schema.ColumnBytes, uint64(binary.BigEndian.Uint32(r[20:])))
		first := uptimeToUnixMs(exportMs, sysUptime, binary.BigEndian.Uint32(r[24:]))
		last := uptimeToUnixMs(exportMs, sysUptime, binary.BigEndian.Uint32(r[28:]))
		if first != 0 {
			fm.AppendUint(schema.ColumnTimeFlowStart, first/1000)
		}
		if last != 0 {
			fm.AppendUint(schema.ColumnTimeFlowEnd, last/1000)
		}
		switch {
		case d.tsSource == tsFlowStart && first != 0:
			fm.TimeReceived = first / 1000
		case d.tsSource == tsFlowEnd && last != 0:
			fm.TimeReceived = last / 1000
		}
		srcPort := binary.BigEndian.Uint16(r[32:])
		dstPort := binary.BigEndian.Uint16(r[34:])
		proto := r[38]
		fm.AppendUint(schema.ColumnSrcPort, uint64(srcPort))
		fm.AppendUint(schema.ColumnDstPort, uint64(dstPort))
		fm.AppendUint(schema.ColumnTCPFlags, uint64(r[37]))
		fm.AppendUint(schema.ColumnProto, uint64(proto))
		fm.AppendUint(schema.ColumnIPTos, uint64(r[39]))
		fm.AppendUint(schema.ColumnEType, etherTypeIPv4)
		fm.SrcAS = uint32(binary.BigEndian.Uint16(r[40:]))
		fm.DstAS = uint32(binary.BigEndian.Uint16(r[42:]))
		fm.SrcNetMask = r[44]
		fm.DstNetMask = r[45]
		if proto == 1 && srcPort == 0 {
			// Cisco puts the ICMP type and code in the destination port.
			fm.AppendUint(schema.ColumnICMPv4Type, uint64(dstPort>>8))
			fm.AppendUint(schema.ColumnICMPv4Code, uint64(dstPort&0xff))
		}
		c.finish(rate)
	}
	return nil
}

// uptimeToUnixMs converts a time in ms of the exporter's uptime, a 32-bit counter that wraps
// every 49.7 days, to unix ms: its difference with the uptime at the export, modulo 2³² and
// signed (RFC 3954 §8 gives no more), is added to the export time. A flow can thus be
// dated up to 24.8 days around its export, whatever the uptime. 0 when the result is not
// after 1970 (an exporter without a clock).
func uptimeToUnixMs(exportMs uint64, exportUptime, t uint32) uint64 {
	ms := int64(exportMs) + int64(int32(t-exportUptime))
	if ms <= 0 {
		return 0
	}
	return uint64(ms)
}

type tsSource uint8

const (
	tsReceive tsSource = iota
	tsPacket
	tsFlowStart
	tsFlowEnd
)

func tsSourceOf(s TimestampSource) tsSource {
	switch s {
	case TimestampPacket:
		return tsPacket
	case TimestampFlowStart:
		return tsFlowStart
	case TimestampFlowEnd:
		return tsFlowEnd
	}
	return tsReceive
}

const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
)
