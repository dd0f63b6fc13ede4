package lograte

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := New(3, 30*time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
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

func TestKeyed(t *testing.T) {
	k := NewKeyed[string](1, time.Minute, 2)
	now := time.Now()
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
