package jsonl

import (
	"bufio"
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
// from the worker's goroutine under a lock: it is meant for a terminal, not for volume. A
// write that fails (a closed pipe, a full disk) drops the batch's flows; they are counted,
// logged (rate-limited) and reported by Health.
type Sink struct {
	mu     sync.Mutex
	f      *Formatter
	out    io.Writer
	w      *bufio.Writer
	log    *slog.Logger
	buf    []byte
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
		f: f, out: w, w: bufio.NewWriter(w), log: log.With("sink", "stdout"),
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

// Stop flushes the output.
func (s *Sink) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Flush()
}

// Health implements health.Reporter: degraded for health.Hold after flows were dropped.
func (s *Sink) Health() health.Report {
	r := s.health.Report()
	s.mu.Lock()
	r.Counters = map[string]uint64{"flows-written": s.written, "flows-dropped": s.dropped}
	s.mu.Unlock()
	return r
}

// Send prints the batch's flows.
func (s *Sink) Send(b *output.Batch) bool {
	defer b.Release()
	s.mu.Lock()
	defer s.mu.Unlock()
	data := b.Data
	seen, printed := 0, 0
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
		s.buf, err = s.f.Append(s.buf[:0], msg)
		if err != nil {
			s.fail(1, "cannot decode a flow", err)
			continue
		}
		s.w.Write(s.buf)
		printed++
	}
	// bufio keeps its first write error: the batch whose flush fails is lost, and the
	// writer starts afresh for the next one.
	if err := s.w.Flush(); err != nil {
		s.fail(printed, "cannot write", err)
		s.w.Reset(s.out)
		return false
	}
	s.written += uint64(printed)
	s.flowsWritten.Add(float64(printed))
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
