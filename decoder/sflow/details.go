package sflow

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Bounds of the state kept for ExporterDetails, per (exporter, agent): spoofed sub-agent IDs
// or data sources cannot grow it without limit. What does not fit is not tracked (decoding
// is not affected).
const (
	maxSubAgents        = 16
	maxSourcesPerAgent  = 256
	seenSourcesPerBatch = 16
)

// AgentDetails describes an sFlow agent seen behind an exporter address, as served by the
// collector's /api/v0/exporters.
type AgentDetails struct {
	// Agent is the agent address of the datagrams, or "other" for the agents beyond
	// max-agents.
	Agent     string            `json:"agent"`
	SubAgents []SubAgentDetails `json:"sub-agents"`
}

// SubAgentDetails describes one sub-agent of an agent.
type SubAgentDetails struct {
	ID           uint32    `json:"id"`
	Datagrams    uint64    `json:"datagrams"`
	LastDatagram time.Time `json:"last-datagram"`
	// SequenceNumber and UptimeMs are those of the last datagram.
	SequenceNumber uint32 `json:"sequence-number"`
	UptimeMs       uint32 `json:"uptime-ms"`
	// DataSources are the sources of the flow samples, with the sampling rate of the last.
	DataSources []DataSourceDetails `json:"data-sources"`
}

// DataSourceDetails is one data source (sFlow v5 §5 sflow_data_source: type 0 ifIndex, 1
// smonVlanDataSource, 2 entPhysicalEntry) of flow samples.
type DataSourceDetails struct {
	Type         uint32    `json:"type"`
	Index        uint32    `json:"index"`
	SamplingRate uint32    `json:"sampling-rate"`
	Samples      uint64    `json:"samples"`
	LastSample   time.Time `json:"last-sample"`
}

// agentDetails is what an agentState remembers for ExporterDetails. A datagram collects its
// data sources on the stack and takes the lock once, at its end.
type agentDetails struct {
	mu        sync.Mutex
	subAgents map[uint32]*subAgentState
	sources   int // data sources over all sub-agents, bounded by maxSourcesPerAgent
}

type subAgentState struct {
	datagrams    uint64
	lastDatagram int64
	sequence     uint32
	uptime       uint32
	sources      map[sourceID]*sourceState
}

type sourceID struct {
	typ, index uint32
}

type sourceState struct {
	rate       uint32
	samples    uint64
	lastSample int64
}

// seenSource is a data source seen in the datagram being decoded.
type seenSource struct {
	id      sourceID
	rate    uint32
	samples uint32
}

// seen records a flow sample of a data source in the datagram's batch.
func (g *datagram) seen(id sourceID, rate uint32) {
	for i := range g.nSeen {
		if s := &g.seenSources[i]; s.id == id {
			s.rate = rate
			s.samples++
			return
		}
	}
	if g.nSeen == len(g.seenSources) {
		g.commitDetails(false)
	}
	g.seenSources[g.nSeen] = seenSource{id: id, rate: rate, samples: 1}
	g.nSeen++
}

// commitDetails adds the datagram's batch to the agent's state; datagram is true once per
// datagram (the last call), to count it.
func (g *datagram) commitDetails(datagram bool) {
	a := &g.agent.details
	a.mu.Lock()
	defer a.mu.Unlock()
	sa := a.subAgents[g.subAgent]
	if sa == nil {
		if len(a.subAgents) >= maxSubAgents {
			g.nSeen = 0
			return
		}
		if a.subAgents == nil {
			a.subAgents = map[uint32]*subAgentState{}
		}
		sa = &subAgentState{sources: map[sourceID]*sourceState{}}
		a.subAgents[g.subAgent] = sa
	}
	if datagram {
		sa.datagrams++
		sa.lastDatagram, sa.sequence, sa.uptime = int64(g.ts), g.sequence, g.uptime
	}
	for _, s := range g.seenSources[:g.nSeen] {
		st := sa.sources[s.id]
		if st == nil {
			if a.sources >= maxSourcesPerAgent {
				continue
			}
			st = &sourceState{}
			sa.sources[s.id] = st
			a.sources++
		}
		st.rate, st.lastSample = s.rate, int64(g.ts)
		st.samples += uint64(s.samples)
	}
	g.nSeen = 0
}

// snapshot returns the details of one agent state.
func (a *agentState) snapshot() AgentDetails {
	out := AgentDetails{Agent: a.agent, SubAgents: []SubAgentDetails{}}
	d := &a.details
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, sa := range d.subAgents {
		sd := SubAgentDetails{
			ID:             id,
			Datagrams:      sa.datagrams,
			LastDatagram:   jsonTime(sa.lastDatagram),
			SequenceNumber: sa.sequence,
			UptimeMs:       sa.uptime,
			DataSources:    make([]DataSourceDetails, 0, len(sa.sources)),
		}
		for k, s := range sa.sources {
			sd.DataSources = append(sd.DataSources, DataSourceDetails{
				Type: k.typ, Index: k.index, SamplingRate: s.rate, Samples: s.samples,
				LastSample: jsonTime(s.lastSample),
			})
		}
		slices.SortFunc(sd.DataSources, func(x, y DataSourceDetails) int {
			return cmp.Or(cmp.Compare(x.Type, y.Type), cmp.Compare(x.Index, y.Index))
		})
		out.SubAgents = append(out.SubAgents, sd)
	}
	slices.SortFunc(out.SubAgents, func(x, y SubAgentDetails) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// ExporterDetails returns what was seen from the agents behind an exporter address (a
// []AgentDetails sorted by agent), or nil when nothing was. Safe to call while datagrams are
// decoded; meant for the HTTP API, not for a hot path.
func (d *Decoder) ExporterDetails(addr netip.Addr) any {
	addr = addr.Unmap()
	t := &d.agents
	t.mu.RLock()
	var states []*agentState
	for k, s := range t.states {
		if k.exporter == addr {
			states = append(states, s)
		}
	}
	if s := t.overflow[addr]; s != nil {
		states = append(states, s)
	}
	t.mu.RUnlock()
	if len(states) == 0 {
		return nil
	}
	out := make([]AgentDetails, 0, len(states))
	for _, s := range states {
		out = append(out, s.snapshot())
	}
	slices.SortFunc(out, func(x, y AgentDetails) int { return cmp.Compare(x.Agent, y.Agent) })
	return out
}

// jsonTime returns the time of unix seconds, or the zero time when JSON cannot hold its year
// (the receive time comes from the caller, which may replay odd captures).
func jsonTime(sec int64) time.Time {
	if sec < -62135596800 || sec > 253402300799 { // 0001-01-01 to 9999-12-31
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}
