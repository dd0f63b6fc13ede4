// Package health is how components tell the collector's /healthz whether they do their job:
// an output that cannot deliver or drops flows, a listener whose port another socket takes
// part of. Each component keeps a State, records its problems in it, and reports it through
// its Health method; /healthz answers 503 while any component is degraded, so that a load
// balancer or a watchdog can act, and its JSON body says which and why (docs/api.md).
//
// A problem comes in two kinds. A condition lasts until the component clears it (a topic it
// cannot create, records no broker acknowledges, a foreign socket on the port). An event
// (flows dropped, a failed write) happens and is over: the component stays degraded until
// Hold has passed without another, so that a problem every few seconds shows as one long
// degradation rather than a flapping status, and a monitoring system polling every 15 s or
// so sees it.
package health

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"flowzero/internal/clock"
)

// Status is a component's state.
type Status string

const (
	// OK: the component does its job.
	OK Status = "ok"
	// Degraded: the component loses or cannot deliver data, or shares its input.
	Degraded Status = "degraded"
)

// Report is a component's state as /healthz shows it.
type Report struct {
	// Status is ok or degraded.
	Status Status `json:"status"`
	// Reason says what is wrong (empty when ok); several problems are joined by "; ".
	Reason string `json:"reason,omitempty"`
	// Since is when the component entered its current status.
	Since time.Time `json:"since"`
	// Counters are the component's running totals (flows sent, delivered, dropped...), as
	// its metrics have them.
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// Reporter is a component /healthz asks for its state.
type Reporter interface {
	// Name identifies the component in /healthz (kafka, file, store, stdout, collector).
	Name() string
	// Health returns the component's state now.
	Health() Report
}

// Hold is how long a component stays degraded after its last problem event.
const Hold = 30 * time.Second

// State is a component's status, its conditions and its last problem event. It is safe for
// concurrent use; recording a problem takes a mutex, so record batches, not flows.
type State struct {
	clock clock.Clock
	hold  time.Duration

	mu         sync.Mutex
	status     Status
	since      time.Time
	conditions map[string]string
	event      string    // the last problem event
	eventAt    time.Time // when it happened
}

// NewState returns an ok State reading the time from c (clock.System{} when nil), with
// events held for Hold.
func NewState(c clock.Clock) *State {
	c = clock.Or(c)
	return &State{clock: c, hold: Hold, status: OK, since: c.Now(), conditions: map[string]string{}}
}

// SetClock changes the clock the State reads (before use: a component's clock may be
// given after its construction).
func (s *State) SetClock(c clock.Clock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = clock.Or(c)
	if s.status == OK && len(s.conditions) == 0 && s.eventAt.IsZero() {
		s.since = s.clock.Now()
	}
}

// Event records a problem that happened now (for example "1200 flows dropped: buffer full"):
// the component is degraded until Hold passes without another event.
func (s *State) Event(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.event, s.eventAt = reason, now
	s.update(now)
}

// Set records a lasting condition under key, with its reason, until Clear(key).
func (s *State) Set(key, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conditions[key] = reason
	s.update(s.clock.Now())
}

// Clear ends the condition key.
func (s *State) Clear(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conditions[key]; !ok {
		return
	}
	delete(s.conditions, key)
	s.update(s.clock.Now())
}

// Report returns the status, its reason and since when (Counters left nil).
func (s *State) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.update(now)
	r := Report{Status: s.status, Since: s.since.UTC()}
	if s.status == Degraded {
		r.Reason = s.reason(now)
	}
	return r
}

// update moves the status at now, keeping since when it does not change.
func (s *State) update(now time.Time) {
	st := OK
	if len(s.conditions) > 0 || (!s.eventAt.IsZero() && now.Sub(s.eventAt) < s.hold) {
		st = Degraded
	}
	if st != s.status {
		s.status, s.since = st, now
	}
}

func (s *State) reason(now time.Time) string {
	keys := make([]string, 0, len(s.conditions))
	for k := range s.conditions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, s.conditions[k])
	}
	if !s.eventAt.IsZero() && now.Sub(s.eventAt) < s.hold {
		parts = append(parts, fmt.Sprintf("%s (%s ago)", s.event, now.Sub(s.eventAt).Round(time.Second)))
	}
	return strings.Join(parts, "; ")
}

// Overall is the /healthz body: the overall status (degraded when any component is) and
// each component's report by name.
type Overall struct {
	Status     Status            `json:"status"`
	Components map[string]Report `json:"components"`
}

// Collect asks every reporter for its report.
func Collect(reporters []Reporter) Overall {
	o := Overall{Status: OK, Components: make(map[string]Report, len(reporters))}
	for _, r := range reporters {
		rep := r.Health()
		o.Components[r.Name()] = rep
		if rep.Status != OK {
			o.Status = Degraded
		}
	}
	return o
}

// Handler answers /healthz with report's answer: 200 when every component is ok, 503 when
// one is degraded, the Overall as indented JSON, never cached (docs/api.md). The collector
// and the capture agent and server serve it alike.
func Handler(report func() Overall) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		o := report()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if o.Status != OK {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(o)
	}
}
