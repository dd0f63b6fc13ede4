package jsonl

import (
	"bufio"
	"encoding/binary"
	"io"
	"log/slog"
	"sync"

	"flowzero/output"
	"flowzero/schema"
)

// Sink prints every flow it receives as a JSON line, for debugging. It writes synchronously
// from the worker's goroutine under a lock: it is meant for a terminal, not for volume.
type Sink struct {
	mu  sync.Mutex
	f   *Formatter
	w   *bufio.Writer
	log *slog.Logger
	buf []byte
}

// NewSink returns a sink writing JSON lines to w.
func NewSink(w io.Writer, s *schema.Schema, log *slog.Logger) *Sink {
	f, _ := New(s, nil)
	if log == nil {
		log = slog.Default()
	}
	return &Sink{f: f, w: bufio.NewWriter(w), log: log}
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

// Send prints the batch's flows.
func (s *Sink) Send(b *output.Batch) bool {
	defer b.Release()
	s.mu.Lock()
	defer s.mu.Unlock()
	data := b.Data
	for len(data) > 0 {
		l, n := binary.Uvarint(data)
		if n <= 0 || uint64(len(data)-n) < l {
			s.log.Error("stdout sink: malformed batch")
			return false
		}
		msg := data[n : n+int(l)]
		data = data[n+int(l):]
		var err error
		s.buf, err = s.f.Append(s.buf[:0], msg)
		if err != nil {
			s.log.Error("stdout sink: cannot decode flow", "error", err)
			continue
		}
		s.w.Write(s.buf)
	}
	s.w.Flush()
	return true
}
