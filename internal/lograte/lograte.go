// Package lograte rate-limits log lines on hot paths: a broken exporter sending thousands of
// bad datagrams per second must not flood the logs. A Limiter allows a burst of lines per
// window and tells the caller how many lines it suppressed since the last allowed one, so the
// next line can say so.
package lograte

import (
	"sync"
	"time"
)

// Limiter allows Burst events per Window. The zero value allows nothing: use New. A
// Limiter shared by goroutines on a hot path is best reached through a Local in each.
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
	ok, suppressed, _ = l.allow(now, 0)
	return ok, suppressed
}

// allow is Allow for an event at now and earlier events a Local refused by itself. When
// it refuses, until is the end of the spent window.
func (l *Limiter) allow(now time.Time, refused int) (ok bool, suppressed int, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.suppressed += refused
	if now.Sub(l.start) >= l.window {
		l.start, l.n = now, 0
	}
	if l.n >= l.burst {
		l.suppressed++
		return false, 0, l.start.Add(l.window)
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed, time.Time{}
}

// Local is one goroutine's access to a shared Limiter, for hot paths: once the limiter has
// refused, Local refuses by itself until the end of that window, touching nothing shared
// (no lock, no shared counter), and hands the events it refused to the limiter at the next
// call that reaches it, so they are reported as suppressed by a later allowed line. Get one
// from Limiter.Local; it is not safe for concurrent use.
type Local struct {
	l       *Limiter
	until   time.Time
	refused int
}

// Local returns a Local for l.
func (l *Limiter) Local() Local {
	return Local{l: l}
}

// Allow is Limiter.Allow.
func (g *Local) Allow(now time.Time) (ok bool, suppressed int) {
	if now.Before(g.until) {
		g.refused++
		return false, 0
	}
	ok, suppressed, g.until = g.l.allow(now, g.refused)
	g.refused = 0
	return ok, suppressed
}

// Spent reports whether the limiter refused within a window that is not over at now; the
// event is then counted as suppressed. It lets a caller with a second, finer limit (per
// key) skip that one's lock while the shared window is spent.
func (g *Local) Spent(now time.Time) bool {
	if now.Before(g.until) {
		g.refused++
		return true
	}
	return false
}

// Suppress counts an event that another limit refused, so that the next line allowed here
// reports it among the suppressed.
func (g *Local) Suppress() {
	g.refused++
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
