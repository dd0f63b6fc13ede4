package jsonl

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/clock"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
	"flowzero/output"
	"flowzero/schema"
)

// Sink prints every flow it receives as a JSON line, for debugging. It writes synchronously
// from the worker's goroutine under a lock, one write per batch: it is meant for a terminal,
// not for volume. A write that fails (a closed pipe, a full disk) drops the flows whose lines
// did not reach the output; they are counted, logged (rate-limited) and reported by Health.
type Sink struct {
	mu  sync.Mutex
	f   *Formatter
	out io.Writer
	log *slog.Logger
	// buf holds a batch's lines and ends where each line ends, reused between batches: a
	// short write counts as written exactly the lines that reached out.
	buf  []byte
	ends []int
	// cut is set when a failed write left a line without its end: the next write ends it
	// first, so that later lines stay whole.
	cut    bool
	clock  clock.Clock
	health *health.State
	errLog *lograte.Limiter

	written, dropped uint64 // under mu
	flowsWritten     prometheus.Counter
	flowsDropped     prometheus.Counter
	errors           prometheus.Counter
}

// NewSink returns a sink writing JSON lines to w, its metrics registered on r (nil: not
// registered).
func NewSink(r prometheus.Registerer, w io.Writer, s *schema.Schema, log *slog.Logger) *Sink {
	f, _ := New(s, nil)
	if log == nil {
		log = slog.Default()
	}
	sk := &Sink{
		f: f, out: w, log: log.With("sink", "stdout"),
		clock: clock.System{}, health: health.NewState(nil), errLog: lograte.New(3, time.Minute),
		flowsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_stdout_flows_written_total", Help: "Flows printed by the stdout sink."}),
		flowsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_stdout_flows_dropped_total", Help: "Flows the stdout sink could not print (write error, or a flow that does not decode)."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_stdout_errors_total", Help: "Write errors and undecodable flows of the stdout sink."}),
	}
	if r != nil {
		r.MustRegister(sk.flowsWritten, sk.flowsDropped, sk.errors)
	}
	return sk
}

// SetClock sets the clock that dates the health report (clock.System{} by default).
func (s *Sink) SetClock(c clock.Clock) {
	s.clock = clock.Or(c)
	s.health.SetClock(s.clock)
}

// Name implements output.Sink.
func (s *Sink) Name() string { return "stdout" }

// Start implements output.Sink.
func (s *Sink) Start() error { return nil }

// Stop ends a line a failed write cut short; nothing else is buffered.
func (s *Sink) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut {
		if _, err := s.out.Write([]byte{'\n'}); err != nil {
			return err
		}
		s.cut = false
	}
	return nil
}

// Health implements health.Reporter: degraded for health.Hold after flows were dropped.
func (s *Sink) Health() health.Report {
	r := s.health.Report()
	s.mu.Lock()
	r.Counters = map[string]uint64{"flows-written": s.written, "flows-dropped": s.dropped}
	s.mu.Unlock()
	return r
}

// Send prints the batch's flows, in one write.
func (s *Sink) Send(b *output.Batch) bool {
	defer b.Release()
	s.mu.Lock()
	defer s.mu.Unlock()
	data := b.Data
	seen := 0
	s.buf, s.ends = s.buf[:0], s.ends[:0]
	if s.cut {
		s.buf = append(s.buf, '\n')
	}
	start := len(s.buf)
	for len(data) > 0 {
		l, n := binary.Uvarint(data)
		if n <= 0 || uint64(len(data)-n) < l {
			s.fail(b.Flows-seen, "malformed batch", nil)
			break
		}
		msg := data[n : n+int(l)]
		data = data[n+int(l):]
		seen++
		var err error
		before := len(s.buf)
		s.buf, err = s.f.Append(s.buf, msg)
		if err != nil {
			s.buf = s.buf[:before]
			s.fail(1, "cannot decode a flow", err)
			continue
		}
		s.ends = append(s.ends, len(s.buf))
	}
	if len(s.buf) == 0 {
		return b.Flows == 0
	}
	n, err := s.out.Write(s.buf)
	if n >= start {
		s.cut = false
	}
	// The lines that ended within n reached the output; a line cut short is ended by the
	// next write.
	printed := 0
	for printed < len(s.ends) && s.ends[printed] <= n {
		printed++
	}
	if err != nil && n > start && printed < len(s.ends) && (printed == 0 || n > s.ends[printed-1]) {
		s.cut = true
	}
	s.written += uint64(printed)
	s.flowsWritten.Add(float64(printed))
	if err != nil {
		s.fail(len(s.ends)-printed, "cannot write", err)
		return false
	}
	return printed == b.Flows
}

// fail counts flows lost and logs it, rate-limited (under mu).
func (s *Sink) fail(flows int, what string, err error) {
	s.dropped += uint64(flows)
	s.flowsDropped.Add(float64(flows))
	s.errors.Inc()
	s.health.Event(fmt.Sprintf("%s: %v; %d flows dropped since start", what, err, s.dropped))
	if ok, suppressed := s.errLog.Allow(s.clock.Now()); ok {
		s.log.Error("stdout sink: "+what+", flows dropped", "flows", flows, "error", err,
			"flows-dropped-total", s.dropped, "suppressed", suppressed)
	}
}
