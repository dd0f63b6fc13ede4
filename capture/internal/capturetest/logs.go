package capturetest

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Logs is a slog.Handler that keeps every record, for tests that count log lines.
type Logs struct {
	mu      *sync.Mutex
	records *[]LogRecord
	attrs   []slog.Attr
}

// LogRecord is one kept log line: its level, message and attributes as text.
type LogRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// NewLogs returns an empty Logs and a logger writing to it.
func NewLogs() (*Logs, *slog.Logger) {
	l := &Logs{mu: &sync.Mutex{}, records: &[]LogRecord{}}
	return l, slog.New(l)
}

// Enabled keeps every level.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	rec := LogRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range l.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	*l.records = append(*l.records, rec)
	l.mu.Unlock()
	return nil
}

// WithAttrs returns a handler adding attrs to every record.
func (l *Logs) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *l
	c.attrs = append(slices.Clip(l.attrs), attrs...)
	return &c
}

// WithGroup ignores the group: tests read attributes by their own key.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Records returns the records kept so far.
func (l *Logs) Records() []LogRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(*l.records)
}

// Matching returns the records whose message contains substr.
func (l *Logs) Matching(substr string) []LogRecord {
	var out []LogRecord
	for _, r := range l.Records() {
		if strings.Contains(r.Msg, substr) {
			out = append(out, r)
		}
	}
	return out
}

// String returns the records as text, one per line, for failure messages.
func (l *Logs) String() string {
	var b strings.Builder
	for _, r := range l.Records() {
		b.WriteString(r.Level.String() + " " + r.Msg)
		keys := make([]string, 0, len(r.Attrs))
		for k := range r.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString(" " + k + "=" + r.Attrs[k])
		}
		b.WriteByte('\n')
	}
	return b.String()
}
