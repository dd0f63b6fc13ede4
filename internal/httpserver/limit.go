package httpserver

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limiter bounds the requests a server works on at once: a request takes one of Max slots,
// or waits for one among at most Queued others, for at most Wait; beyond that it is
// refused at once with 429 Too Many Requests, and a request that waited Wait in vain with
// 503 Service Unavailable, both with Retry-After: 1 and counted. A waiting request holds a
// goroutine and its connection, not its body, which it has not read yet: memory grows with
// the work done, not with the clients that ask.
type Limiter struct {
	run   chan struct{}
	queue chan struct{}
	wait  time.Duration

	// Busy and Timeout count refused requests (429, 503); InFlight the requests served
	// now. Each may be nil.
	Busy, Timeout prometheus.Counter
	InFlight      prometheus.Gauge
}

// NewLimiter returns a limiter of max requests at once with queued more waiting at most
// wait. max must be at least 1.
func NewLimiter(max, queued int, wait time.Duration) *Limiter {
	return &Limiter{run: make(chan struct{}, max), queue: make(chan struct{}, queued), wait: wait}
}

// Wrap returns h behind the limiter for the requests match accepts (every request when
// match is nil); the others go straight to h.
func (l *Limiter) Wrap(h http.Handler, match func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if match != nil && !match(r) {
			h.ServeHTTP(w, r)
			return
		}
		if !l.acquire(w, r) {
			return
		}
		defer l.release()
		h.ServeHTTP(w, r)
	})
}

// acquire takes a slot, waiting in the queue when there is room; otherwise it answers the
// request and returns false.
func (l *Limiter) acquire(w http.ResponseWriter, r *http.Request) bool {
	select {
	case l.run <- struct{}{}:
		l.inFlight(1)
		return true
	default:
	}
	select {
	case l.queue <- struct{}{}:
	default:
		refuse(w, l.Busy, http.StatusTooManyRequests, "too many requests at once: retry in a second")
		return false
	}
	defer func() { <-l.queue }()
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.run <- struct{}{}:
		l.inFlight(1)
		return true
	case <-t.C:
		refuse(w, l.Timeout, http.StatusServiceUnavailable, "the server stayed busy: retry in a second")
	case <-r.Context().Done(): // the client left
	}
	return false
}

func (l *Limiter) release() {
	<-l.run
	l.inFlight(-1)
}

func (l *Limiter) inFlight(d float64) {
	if l.InFlight != nil {
		l.InFlight.Add(d)
	}
}

func refuse(w http.ResponseWriter, c prometheus.Counter, code int, msg string) {
	if c != nil {
		c.Inc()
	}
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write([]byte(`{"message":"` + msg + `"}` + "\n"))
}
