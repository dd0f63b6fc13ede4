// Package server accepts capture agents, authenticates them, writes their packets to pcapng
// (package capture/pcapng) and hands them to a PacketConsumer such as capture/flows.
package server

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/capture/pcapng"
	"flowzero/internal/clock"
	"flowzero/internal/health"
)

// Dependencies are what the server needs from its caller.
type Dependencies struct {
	// Stdout receives the pcapng stream when output.path is "-".
	Stdout io.Writer
	Logger *slog.Logger
	// Packets, when set, also receives every packet written (capture/flows turns them into
	// flows for the collector's pipeline).
	Packets PacketConsumer
	// Clock times idle agents, rotations and certificate checks (nil: the system's).
	Clock clock.Clock
}

// Server accepts agents and writes their packets to pcapng.
//
// Every frame an agent sends is written or its packets counted as server drops before the
// server acknowledges it (design: docs/design/capture.md). A frame with a malformed record
// is refused whole and acknowledged, since sending it again would fail again. Stop
// acknowledges what was written, so that agents resend exactly the rest to the next server.
type Server struct {
	cfg     Configuration
	deps    Dependencies
	log     *slog.Logger
	metrics *serverMetrics
	reasons [numReasons]reasonLog
	tls     *tls.Config
	clock   clock.Clock
	// handshakeTimeout bounds the TLS handshake and the hello together.
	handshakeTimeout time.Duration

	// stdoutDup is the pollable duplicate of stdout that output "-" writes to, if any; Stop
	// closes it.
	stdoutDup *os.File
	// fatal receives the error that ends the server's use: stdout's reader gone (see Err).
	fatal chan error

	ln       net.Listener
	stopping atomic.Bool
	wg       sync.WaitGroup
	done     chan struct{}

	mu     sync.Mutex
	agents map[string]*agentState
	conns  map[*serverConn]struct{}
	nconn  uint64 // connections accepted: their order, for eviction
	// series are the file series of the agents whose output closed at idle-close, for their
	// next output (per-agent output only): one small entry per agent name forgotten.
	series map[string]pcapng.Series
	active int // agents with a connection past the handshake: at most MaxAgents

	shared *outputFile // single-file mode

	// health is the server's state in /healthz: output failures and server drops as
	// events, FIFO outputs waiting for a reader as conditions.
	health       *health.State
	outputErrors atomic.Uint64 // failed writes and opens of the outputs, for /healthz
}

// agentState is what the server keeps about an agent name across its connections.
type agentState struct {
	name     string
	m        agentMetrics
	out      *outputFile
	conn     *serverConn   // the active connection
	gone     time.Time     // when conn became nil
	connect  int           // connections so far
	consumer AgentConsumer // deps.Packets' for this agent; called with out.mu held

	// Guarded by out.mu (only the active connection updates them).
	instance           uint64 // agent instance id of lastSeq and the drop baselines
	lastSeq            uint64
	lastKernel, lastAg uint64
	stats              AgentStats
	interfaces         int // pcapng interfaces of the agent in its output
}

// AgentStats are the server's counters for one agent name.
type AgentStats struct {
	Packets, Bytes, Frames            uint64
	DropKernel, DropAgent, DropServer uint64
	Connections                       int
}

// stopWriteGrace is how long Stop lets a write to a FIFO or pipe output wait for a stalled
// reader.
const stopWriteGrace = time.Second

// New validates the configuration and returns a server; Start listens.
func New(r prometheus.Registerer, cfg Configuration, deps Dependencies) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Stdout == nil {
		deps.Stdout = os.Stdout
	}
	clk := clock.Or(deps.Clock)
	tlsConf, err := newTLSConfig(cfg.TLS, clk)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, deps: deps, log: deps.Logger.With("component", "capture-server"),
		metrics: newServerMetrics(r), tls: tlsConf, clock: clk, done: make(chan struct{}),
		handshakeTimeout: handshakeTimeout,
		agents:           map[string]*agentState{}, conns: map[*serverConn]struct{}{},
		series: map[string]pcapng.Series{}, fatal: make(chan error, 1),
		health: health.NewState(clk),
	}
	if f, ok := deps.Stdout.(*os.File); ok && cfg.Output.Path == "-" {
		if p := pcapng.Pollable(f); p != f {
			s.deps.Stdout, s.stdoutDup = p, p
		}
	}
	s.reasons = newReasonLogs(s.metrics.errors)
	if !cfg.Output.PerAgent {
		s.shared = s.newOutputFile("")
	}
	return s, nil
}

// Start listens and accepts agents in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return err
	}
	s.ln = ln
	s.wg.Add(2)
	go s.acceptLoop()
	go s.flushLoop()
	return nil
}

// Addr returns the listening address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stop stops accepting, lets every connection finish the frame it is reading, flushes the
// files, acknowledges what was written and closes the connections; agents resend the rest
// to the next server.
func (s *Server) Stop() error {
	if s.stopping.Swap(true) {
		return nil
	}
	close(s.done)
	err := s.ln.Close()
	s.mu.Lock()
	for sc := range s.conns {
		sc.mu.Lock()
		sc.closed = true
		_ = sc.c.SetReadDeadline(time.Now())
		sc.mu.Unlock()
	}
	s.mu.Unlock()
	// A FIFO or pipe reader that stopped reading would hold a write, and Stop, forever: cut it
	// short; what cannot be written counts as server drops.
	for _, o := range s.outputs() {
		o.w.InterruptWrites(time.Now().Add(stopWriteGrace))
	}
	s.wg.Wait()
	s.tickConsumers(true)
	for _, o := range s.outputs() {
		o.mu.Lock()
		if cerr := o.w.Close(); cerr != nil && err == nil {
			err = cerr
		}
		o.mu.Unlock()
	}
	if s.stdoutDup != nil {
		// O_NONBLOCK belongs to the pipe, shared with whoever writes to it after this server.
		_ = pcapng.SetBlocking(s.stdoutDup)
		_ = s.stdoutDup.Close()
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Err returns a channel that receives an error when the server can no longer do its job and
// should be stopped: with output "-", the tool reading stdout went away (tcpdump -w - dies of
// SIGPIPE then; the server writes stdout through a duplicate descriptor, which gets EPIPE).
func (s *Server) Err() <-chan error { return s.fatal }

// Stats returns the counters of an agent name. Packets and Bytes count what the output has
// written out of its buffer (flushed every output.flush-interval).
func (s *Server) Stats(agent string) AgentStats {
	s.mu.Lock()
	st := s.agents[agent]
	s.mu.Unlock()
	if st == nil {
		return AgentStats{}
	}
	st.out.mu.Lock()
	defer st.out.mu.Unlock()
	stats := st.stats
	s.mu.Lock()
	stats.Connections = st.connect
	s.mu.Unlock()
	return stats
}

// Name names the server in /healthz.
func (s *Server) Name() string { return "capture-server" }

// Health implements health.Reporter: degraded while a FIFO output waits for a reader, and
// for health.Hold after an output failed or the server dropped packets. Its counters add up
// every agent the server knows now.
func (s *Server) Health() health.Report {
	r := s.health.Report()
	var total AgentStats
	s.mu.Lock()
	names := make([]string, 0, len(s.agents))
	for name := range s.agents {
		names = append(names, name)
	}
	connected := s.active
	s.mu.Unlock()
	for _, name := range names {
		st := s.Stats(name)
		total.Packets += st.Packets
		total.Bytes += st.Bytes
		total.DropServer += st.DropServer
		total.DropAgent += st.DropAgent
		total.DropKernel += st.DropKernel
	}
	r.Counters = map[string]uint64{
		"agents-connected": uint64(connected), "packets-written": total.Packets, "bytes-written": total.Bytes,
		"drops-server": total.DropServer, "drops-agent": total.DropAgent, "drops-kernel": total.DropKernel,
		"output-errors": s.outputErrors.Load(),
	}
	return r
}

// tickConsumers gives the packet consumers the time (flows time out).
func (s *Server) tickConsumers(stop bool) {
	if s.deps.Packets == nil {
		return
	}
	s.mu.Lock()
	states := make([]*agentState, 0, len(s.agents))
	for _, st := range s.agents {
		states = append(states, st)
	}
	s.mu.Unlock()
	now := s.clock.Now()
	for _, st := range states {
		st.out.mu.Lock()
		if st.consumer != nil {
			st.consumer.Tick(now, stop)
		}
		st.out.mu.Unlock()
	}
	s.deps.Packets.Flush()
}

func (s *Server) outputs() []*outputFile {
	if s.shared != nil {
		return []*outputFile{s.shared}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	outs := make([]*outputFile, 0, len(s.agents))
	for _, st := range s.agents {
		outs = append(outs, st.out)
	}
	return outs
}

func (s *Server) flushLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Output.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.flushOutputs()
		s.tickConsumers(false)
		s.closeIdleAgents(s.clock.Now())
	}
}

// closeIdleAgents closes the file of every agent disconnected for output.idle-close and
// forgets the agent (per-agent output only). The server's lock is held while a file closes,
// so that an agent coming back cannot open it before (its buffer was flushed long ago); the
// agents' consumers are closed after, without the locks, since they hand on what they hold
// (flows to the collector's sinks).
func (s *Server) closeIdleAgents(now time.Time) {
	if !s.cfg.Output.PerAgent || s.cfg.Output.IdleClose <= 0 {
		return
	}
	var idle []*agentState
	s.mu.Lock()
	for _, st := range s.agents {
		if st.conn == nil && now.Sub(st.gone) >= s.cfg.Output.IdleClose {
			idle = append(idle, st)
		}
	}
	s.mu.Unlock()
	var closing []AgentConsumer
	for _, st := range idle {
		st.out.mu.Lock()
		s.mu.Lock()
		if s.agents[st.name] == st && st.conn == nil { // it may have come back meanwhile
			// Its frames no longer wait for a FIFO reader.
			s.setNoReader(st.out, false)
			_ = st.out.w.Close()
			s.series[st.name] = st.out.w.Series
			delete(s.agents, st.name)
			s.metrics.forget(st.name)
			if st.consumer != nil {
				closing = append(closing, st.consumer)
				st.consumer = nil
			}
			s.log.Info("closed the file of an agent gone idle", "agent", st.name)
		}
		s.mu.Unlock()
		st.out.mu.Unlock()
	}
	for _, c := range closing {
		c.Close()
	}
	if len(closing) > 0 {
		s.deps.Packets.Flush()
	}
}

// flushOutputs writes out what every output buffers (errors are counted by the outputs).
func (s *Server) flushOutputs() {
	for _, o := range s.outputs() {
		o.mu.Lock()
		_ = o.w.Flush()
		o.mu.Unlock()
	}
}
