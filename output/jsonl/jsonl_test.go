package jsonl

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/output"
	"flowzero/schema"
)

func TestFormatter(t *testing.T) {
	s, err := schema.New(schema.Configuration{Enabled: []string{"SrcMAC"}})
	if err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	fm.TimeReceived = 1700000000
	fm.SrcAddr = netip.MustParseAddr("192.0.2.1")
	fm.DstAddr = netip.MustParseAddr("2001:db8::1")
	fm.AppendUint(schema.ColumnDstPort, 443)
	fm.AppendUint(schema.ColumnFlowDirection, schema.DirectionIngress)
	fm.AppendUint(schema.ColumnSrcMAC, 0x001b213c9df8)
	msg := fm.Finalize()
	_, n := binary.Uvarint(msg)

	f, err := New(s, []string{"TimeReceived", "SrcAddr", "DstAddr", "DstPort", "FlowDirection", "SrcMAC"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Append(nil, msg[n:])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"TimeReceived":"2023-11-14T22:13:20Z","SrcAddr":"192.0.2.1","DstAddr":"2001:db8::1","DstPort":443,"FlowDirection":"ingress","SrcMAC":"00:1b:21:3c:9d:f8"}` + "\n"
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	f.TimesAsMillis = true
	got, _ = f.Append(nil, msg[n:])
	if want := `{"TimeReceived":1700000000000,`; string(got[:len(want)]) != want {
		t.Fatalf("millis: %s", got)
	}
	if _, err := New(s, []string{"NoSuchColumn"}); err == nil || err.Error() != `unknown column "NoSuchColumn"` {
		t.Fatalf("unknown column error: %v", err)
	}
	if _, err := f.Append(nil, []byte{0x0a, 0xff}); err == nil {
		t.Fatal("malformed message accepted")
	}
}

// failAfter is a writer that fails once it has taken n bytes, as a closed pipe or a full
// disk would.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n < len(p) {
		f.n = 0
		return 0, errors.New("write /dev/stdout: broken pipe")
	}
	f.n -= len(p)
	return len(p), nil
}

// TestStdoutSinkWriteErrors: flows that cannot be printed are counted (metrics that exist
// from the start), logged a bounded number of times and reported by Health.
func TestStdoutSinkWriteErrors(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	logs := &lockedbuf.Buffer{}
	sink := NewSink(reg, &failAfter{n: 10 << 10}, s, slog.New(slog.NewTextHandler(logs, nil)))
	if n, _ := promtest.GatherAndCount(reg, "flowzero_stdout_flows_dropped_total", "flowzero_stdout_errors_total"); n != 2 {
		t.Errorf("%d drop and error series at start, want 2", n)
	}
	fm := s.NewFlowMessage()
	pool := output.NewBatchPool(4096, 4)
	written := 0
	for i := range 100 {
		fm.Reset()
		fm.TimeReceived = uint64(1700000000 + i)
		fm.SrcAddr = netip.MustParseAddr("192.0.2.1")
		b := pool.Get()
		b.Append(fm.Finalize())
		b.Append(fm.Finalize())
		if sink.Send(b) {
			written += 2
		}
	}
	h := sink.Health()
	if written == 0 || written == 200 || h.Status != health.Degraded || !strings.Contains(h.Reason, "broken pipe") ||
		h.Counters["flows-written"] != uint64(written) || h.Counters["flows-dropped"] != uint64(200-written) {
		t.Errorf("%d written; health %+v", written, h)
	}
	if v := promtest.ToFloat64(sink.flowsDropped); v != float64(200-written) {
		t.Errorf("dropped counted %v, want %d", v, 200-written)
	}
	if n := strings.Count(logs.String(), "stdout sink: cannot write"); n < 1 || n > 3 {
		t.Errorf("%d error lines, want 1 to 3:\n%s", n, logs.String())
	}
}

// shortWriter takes up to budget bytes of each write, then fails it, as a full disk does
// with a short write; the test gives it more room afterwards.
type shortWriter struct {
	out    strings.Builder
	budget int
}

func (w *shortWriter) Write(p []byte) (int, error) {
	if len(p) > w.budget {
		n := w.budget
		w.out.Write(p[:n])
		w.budget = 0
		return n, errors.New("write /dev/stdout: no space left on device")
	}
	w.budget -= len(p)
	w.out.Write(p)
	return len(p), nil
}

// TestStdoutSinkShortWrite: a write failing partway through a batch counts as written the
// lines that reached the output and as dropped the rest; the line it cut short is ended, so
// that the next batch's lines are whole JSON lines.
func TestStdoutSinkShortWrite(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	w := &shortWriter{}
	sink := NewSink(nil, w, s, slog.New(slog.NewTextHandler(&lockedbuf.Buffer{}, nil)))
	fm := s.NewFlowMessage()
	pool := output.NewBatchPool(64<<10, 2)
	send := func(first, flows int) {
		b := pool.Get()
		for i := range flows {
			fm.Reset()
			fm.TimeReceived = uint64(1700000000 + first + i)
			fm.SrcAddr = netip.MustParseAddr("192.0.2.1")
			b.Append(fm.Finalize())
		}
		sink.Send(b)
	}
	w.budget = 10000 // several lines and part of one
	send(0, 200)
	w.budget = 1 << 20
	send(200, 10)
	sink.Stop()
	lines := strings.Split(strings.TrimSuffix(w.out.String(), "\n"), "\n")
	whole, cut := 0, 0
	for i, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			if cut++; cut > 1 || i == len(lines)-1 || whole == 0 {
				t.Errorf("line %d is not JSON (%v): %q", i, err, l)
			}
			continue
		}
		whole++
	}
	if cut != 1 {
		t.Errorf("%d lines cut short, want the one the failed write cut", cut)
	}
	h := sink.Health()
	if uint64(whole) != h.Counters["flows-written"] || h.Counters["flows-written"]+h.Counters["flows-dropped"] != 210 {
		t.Errorf("%d whole lines printed; health %+v", whole, h)
	}
	if !slices.Contains(lines, `{"TimeReceived":"2023-11-14T22:16:40Z","SrcAddr":"192.0.2.1"}`) {
		t.Errorf("the second batch's first flow is not a line of its own:\n%s", w.out.String())
	}
}
