package httpserver

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	flowtest "flowzero/internal/testutil"
)

// TestLimiter: at most max requests run at once, queued more wait for a slot, the next
// ones are refused at once (429) and a waiting one whose wait runs out is refused (503),
// both with Retry-After and counted; unmatched requests pass freely.
func TestLimiter(t *testing.T) {
	l := NewLimiter(2, 1, time.Hour)
	l.Busy = prometheus.NewCounter(prometheus.CounterOpts{Name: "busy"})
	l.Timeout = prometheus.NewCounter(prometheus.CounterOpts{Name: "timeout"})
	l.InFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "inflight"})
	release := make(chan struct{})
	var running, most atomic.Int32
	h := l.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		running.Add(-1)
	}), func(r *http.Request) bool { return r.URL.Path != "/free" })
	srv := httptest.NewServer(h)
	defer srv.Close()

	codes := make(chan int, 3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + "/api")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	flowtest.WaitUntil(t, "two requests running and one queued", func() bool {
		return running.Load() == 2 && len(l.queue) == 1
	})
	resp, err := http.Get(srv.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a fourth request: %d, Retry-After %q; want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if v := testutil.ToFloat64(l.InFlight); v != 2 {
		t.Errorf("in flight %v, want 2", v)
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a request within the limit answered %d", c)
		}
	}
	if most.Load() != 2 {
		t.Errorf("%d requests ran at once, want 2", most.Load())
	}
	if resp, err := http.Get(srv.URL + "/free"); err != nil || resp.StatusCode != 200 {
		t.Errorf("unmatched request: %v %v", err, resp)
	}
	if v := testutil.ToFloat64(l.Busy); v != 1 {
		t.Errorf("busy refusals %v, want 1", v)
	}

	// A queued request whose wait ends before a slot frees: 503.
	l2 := NewLimiter(1, 1, 50*time.Millisecond)
	l2.Timeout = prometheus.NewCounter(prometheus.CounterOpts{Name: "timeout"})
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	srv2 := httptest.NewServer(l2.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-block
	}), nil))
	defer srv2.Close()
	go http.Get(srv2.URL)
	<-started
	resp, err = http.Get(srv2.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(block)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || testutil.ToFloat64(l2.Timeout) != 1 {
		t.Errorf("queued past its wait: %d, Retry-After %q, counted %v", resp.StatusCode, resp.Header.Get("Retry-After"), testutil.ToFloat64(l2.Timeout))
	}
}
