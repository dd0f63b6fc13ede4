package server

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"flowzero/capture/pcapng"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
)

// outputFile is one pcapng output and its lock.
type outputFile struct {
	mu sync.Mutex
	w  *pcapng.Writer
	// owners are the agents of the output's interfaces, by pcapng interface id: the output
	// settles packets per interface once it has written them out (or failed to).
	owners   []*agentState
	warn     *lograte.Limiter // one log line per outputWarnInterval; errors_total counts all
	noReader bool             // a FIFO output waits for a reader (outputs_waiting counts it)
	health   *health.State    // the server's
}

// outputWarnInterval spaces the logs of a failing output.
const outputWarnInterval = 10 * time.Second

// newOutputFile returns the output of agent ("" for the shared one) wired to the server's
// counters; called with s.mu held.
func (s *Server) newOutputFile(agent string) *outputFile {
	o := &outputFile{warn: lograte.New(1, outputWarnInterval), health: s.health}
	opts := pcapng.Options{Agent: agent, Stdout: s.deps.Stdout, Clock: s.clock, Settled: o.settled}
	if fs, ok := s.series[agent]; ok {
		opts.Series = fs // the agent is back after idle-close
		delete(s.series, agent)
	}
	opts.Failed = func(err error) {
		s.reasons[reasonOutput].count.Inc()
		if s.cfg.Output.Path == "-" && errors.Is(err, syscall.EPIPE) {
			// The tool reading stdout is gone: like tcpdump -w -, whose SIGPIPE ends it.
			select {
			case s.fatal <- fmt.Errorf("capture output: stdout reader gone: %w", err):
			default:
			}
		}
		s.outputErrors.Add(1)
		s.health.Event(fmt.Sprintf("writing the capture output failed: %v", err))
		if ok, suppressed := o.warn.Allow(s.clock.Now()); ok {
			s.log.Warn("writing capture output: buffered packets are dropped and counted", "agent", agent, "error", err, "suppressed", suppressed)
		}
	}
	opts.Repaired = func(name string, cut int64) {
		s.reasons[reasonOutputRepaired].count.Inc()
		s.log.Warn("capture output ended in an incomplete block (the last run stopped in the middle of a write): cut it off before appending",
			"path", name, "bytes-cut", cut)
	}
	o.w = pcapng.NewWriter(s.cfg.Output, opts)
	return o
}

// settled counts an interface's packets the output wrote out, or lost with a failed write,
// for its agent; called with o.mu held.
func (o *outputFile) settled(id int, c pcapng.Count, written bool) {
	st := o.owners[id]
	if !written {
		st.dropServer(c.Packets)
		return
	}
	st.stats.Packets += c.Packets
	st.stats.Bytes += c.Bytes
	st.m.packets.Add(float64(c.Packets))
	st.m.bytes.Add(float64(c.Bytes))
}

// setOwner records the agent of pcapng interface id; called with o.mu held.
func (o *outputFile) setOwner(id int, st *agentState) {
	for len(o.owners) <= id {
		o.owners = append(o.owners, nil)
	}
	o.owners[id] = st
}

// dropServer counts packets the server could not write, and reports them in /healthz;
// called with st.out.mu held.
func (st *agentState) dropServer(n uint64) {
	if n > 0 {
		st.stats.DropServer += n
		st.m.dropServer.Add(float64(n))
		st.out.health.Event(fmt.Sprintf("%d packets of agent %s dropped by the server (malformed frame, unknown interface or failed write), %d since it connected first",
			n, st.name, st.stats.DropServer))
	}
}

// setNoReader records whether the output, a FIFO, waits for a reader, in outputs_waiting
// and in /healthz; called with o.mu held.
func (s *Server) setNoReader(o *outputFile, noReader bool) {
	if noReader == o.noReader {
		return
	}
	o.noReader = noReader
	key := "no-reader " + o.w.Path()
	if noReader {
		s.metrics.outputsWaiting.Inc()
		s.health.Set(key, fmt.Sprintf("capture output %s is a FIFO without a reader: agents' frames wait", o.w.Path()))
	} else {
		s.metrics.outputsWaiting.Dec()
		s.health.Clear(key)
	}
}
