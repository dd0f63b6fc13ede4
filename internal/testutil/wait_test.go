package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	var n atomic.Int32
	if !Poll(time.Minute, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("Poll gave up on a condition that became true")
	}
	if Poll(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
}

func TestClockOffset(t *testing.T) {
	if d := time.Until(Now()) - offset(); d > time.Second || d < -time.Second {
		t.Fatalf("Now is %s away from the machine's clock moved by $%s (%s)", d, ClockOffsetEnv, offset())
	}
}
