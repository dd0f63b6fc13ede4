package store

import (
	"fmt"
	"sync/atomic"

	"flowzero/internal/health"
)

// healthCounts are the sink's totals for its health report, beside the Prometheus counters.
type healthCounts struct {
	inserted, dropped atomic.Int64
}

// countDropped counts flows the sink lost and records it for the health report.
func (s *Sink) countDropped(flows int, why string) {
	s.counts.dropped.Add(int64(flows))
	s.health.Event(fmt.Sprintf("%s; %d flows dropped since start", why, s.counts.dropped.Load()))
}

// Health implements health.Reporter: degraded for health.Hold after flows were dropped (a
// full insert queue, an INSERT the engine refused, malformed flows).
func (s *Sink) Health() health.Report {
	r := s.health.Report()
	r.Counters = map[string]uint64{
		"flows-inserted": uint64(s.counts.inserted.Load()), "flows-dropped": uint64(s.counts.dropped.Load()),
	}
	return r
}
