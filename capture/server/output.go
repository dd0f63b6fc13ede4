package server

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"flowzero/capture/pcapng"
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
}

// outputWarnInterval spaces the logs of a failing output.
const outputWarnInterval = 10 * time.Second

// newOutputFile returns the output of agent ("" for the shared one) wired to the server's
// counters; called with s.mu held.
func (s *Server) newOutputFile(agent string) *outputFile {
	o := &outputFile{warn: lograte.New(1, outputWarnInterval)}
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
		if ok, suppressed := o.warn.Allow(s.clock.Now()); ok {
			s.log.Warn("writing capture output: buffered packets are dropped and counted", "agent", agent, "error", err, "suppressed", suppressed)
		}
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

// dropServer counts packets the server could not write; called with st.out.mu held.
func (st *agentState) dropServer(n uint64) {
	if n > 0 {
		st.stats.DropServer += n
		st.m.dropServer.Add(float64(n))
	}
}
