package collector

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// reportingSink is a memSink with a health state the test sets.
type reportingSink struct {
	memSink
	state *health.State
}

func (s *reportingSink) Name() string { return "fake" }
func (s *reportingSink) Health() health.Report {
	r := s.state.Report()
	r.Counters = map[string]uint64{"flows-dropped": 7}
	return r
}

// TestHealthz: /healthz answers 200 with every component ok, and 503 as soon as one is
// degraded, with a JSON body that names it, says why and since when, and gives its counters.
func TestHealthz(t *testing.T) {
	sink := &reportingSink{state: health.NewState(testutil.Clock())}
	extra := &reportingSink{state: health.NewState(testutil.Clock())}
	c, _, _ := startTestCollector(t, nil, func(d *Dependencies) {
		d.Sinks = []output.Sink{sink}
		d.Health = []health.Reporter{namedReporter{"routing", extra}}
	}, nil)
	defer c.Stop()
	code, o := healthz(t, c)
	if code != http.StatusOK || o.Status != health.OK || len(o.Components) != 3 {
		t.Fatalf("healthy: %d %+v", code, o)
	}
	for _, name := range []string{"collector", "fake", "routing"} {
		if r, ok := o.Components[name]; !ok || r.Status != health.OK || r.Since.IsZero() {
			t.Errorf("component %s: %+v", name, r)
		}
	}
	if _, ok := o.Components["collector"].Counters["datagrams"]; !ok {
		t.Errorf("collector counters %v", o.Components["collector"].Counters)
	}
	before := testutil.Now()
	sink.state.Event("flows dropped (buffer-full), 7 since start")
	code, o = healthz(t, c)
	f := o.Components["fake"]
	if code != http.StatusServiceUnavailable || o.Status != health.Degraded || f.Status != health.Degraded ||
		!strings.HasPrefix(f.Reason, "flows dropped (buffer-full), 7 since start") || f.Since.Before(before.Add(-time.Second)) ||
		f.Counters["flows-dropped"] != 7 || o.Components["collector"].Status != health.OK {
		t.Errorf("degraded: %d %+v", code, o)
	}
	resp, err := http.Get("http://" + c.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

type namedReporter struct {
	name string
	r    health.Reporter
}

func (n namedReporter) Name() string          { return n.name }
func (n namedReporter) Health() health.Report { return n.r.Health() }

// TestAPIConcurrencyBounded: past http.max-concurrent-requests API requests at once (and
// max-queued-requests waiting, none here), the next one is answered 429 with Retry-After
// and counted, while /metrics and /healthz still answer (the queue itself is tested with
// httpserver.Limiter).
func TestAPIConcurrencyBounded(t *testing.T) {
	release := make(chan struct{})
	running := make(chan struct{}, 2)
	c, _, _ := startTestCollector(t, func(cfg *Configuration) {
		cfg.HTTP.MaxConcurrentRequests, cfg.HTTP.MaxQueuedRequests = 2, 0
	}, func(d *Dependencies) {
		d.Handlers = map[string]http.Handler{"GET /api/v0/slow": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			running <- struct{}{}
			<-release
		})}
	}, nil)
	defer c.Stop()
	base := "http://" + c.HTTPAddr()
	done := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.Get(base + "/api/v0/slow")
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	<-running
	<-running
	resp, err := http.Get(base + "/api/v0/exporters")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a third API request: %d, Retry-After %q; want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, path := range []string{"/metrics", "/healthz"} {
		resp, err := http.Get(base + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s while the API is busy: %v %v", path, err, resp)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	if v := promtest.ToFloat64(c.metrics.apiInFlight); v != 2 {
		t.Errorf("API requests in flight %v, want 2", v)
	}
	close(release)
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("a request within the limit answered %d", code)
		}
	}
	if v := promtest.ToFloat64(c.metrics.httpRejected.WithLabelValues("busy")); v != 1 {
		t.Errorf("busy refusals counted %v, want 1", v)
	}
}

// TestDecodeErrorLogBounded: a flood of malformed datagrams, each with its own error text,
// from more sources than the per-exporter limit holds, logs a handful of lines from its very
// first datagrams (issue 24: 5,328 lines in the first second), and the next line after the
// window says how many were suppressed. The worker takes no lock and allocates nothing per
// refused line once the window's lines are spent.
func TestDecodeErrorLogBounded(t *testing.T) {
	logs := &lockedbuf.Buffer{}
	clk := testutil.NewManualClock()
	c, w, _ := newSocketlessWorker(t, nil)
	c.log = slog.New(slog.NewTextHandler(logs, nil))
	w.dec = variedErrors{}
	const sources, perSource = 5000, 4
	for i := range sources * perSource {
		w.now = clk.Now()
		a := [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
		w.handle([]byte{byte(i), byte(i >> 8)}, netipAddrPort(a, uint16(i%sources)))
	}
	n := strings.Count(logs.String(), `msg="cannot decode datagram"`)
	if n < 1 || n > 10 {
		t.Errorf("%d lines for %d malformed datagrams from %d sources, want 1 to 10", n, sources*perSource, sources)
	}
	if got := promtest.ToFloat64(c.metrics.decodeErrs.WithLabelValues("netflow")); got != sources*perSource {
		t.Errorf("decode errors counted %v, want %d", got, sources*perSource)
	}
	clk.Advance(31 * time.Second)
	w.now = clk.Now()
	w.handle([]byte{1}, netipAddrPort([4]byte{192, 0, 2, 1}, 2055))
	if !strings.Contains(logs.String(), "suppressed="+itoa(sources*perSource-n)) {
		t.Errorf("the line after the window does not count the %d suppressed:\n%s", sources*perSource-n, lastLine(logs.String()))
	}
	// Spent window: no allocation per malformed datagram.
	from, payload := netipAddrPort([4]byte{10, 0, 0, 1}, 1), []byte{2}
	for range 20 {
		w.handle(payload, from)
	}
	if a := testing.AllocsPerRun(1000, func() { w.handle(payload, from) }); a != 0 {
		t.Errorf("%v allocations per malformed datagram once the log window is spent", a)
	}
}

// variedErrors refuses every datagram with one of 256 distinct errors, chosen by its first
// byte, as random datagrams give a real decoder's errors varied texts.
type variedErrors struct{}

var variedErrorList = func() (errs [256]error) {
	for i := range errs {
		errs[i] = fmt.Errorf("fake: version %d unknown", i)
	}
	return errs
}()

func (variedErrors) Decode(payload []byte, _ netip.AddrPort, _ time.Time, _ *schema.FlowMessage, _ func(*schema.FlowMessage)) error {
	if len(payload) == 0 {
		return variedErrorList[0]
	}
	return variedErrorList[payload[0]]
}

func netipAddrPort(a [4]byte, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4(a), port)
}

func itoa(n int) string { return strconv.Itoa(n) }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
