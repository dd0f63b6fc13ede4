package lograte

import (
	"sync"
	"testing"
	"time"

	"flowzero/internal/testutil"
)

func TestLimiter(t *testing.T) {
	l := New(3, 30*time.Second)
	t0 := testutil.Now()
	for i := range 3 {
		if ok, _ := l.Allow(t0.Add(time.Duration(i) * time.Second)); !ok {
			t.Fatalf("event %d refused within the burst", i)
		}
	}
	for i := range 5 {
		if ok, _ := l.Allow(t0.Add(10 * time.Second)); ok {
			t.Fatalf("event %d allowed beyond the burst", i)
		}
	}
	ok, suppressed := l.Allow(t0.Add(31 * time.Second))
	if !ok || suppressed != 5 {
		t.Fatalf("after the window: ok=%v suppressed=%d, want true 5", ok, suppressed)
	}
}

// TestLocalSpentWindowTakesNoLock: once its limiter has refused, a Local refuses without
// the limiter's mutex until the window ends (hot paths of several goroutines share no
// lock), and the events it refused that way are still counted in the next allowed line.
func TestLocalSpentWindowTakesNoLock(t *testing.T) {
	l := New(1, 30*time.Second)
	g := l.Local()
	t0 := testutil.Now()
	g.Allow(t0)
	g.Allow(t0) // spends the window
	l.mu.Lock()
	done := make(chan bool)
	go func() {
		ok, _ := g.Allow(t0.Add(time.Second))
		done <- ok
	}()
	select {
	case ok := <-done:
		if ok {
			t.Error("allowed beyond the burst")
		}
	case <-time.After(testutil.WaitTimeout):
		l.mu.Unlock()
		<-done
		t.Fatal("Local.Allow waited for the limiter's mutex within a spent window")
	}
	l.mu.Unlock()
	if ok, suppressed := g.Allow(t0.Add(31 * time.Second)); !ok || suppressed != 2 {
		t.Fatalf("after the window: ok=%v suppressed=%d, want true 2", ok, suppressed)
	}
}

// TestLocalConcurrent: goroutines sharing a limiter, each through its own Local, are
// allowed the burst of a window between them, and every event refused, by a Local alone
// or by the limiter, is reported once in a later allowed line.
func TestLocalConcurrent(t *testing.T) {
	const goroutines, events = 8, 10000
	l := New(3, 30*time.Second)
	t0 := testutil.Now()
	var mu sync.Mutex
	allowed, reported, total := 0, 0, 0
	count := func(ok bool, suppressed int) {
		mu.Lock()
		defer mu.Unlock()
		total++
		if ok {
			allowed++
			reported += suppressed
		}
	}
	locals := make([]Local, goroutines)
	var wg sync.WaitGroup
	for i := range locals {
		locals[i] = l.Local()
		wg.Go(func() {
			for j := range events {
				count(locals[i].Allow(t0.Add(time.Duration(j) * time.Microsecond)))
			}
		})
	}
	wg.Wait()
	if allowed != 3 {
		t.Fatalf("%d events allowed in the first window, want 3", allowed)
	}
	// Each Local hands over what it refused at its next call after the window.
	for i := range locals {
		count(locals[i].Allow(t0.Add(time.Minute)))
	}
	count(l.Allow(t0.Add(2 * time.Minute)))
	if allowed != 3+3+1 || reported != total-allowed {
		t.Fatalf("%d of %d events allowed, %d reported suppressed, want 7 and %d", allowed, total, reported, total-allowed)
	}
}

func TestKeyed(t *testing.T) {
	k := NewKeyed[string](1, time.Minute, 2)
	now := testutil.Now()
	if ok, _ := k.Allow("a", now); !ok {
		t.Fatal("a refused")
	}
	if ok, _ := k.Allow("a", now); ok {
		t.Fatal("a allowed twice")
	}
	if ok, _ := k.Allow("b", now); !ok {
		t.Fatal("b refused: keys are independent")
	}
	k.Allow("c", now) // third key shares the overflow limiter
	if ok, _ := k.Allow("d", now); ok {
		t.Fatal("overflow keys must share one limiter")
	}
	if len(k.m) != 2 {
		t.Fatalf("%d limiters kept, want bounded to 2", len(k.m))
	}
}

// TestLocalSpentAndSuppress: Spent refuses (and counts) only within a spent window, and the
// events refused by another limit through Suppress are reported by the next allowed line.
func TestLocalSpentAndSuppress(t *testing.T) {
	l := New(2, 30*time.Second)
	g := l.Local()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if g.Spent(t0) {
		t.Fatal("spent before any event")
	}
	g.Suppress() // refused by another limit
	if ok, s := g.Allow(t0); !ok || s != 1 {
		t.Fatalf("first event: %v %d, want allowed with 1 suppressed", ok, s)
	}
	g.Allow(t0)
	if ok, _ := g.Allow(t0); ok {
		t.Fatal("third event allowed beyond the burst of 2")
	}
	for range 4 {
		if !g.Spent(t0.Add(time.Second)) {
			t.Fatal("not spent within the window")
		}
	}
	if g.Spent(t0.Add(31 * time.Second)) {
		t.Fatal("spent after the window")
	}
	if ok, s := g.Allow(t0.Add(31 * time.Second)); !ok || s != 5 {
		t.Fatalf("after the window: %v %d, want allowed with 5 suppressed", ok, s)
	}
}
