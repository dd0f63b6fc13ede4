package collector

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/lograte"
	"flowzero/output"
	"flowzero/schema"
)

// worker reads one socket and runs the whole pipeline for its datagrams.
type worker struct {
	c        *Collector
	listener int
	name     string // listener name, protocol/address
	protocol string
	conn     *net.UDPConn   // the listener's socket (with af-packet, shared and never read)
	src      datagramReader // what the worker reads: conn, or its ring
	ring     *ring          // with af-packet
	dec      Decoder
	fwd      ForwardBatch // this worker's, when the Forwarder is a BatchForwarder
	fm       *schema.FlowMessage
	emitFn   func(*schema.FlowMessage) // w.emit bound once, so Decode calls allocate nothing

	exporters map[netip.AddrPort]*workerExporter
	batch     *output.Batch // the worker's batch when batches are not per exporter
	batchAt   time.Time

	// Per datagram.
	cur      *workerExporter
	now      time.Time
	emitted  uint64
	lastRate uint64

	// notAllowedLog is this worker's access to c.notAllowedLog: during a flood of refused
	// datagrams it refuses by itself once the window's lines are spent, so the workers do
	// not take the shared limiter's lock for each datagram.
	notAllowedLog lograte.Local
	// decodeErrLog is this worker's access to c.decodeErrLog.
	decodeErrLog lograte.Local

	inode       uint64
	dropsSeen   atomic.Uint32 // kernel drops already counted (SO_RXQ_OVFL or /proc)
	datagrams   prometheus.Counter
	bytes       prometheus.Counter
	kernelDrops prometheus.Counter
	readErrs    prometheus.Counter
	decodeErrs  prometheus.Counter
	notAllowed  prometheus.Counter
	rateLimited prometheus.Counter
}

// workerExporter is one exporter (address and port) as seen by one worker.
type workerExporter struct {
	info       *exporterInfo
	generation uint64 // of the policy the verdict below was taken with
	allowed    bool
	batch      *output.Batch
	batchAt    time.Time
	key        [16]byte
	keyLen     int

	// Token bucket (flows per second) and Akvorado-style sampling compensation: the ratio
	// of flows seen to flows kept over the previous second raises the sampling rate of kept
	// flows.
	tokens       float64
	tokensAt     time.Time
	windowStart  time.Time
	seen, kept   uint64
	rateMultiply uint64
	// flows counts the flows of datagrams without decoding them, for the rate limit of an
	// inlet.
	flows flowCounter
}

func newWorker(c *Collector, listener int, name, socket string, conn *net.UDPConn, dec Decoder, protocol string) *worker {
	w := &worker{
		c:           c,
		listener:    listener,
		name:        name,
		protocol:    protocol,
		conn:        conn,
		dec:         dec,
		fm:          c.deps.Schema.NewFlowMessage(),
		exporters:   make(map[netip.AddrPort]*workerExporter),
		datagrams:   c.metrics.datagrams.WithLabelValues(name, socket),
		bytes:       c.metrics.bytes.WithLabelValues(name, socket),
		kernelDrops: c.metrics.kernelDrops.WithLabelValues(name, socket),
		readErrs:    c.metrics.readErrors.WithLabelValues(name, socket),
		decodeErrs:  c.metrics.decodeErrs.WithLabelValues(protocol),
		notAllowed:  c.metrics.dropped.WithLabelValues("exporter", "not-allowed"),
		rateLimited: c.metrics.dropped.WithLabelValues("exporter", "rate-limited"),
	}
	w.emitFn = w.emit
	if bf, ok := c.deps.Forward.(BatchForwarder); ok {
		w.fwd = bf.NewBatch()
	}
	w.notAllowedLog = c.notAllowedLog.Local()
	w.decodeErrLog = c.decodeErrLog.Local()
	return w
}

func (w *worker) run() {
	defer w.c.wg.Done()
	r := w.src
	var deadline, drainUntil time.Time
	rearm := false
	for {
		if w.c.stopping.Load() {
			if drainUntil.IsZero() {
				// Read what the kernel already holds for a moment, then stop. A ring hands
				// its last block over when the block times out.
				drain := 100 * time.Millisecond
				if w.ring != nil {
					drain = max(drain, 2*w.c.cfg.Listeners[w.listener].BlockTimeout)
				}
				drainUntil = time.Now().Add(drain)
				r.SetReadDeadline(drainUntil)
			}
		} else if next := w.nextFlush(); rearm || !next.Equal(deadline) {
			deadline, rearm = next, false
			w.setFlushDeadline(next)
		}
		n, err := r.Read()
		sysNow := time.Now()
		readAt := w.c.clock.Now()
		w.now = readAt
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if !drainUntil.IsZero() && !time.Now().Before(drainUntil) {
					w.flushAll()
					return
				}
				w.flushAged()
				rearm = true // the socket's deadline has passed: set it again
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				w.flushAll()
				return
			}
			w.readFailed(err)
			continue
		}
		bytes := 0
		for i := range n {
			payload, from, ctl := r.Datagram(i)
			if ctl.hasDrops {
				w.countKernelDrops(ctl.drops)
			}
			// The kernel's receive time, on the collector's clock: the datagrams of one read
			// may have waited in the socket for different times.
			w.now = readAt
			if ctl.hasTime {
				if wait := sysNow.Sub(time.Unix(ctl.sec, ctl.nsec)); wait > 0 {
					w.now = readAt.Add(-wait)
				}
			}
			bytes += len(payload)
			w.handle(payload, from)
		}
		w.now = readAt
		w.datagrams.Add(float64(n))
		w.bytes.Add(float64(bytes))
		switch {
		case w.fwd == nil:
		case w.ring != nil:
			// The kernel gathered the block for up to block-timeout: the block is the batch.
			w.fwd.Send(readAt, true)
		default:
			w.fwd.Send(readAt, false)
			if n < readBatch && !w.c.stopping.Load() {
				w.gather()
			}
		}
	}
}

// gather lets the next datagrams gather in the socket while the forwarder holds some, up to
// when they are due, instead of waking up for each: then one read takes them all. At a few
// thousand datagrams per second, a wake-up per datagram (the poller, then the worker's
// thread) costs the inlet more than the rest of its work on each.
func (w *worker) gather() {
	due := w.fwd.Due()
	if due.IsZero() {
		return
	}
	if d := due.Sub(w.c.clock.Now()); d > 0 {
		time.Sleep(d)
	}
	w.now = w.c.clock.Now()
	w.fwd.Send(w.now, false)
}

// setFlushDeadline wakes the worker when the batch due at next (on the collector's clock)
// must go; the socket's deadline is on the machine's clock, so only the wait carries over.
func (w *worker) setFlushDeadline(next time.Time) {
	if next.IsZero() {
		w.src.SetReadDeadline(time.Time{})
		return
	}
	w.src.SetReadDeadline(time.Now().Add(next.Sub(w.now)))
}

// readFailed counts a failed socket read and logs it, rate-limited: an error that repeats
// comes back at every turn of the read loop.
func (w *worker) readFailed(err error) {
	w.readErrs.Inc()
	if ok, suppressed := w.c.readErrLog.Allow(w.now); ok {
		w.c.log.Warn("UDP read error", "listener", w.name, "error", err, "suppressed", suppressed)
	}
}

// countKernelDrops records the socket's cumulative drop counter, from the worker
// (SO_RXQ_OVFL) or from the /proc poller, counting each drop once.
func (w *worker) countKernelDrops(v uint32) {
	for {
		old := w.dropsSeen.Load()
		if int32(v-old) <= 0 { // not newer (wrap-safe)
			return
		}
		if w.dropsSeen.CompareAndSwap(old, v) {
			w.kernelDrops.Add(float64(v - old))
			return
		}
	}
}

// handle runs one datagram through the pipeline.
func (w *worker) handle(payload []byte, from netip.AddrPort) {
	e := w.exporter(from)
	if e == nil {
		w.notAllowed.Inc()
		return
	}
	e.info.datagrams.Add(1)
	e.info.lastSeen.Store(w.now.UnixNano())
	if f := w.c.deps.Forward; f != nil {
		if rate := w.c.policy.Load().rate; rate > 0 && !e.admitDatagram(w.now, rate, payload, w.rateLimited) {
			return
		}
		if w.fwd != nil {
			w.fwd.Add(payload, from, w.now, w.protocol)
		} else {
			f.Forward(payload, from, w.now, w.protocol)
		}
		return
	}
	w.cur = e
	w.emitted = 0
	err := w.dec.Decode(payload, from, w.now, w.fm, w.emitFn)
	if w.emitted > 0 {
		// Shared counters are updated once per datagram, not once per flow.
		e.info.flows.Add(w.emitted)
		e.info.flowsMetric.Add(float64(w.emitted))
		e.info.samplingRate.Store(w.lastRate)
	}
	if err != nil {
		w.decodeErrs.Inc()
		e.info.errors.Add(1)
		w.logDecodeError(from, err)
	}
	w.cur = nil
	if w.c.keyed {
		if e.batch != nil && len(e.batch.Data) >= w.c.cfg.BatchSize {
			w.flushExporter(e)
		}
	} else if w.batch != nil && len(w.batch.Data) >= w.c.cfg.BatchSize {
		w.flushWorker()
	}
}

// logDecodeError logs a malformed datagram: at most 3 lines per exporter and 10 for all of
// them per 30 s, from the first datagram of a flood on. The limits are on lines, not on
// distinct errors (the error text of random datagrams differs from one to the next) nor on
// sources alone (a flood may come from thousands). Once the shared window is spent, the
// worker refuses without taking a lock.
func (w *worker) logDecodeError(from netip.AddrPort, err error) {
	if w.decodeErrLog.Spent(w.now) {
		return
	}
	if ok, _ := w.c.logLimit.Allow(from.Addr(), w.now); !ok {
		w.decodeErrLog.Suppress()
		return
	}
	// suppressed counts the lines refused by either limit since the last line of all.
	ok, suppressed := w.decodeErrLog.Allow(w.now)
	if !ok {
		return
	}
	w.c.log.Warn("cannot decode datagram", "protocol", w.protocol, "exporter", from.String(),
		"error", err, "suppressed", suppressed)
}

// exporter returns the worker's state for an exporter the allow-list admits, creating it on
// first sight and re-checking the allow-list after a reload, or nil for a refused one. The
// allow-list is checked before anything is created: refused sources (spoofed ones included)
// get no state, API entry or metric series, so they cannot fill the exporter table.
func (w *worker) exporter(from netip.AddrPort) *workerExporter {
	pol := w.c.policy.Load()
	e, ok := w.exporters[from]
	if ok && e.generation == pol.generation {
		if !e.allowed {
			return nil
		}
		return e
	}
	if !pol.allowed(from.Addr()) {
		if ok {
			// Allowed before the reload: keep its state (a batch may be pending) but refuse it.
			e.generation, e.allowed = pol.generation, false
		}
		if logIt, suppressed := w.notAllowedLog.Allow(w.now); logIt {
			w.c.log.Warn("datagrams from exporters outside the allow-list dropped", "exporter", from.String(),
				"suppressed", suppressed)
		}
		return nil
	}
	if !ok {
		if len(w.exporters) >= 4*maxExporters {
			// Bound the map against spoofed sources: forget idle sessions (their state is
			// rebuilt on their next datagram).
			for k, old := range w.exporters {
				if old.batch == nil {
					delete(w.exporters, k)
				}
			}
		}
		e = &workerExporter{info: w.c.exporterInfo(from.Addr())}
		a16 := from.Addr().As16()
		e.key = a16
		e.keyLen = 16
		if from.Addr().Is4() {
			copy(e.key[:], a16[12:])
			e.keyLen = 4
		}
		w.exporters[from] = e
	}
	e.generation, e.allowed = pol.generation, true
	return e
}

// emit is called by the decoder for every flow of the current datagram.
func (w *worker) emit(fm *schema.FlowMessage) {
	e := w.cur
	if rate := w.c.policy.Load().rate; rate > 0 {
		if !e.admit(w.now, rate) {
			w.rateLimited.Inc()
			return
		}
		if e.rateMultiply > 1 {
			fm.SamplingRate *= e.rateMultiply
		}
	}
	if w.c.deps.Enricher != nil {
		w.c.deps.Enricher.Enrich(fm)
		if fm.Rejected() {
			return // counted by the step that rejected it
		}
	}
	msg := fm.Finalize()
	w.emitted++
	w.lastRate = fm.SamplingRate
	var b *output.Batch
	if w.c.keyed {
		if e.batch != nil && len(e.batch.Data)+len(msg) > cap(e.batch.Data) {
			w.flushExporter(e)
		}
		if e.batch == nil {
			e.batch = w.c.pool.Get()
			e.batch.Key = append(e.batch.Key, e.key[:e.keyLen]...)
			e.batchAt = w.now
		}
		b = e.batch
	} else {
		if w.batch != nil && len(w.batch.Data)+len(msg) > cap(w.batch.Data) {
			w.flushWorker()
		}
		if w.batch == nil {
			w.batch = w.c.pool.Get()
			w.batchAt = w.now
		}
		b = w.batch
	}
	b.Append(msg)
}

// admit applies the per-exporter rate limit (token bucket of one second of flows).
func (e *workerExporter) admit(now time.Time, rate float64) bool {
	if now.Sub(e.windowStart) >= time.Second {
		e.rateMultiply = 1
		if e.kept > 0 && e.seen > e.kept {
			e.rateMultiply = (e.seen + e.kept/2) / e.kept
		}
		e.windowStart, e.seen, e.kept = now, 0, 0
	}
	e.seen++
	e.tokens += now.Sub(e.tokensAt).Seconds() * rate
	e.tokensAt = now
	if e.tokens > rate {
		e.tokens = rate
	}
	if e.tokens < 1 {
		return false
	}
	e.tokens--
	e.kept++
	return true
}

// admitDatagram applies the per-exporter rate limit in an inlet, which decodes nothing: the
// same token bucket as admit, taking the flows the datagram holds (flowCounter) at once. A
// datagram that does not fit is dropped whole and its flows counted in limited; one that
// defines templates always passes (later data need them), taking what tokens there are.
// The sampling rate of the flows kept cannot be raised, since they are not decoded here.
func (e *workerExporter) admitDatagram(now time.Time, rate float64, payload []byte, limited prometheus.Counter) bool {
	n, templates := e.flows.count(payload)
	if n == 0 {
		return true
	}
	e.tokens += now.Sub(e.tokensAt).Seconds() * rate
	e.tokensAt = now
	if e.tokens > rate {
		e.tokens = rate
	}
	// A datagram holding more flows than a second's worth passes when the bucket is full.
	need := min(float64(n), rate)
	if e.tokens < need && !templates {
		limited.Add(float64(n))
		return false
	}
	e.tokens = max(e.tokens-float64(n), 0)
	return true
}

func (w *worker) flushWorker() {
	b := w.batch
	w.batch = nil
	w.c.dispatch(b)
}

func (w *worker) flushExporter(e *workerExporter) {
	b := e.batch
	e.batch = nil
	w.c.dispatch(b)
}

// nextFlush is when the oldest open batch is due (zero when none is open).
func (w *worker) nextFlush() time.Time {
	iv := time.Duration(w.c.batchInterval.Load())
	var t time.Time
	if w.fwd != nil {
		t = w.fwd.Due()
	}
	if w.batch != nil && (t.IsZero() || w.batchAt.Add(iv).Before(t)) {
		t = w.batchAt.Add(iv)
	}
	if w.c.keyed {
		for _, e := range w.exporters {
			if e.batch != nil && (t.IsZero() || e.batchAt.Add(iv).Before(t)) {
				t = e.batchAt.Add(iv)
			}
		}
	}
	return t
}

func (w *worker) flushAged() {
	if w.fwd != nil {
		w.fwd.Send(w.now, false)
	}
	iv := time.Duration(w.c.batchInterval.Load())
	if w.batch != nil && w.now.Sub(w.batchAt) >= iv {
		w.flushWorker()
	}
	for _, e := range w.exporters {
		if e.batch != nil && w.now.Sub(e.batchAt) >= iv {
			w.flushExporter(e)
		}
	}
}

func (w *worker) flushAll() {
	if w.fwd != nil {
		w.fwd.Send(w.now, true)
	}
	if w.batch != nil {
		w.flushWorker()
	}
	for _, e := range w.exporters {
		if e.batch != nil {
			w.flushExporter(e)
		}
	}
}

// maxExporters bounds the exporters tracked individually (API entries and metric series).
const maxExporters = 10000

// exporterInfo is shared by the workers and the API: counters only, updated atomically.
type exporterInfo struct {
	addr         netip.Addr
	firstSeen    time.Time
	lastSeen     atomic.Int64
	datagrams    atomic.Uint64
	flows        atomic.Uint64
	errors       atomic.Uint64
	samplingRate atomic.Uint64
	flowsMetric  prometheus.Counter
}

func (c *Collector) exporterInfo(a netip.Addr) *exporterInfo {
	if v, ok := c.exporters.Load(a); ok {
		return v.(*exporterInfo)
	}
	if c.exporterCount.Load() >= maxExporters {
		// A flood of spoofed sources must not grow memory and metric series without bound:
		// beyond the limit, new sources share one entry (reported as the unspecified address).
		a = netip.IPv6Unspecified()
		if v, ok := c.exporters.Load(a); ok {
			return v.(*exporterInfo)
		}
	}
	info := &exporterInfo{addr: a, firstSeen: c.clock.Now(), flowsMetric: c.metrics.flows.WithLabelValues(a.String())}
	if v, loaded := c.exporters.LoadOrStore(a, info); loaded {
		return v.(*exporterInfo)
	}
	c.exporterCount.Add(1)
	return info
}
