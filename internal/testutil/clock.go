package testutil

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"flowzero/internal/clock"
)

// ClockOffsetEnv moves the clock of every test that uses Clock or Now, as a Go duration
// ("960h" is 40 days). `make test-future` sets it together with faketime, which moves the
// embedded engine's clock by the same amount: Go's time.Now does not see faketime.
const ClockOffsetEnv = "FLOWZERO_TEST_CLOCK_OFFSET"

var offset = sync.OnceValue(func() time.Duration {
	v := os.Getenv(ClockOffsetEnv)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", ClockOffsetEnv, v, err))
	}
	return d
})

// Clock is the clock tests give the components they run: the machine's, moved by
// $FLOWZERO_TEST_CLOCK_OFFSET when set.
func Clock() clock.Clock {
	if d := offset(); d != 0 {
		return clock.Offset(d)
	}
	return clock.System{}
}

// Now is Clock().Now(): derive every time of a test from it, never mix it with a fixed date.
func Now() time.Time { return Clock().Now() }

// ManualClock is a clock that moves only when a test advances it, starting at Now(): for
// components that measure delays (a stall, an idle timeout) without the test waiting for them.
// It is safe for concurrent use.
type ManualClock struct {
	ns atomic.Int64
}

// NewManualClock returns a ManualClock set to Now().
func NewManualClock() *ManualClock {
	c := &ManualClock{}
	c.ns.Store(Now().UnixNano())
	return c
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
