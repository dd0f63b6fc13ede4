package health

import (
	"testing"
	"time"

	"flowzero/internal/testutil"
)

// TestState: an event degrades the state for Hold, a condition until it is cleared; since
// moves only when the status changes; the reason lists what is wrong.
func TestState(t *testing.T) {
	clk := testutil.NewManualClock()
	start := clk.Now()
	s := NewState(clk)
	if r := s.Report(); r.Status != OK || !r.Since.Equal(start) || r.Reason != "" {
		t.Fatalf("new state %+v", r)
	}
	clk.Advance(time.Minute)
	s.Event("flows dropped")
	degradedAt := clk.Now()
	clk.Advance(10 * time.Second)
	s.Event("flows dropped again")
	r := s.Report()
	if r.Status != Degraded || !r.Since.Equal(degradedAt) || r.Reason != "flows dropped again (0s ago)" {
		t.Errorf("after two events %+v", r)
	}
	s.Set("topic", "cannot create the topic")
	clk.Advance(Hold)
	r = s.Report()
	if r.Status != Degraded || r.Reason != "cannot create the topic" || !r.Since.Equal(degradedAt) {
		t.Errorf("event held out, condition on: %+v", r)
	}
	s.Clear("topic")
	r = s.Report()
	if r.Status != OK || !r.Since.Equal(clk.Now()) {
		t.Errorf("all clear: %+v", r)
	}
	s.Clear("topic") // clearing twice is harmless
	s.Set("b", "second")
	s.Set("a", "first")
	s.Event("third")
	if r := s.Report(); r.Reason != "first; second; third (0s ago)" {
		t.Errorf("reason %q", r.Reason)
	}
}

type fixed struct {
	name string
	r    Report
}

func (f fixed) Name() string   { return f.name }
func (f fixed) Health() Report { return f.r }

func TestCollect(t *testing.T) {
	o := Collect([]Reporter{fixed{"a", Report{Status: OK}}, fixed{"b", Report{Status: Degraded, Reason: "x"}}})
	if o.Status != Degraded || len(o.Components) != 2 || o.Components["b"].Reason != "x" {
		t.Errorf("%+v", o)
	}
	if o := Collect([]Reporter{fixed{"a", Report{Status: OK}}}); o.Status != OK {
		t.Errorf("%+v", o)
	}
	if o := Collect(nil); o.Status != OK || o.Components == nil {
		t.Errorf("no component: %+v", o)
	}
}
