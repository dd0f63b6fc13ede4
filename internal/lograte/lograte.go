// Package lograte rate-limits log lines on hot paths: a broken exporter sending thousands of
// bad datagrams per second must not flood the logs. A Limiter allows a burst of lines per
// window and tells the caller how many lines it suppressed since the last allowed one, so the
// next line can say so.
package lograte

import (
	"sync"
	"time"
)

// Limiter allows Burst events per Window. The zero value allows nothing: use New.
type Limiter struct {
	mu         sync.Mutex
	burst      int
	window     time.Duration
	start      time.Time
	n          int
	suppressed int
}

// New returns a limiter allowing burst events per window.
func New(burst int, window time.Duration) *Limiter {
	return &Limiter{burst: burst, window: window}
}

// Allow reports whether an event at now may be logged, and how many events were suppressed
// since the previous allowed one.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= l.window {
		l.start, l.n = now, 0
	}
	if l.n >= l.burst {
		l.suppressed++
		return false, 0
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// Keyed holds one Limiter per key (for example an exporter and an error reason), created on
// first use.
type Keyed[K comparable] struct {
	mu     sync.Mutex
	burst  int
	window time.Duration
	m      map[K]*Limiter
	max    int
	over   *Limiter // shared by keys beyond max
}

// NewKeyed returns limiters of burst per window for at most maxKeys keys; beyond that, keys
// share one limiter so a flood of distinct keys cannot grow memory without bound.
func NewKeyed[K comparable](burst int, window time.Duration, maxKeys int) *Keyed[K] {
	return &Keyed[K]{burst: burst, window: window, m: make(map[K]*Limiter), max: maxKeys, over: New(burst, window)}
}

// Allow is Limiter.Allow for key.
func (k *Keyed[K]) Allow(key K, now time.Time) (bool, int) {
	k.mu.Lock()
	l, ok := k.m[key]
	if !ok {
		if len(k.m) >= k.max {
			l = k.over
		} else {
			l = New(k.burst, k.window)
			k.m[key] = l
		}
	}
	k.mu.Unlock()
	return l.Allow(now)
}
