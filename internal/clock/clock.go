// Package clock is the time source components read, so that tests can run them at another
// date: production code gets System, a test an Offset (see internal/testutil.Clock).
package clock

import "time"

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the machine's clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Offset is the machine's clock moved by a fixed duration: a run "40 days ahead" uses
// Offset(40 * 24 * time.Hour), beside faketime for the C++ engine, whose clock Go does not see.
type Offset time.Duration

// Now returns time.Now() moved by the offset.
func (o Offset) Now() time.Time { return time.Now().Add(time.Duration(o)) }

// Or returns c, or System when c is nil, for components whose dependencies leave it unset.
func Or(c Clock) Clock {
	if c == nil {
		return System{}
	}
	return c
}
