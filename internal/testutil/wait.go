package testutil

import (
	"testing"
	"time"
)

// WaitTimeout bounds WaitUntil. It is long because it only matters when a test is failing:
// CI machines have 2 shared cores and the race detector slows everything several times.
const WaitTimeout = 60 * time.Second

// WaitUntil polls cond until it returns true and fails the test, naming what it waited for,
// when WaitTimeout passes first. Use it instead of a sleep whenever a test waits for another
// goroutine or process: it returns as soon as the condition holds.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(WaitTimeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", WaitTimeout, what)
	}
}

// Poll calls cond until it returns true (true) or timeout passes (false), sleeping 1 ms at
// first and up to 50 ms between calls.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	return true
}
