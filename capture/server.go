package capture

import (
	"bufio"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/capture/wire"
	"flowzero/internal/lograte"
)

// ServerDependencies are what the server needs from its caller.
type ServerDependencies struct {
	// Stdout receives the pcapng stream when output.path is "-".
	Stdout io.Writer
	Logger *slog.Logger
	// Packets, when set, also receives every packet written (capture/flows turns them into
	// flows for the collector's pipeline).
	Packets PacketConsumer
}

// Server accepts agents and writes their packets to pcapng.
type Server struct {
	cfg     ServerConfiguration
	deps    ServerDependencies
	log     *slog.Logger
	metrics *serverMetrics
	tls     *tls.Config

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
	// series are the file series of the agents whose output closed at idle-close, for their
	// next output (per-agent output only): one small entry per agent name forgotten.
	series map[string]fileSeries
	active int // agents with a connection past the handshake: at most MaxAgents

	shared *outputFile // single-file mode
}

// outputFile is one pcapng output and its lock.
type outputFile struct {
	mu sync.Mutex
	w  *pcapngOutput
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
	o := &outputFile{w: newPcapngOutput(s.cfg.Output, agent, s.deps.Stdout), warn: lograte.New(1, outputWarnInterval)}
	if fs, ok := s.series[agent]; ok {
		o.w.fileSeries = fs // the agent is back after idle-close
		delete(s.series, agent)
	}
	o.w.settled = o.settled
	o.w.failed = func(err error) {
		s.metrics.errors.WithLabelValues("output").Inc()
		if s.cfg.Output.Path == "-" && errors.Is(err, syscall.EPIPE) {
			// The tool reading stdout is gone: like tcpdump -w -, whose SIGPIPE ends it.
			select {
			case s.fatal <- fmt.Errorf("capture output: stdout reader gone: %w", err):
			default:
			}
		}
		if ok, suppressed := o.warn.Allow(time.Now()); ok {
			s.log.Warn("writing capture output: buffered packets are dropped and counted", "agent", agent, "error", err, "suppressed", suppressed)
		}
	}
	return o
}

// settled counts an interface's packets the output wrote out, or lost with a failed write,
// for its agent; called with o.mu held.
func (o *outputFile) settled(id int, c packetCount, written bool) {
	st := o.owners[id]
	if !written {
		st.dropServer(c.packets)
		return
	}
	st.stats.Packets += c.packets
	st.stats.Bytes += c.bytes
	st.m.packets.Add(float64(c.packets))
	st.m.bytes.Add(float64(c.bytes))
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
	stats              ServerAgentStats
	interfaces         int // pcapng interfaces of the agent in its output
}

// ServerAgentStats are the server's counters for one agent name.
type ServerAgentStats struct {
	Packets, Bytes, Frames            uint64
	DropKernel, DropAgent, DropServer uint64
	Connections                       int
}

type serverConn struct {
	c      net.Conn
	mu     sync.Mutex // orders deadline changes between the reader and Stop
	closed bool
	done   chan struct{}
	// takenOver is closed when a new connection of the same agent replaces this one.
	takenOver chan struct{}
}

// errTakenOver ends a connection replaced by a newer one of the same agent.
var errTakenOver = errors.New("a new connection of the agent took over")

// stopWriteGrace is how long Stop lets a write to a FIFO or pipe output wait for a stalled
// reader.
const stopWriteGrace = time.Second

// NewServer validates the configuration and returns a server; Start listens.
func NewServer(r prometheus.Registerer, cfg ServerConfiguration, deps ServerDependencies) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Stdout == nil {
		deps.Stdout = os.Stdout
	}
	tlsConf, err := serverTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, deps: deps, log: deps.Logger.With("component", "capture-server"),
		metrics: newServerMetrics(r), tls: tlsConf, done: make(chan struct{}),
		agents: map[string]*agentState{}, conns: map[*serverConn]struct{}{},
		series: map[string]fileSeries{}, fatal: make(chan error, 1),
	}
	if f, ok := deps.Stdout.(*os.File); ok && cfg.Output.Path == "-" {
		if p := pollable(f); p != f {
			s.deps.Stdout, s.stdoutDup = p, p
		}
	}
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
		o.w.interruptWrites(time.Now().Add(stopWriteGrace))
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
		_ = setBlocking(s.stdoutDup)
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
func (s *Server) Stats(agent string) ServerAgentStats {
	s.mu.Lock()
	st := s.agents[agent]
	s.mu.Unlock()
	if st == nil {
		return ServerAgentStats{}
	}
	st.out.mu.Lock()
	defer st.out.mu.Unlock()
	stats := st.stats
	s.mu.Lock()
	stats.Connections = st.connect
	s.mu.Unlock()
	return stats
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
	now := time.Now()
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
		s.closeIdleAgents(time.Now())
	}
}

// closeIdleAgents closes the file of every agent disconnected for output.idle-close and
// forgets the agent (per-agent output only). The server's lock is held while a file closes,
// so that an agent coming back cannot open it before (its buffer was flushed long ago).
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
	forgotten := false
	for _, st := range idle {
		st.out.mu.Lock()
		s.mu.Lock()
		if s.agents[st.name] == st && st.conn == nil { // it may have come back meanwhile
			if st.out.noReader {
				// Its frames no longer wait for a FIFO reader.
				st.out.noReader = false
				s.metrics.outputsWaiting.Dec()
			}
			_ = st.out.w.Close()
			s.series[st.name] = st.out.w.fileSeries
			delete(s.agents, st.name)
			s.metrics.forget(st.name)
			// Under s.mu too: an agent of that name coming back must get a fresh consumer,
			// not the one being forgotten.
			if st.consumer != nil {
				s.deps.Packets.Forget(st.name)
				forgotten = true
			}
			s.log.Info("closed the file of an agent gone idle", "agent", st.name)
		}
		s.mu.Unlock()
		st.out.mu.Unlock()
	}
	if forgotten {
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

// maxExtraHandshakes bounds the connections beyond max-agents that may be in their handshake
// (to be answered busy, or to replace an agent's connection); more are closed at once.
const maxExtraHandshakes = 64

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little, as net/http does.
			s.log.Warn("accepting agent", "error", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if s.tls != nil {
			c = tls.Server(c, s.tls) // the TLS handshake runs on the first read, in serve
		}
		sc := &serverConn{c: c, done: make(chan struct{}), takenOver: make(chan struct{})}
		s.mu.Lock()
		if len(s.conns) >= s.cfg.MaxAgents+maxExtraHandshakes || s.stopping.Load() {
			s.mu.Unlock()
			s.metrics.errors.WithLabelValues("too-many-connections").Inc()
			_ = c.Close()
			continue
		}
		s.conns[sc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(sc)
	}
}

// release ends sc as st's connection, unless a newer one took over: the agent is gone from
// then on (closeIdleAgents counts from st.gone) and its max-agents slot is free.
func (s *Server) release(st *agentState, sc *serverConn) {
	s.mu.Lock()
	if st.conn == sc {
		st.conn = nil
		st.gone = time.Now()
		s.active--
	}
	s.mu.Unlock()
}

func (s *Server) serve(sc *serverConn) {
	defer s.wg.Done()
	defer func() {
		_ = sc.c.Close()
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		close(sc.done)
	}()
	st, hello, err := s.handshake(sc)
	if err != nil {
		s.log.Info("agent refused", "remote", sc.c.RemoteAddr().String(), "error", err)
		return
	}
	s.metrics.connections.Inc()
	defer s.metrics.connections.Dec()
	defer s.release(st, sc)
	err = s.readFrames(sc, st, hello)
	switch {
	case err == nil, errors.Is(err, io.EOF):
	default:
		s.log.Info("agent stream ended", "agent", st.name, "error", err)
	}
}

// handshake reads the Hello, authenticates the agent and answers. An agent name already
// connected is taken over by the new connection (the old one is usually a dead peer whose
// disconnection the server has not noticed yet), even with max-agents connected; any other
// agent is then answered busy and tries again later.
func (s *Server) handshake(sc *serverConn) (*agentState, wire.Hello, error) {
	_ = sc.c.SetDeadline(time.Now().Add(10 * time.Second))
	h, err := wire.ReadHello(sc.c)
	if err != nil {
		s.metrics.errors.WithLabelValues("bad-hello").Inc()
		s.refuse(sc, wire.StatusMalformedHello)
		return nil, h, fmt.Errorf("reading hello: %w", err)
	}
	if h.Version != wire.Version {
		s.metrics.errors.WithLabelValues("version").Inc()
		s.refuse(sc, wire.StatusUnsupportedVersion)
		return nil, h, fmt.Errorf("agent %q: version %d", h.AgentName, h.Version)
	}
	if !s.authorized(h.Token) {
		s.metrics.errors.WithLabelValues("unauthorized").Inc()
		s.refuse(sc, wire.StatusUnauthorized)
		return nil, h, fmt.Errorf("agent %q: bad token", h.AgentName)
	}
	if err := (&AgentConfiguration{Name: h.AgentName}).validateName(); err != nil {
		s.metrics.errors.WithLabelValues("bad-hello").Inc()
		s.refuse(sc, wire.StatusMalformedHello)
		return nil, h, err
	}
	s.mu.Lock()
	st := s.agents[h.AgentName]
	if (st == nil || st.conn == nil) && s.active >= s.cfg.MaxAgents {
		s.mu.Unlock()
		s.metrics.errors.WithLabelValues("too-many-agents").Inc()
		s.refuse(sc, wire.StatusBusy)
		return nil, h, fmt.Errorf("agent %q: busy, max-agents (%d) connected", h.AgentName, s.cfg.MaxAgents)
	}
	if st == nil {
		st = &agentState{name: h.AgentName, m: s.metrics.forAgent(h.AgentName), out: s.shared}
		if st.out == nil {
			st.out = s.newOutputFile(h.AgentName)
		}
		s.agents[h.AgentName] = st
	}
	old := st.conn
	if old == nil {
		s.active++
	}
	st.conn = sc
	st.connect++
	if st.connect > 1 {
		st.m.reconnects.Inc()
	}
	s.mu.Unlock()
	if old != nil {
		close(old.takenOver)
		_ = old.c.Close()
		<-old.done
	}
	st.out.mu.Lock()
	if s.deps.Packets != nil {
		if st.consumer == nil {
			st.consumer = s.deps.Packets.ForAgent(h.AgentName)
		}
		if tcp, ok := sc.c.RemoteAddr().(*net.TCPAddr); ok {
			addr, _ := netip.AddrFromSlice(tcp.IP)
			st.consumer.Connected(addr.Unmap())
		}
	}
	if st.instance != h.AgentID {
		st.instance, st.lastSeq, st.lastKernel, st.lastAg = h.AgentID, 0, 0, 0
	}
	wel := wire.Welcome{Version: wire.Version, Capabilities: h.Capabilities & wire.CapZstd, LastSeq: st.lastSeq}
	st.out.mu.Unlock()
	if _, err := sc.c.Write(wire.AppendWelcome(nil, &wel)); err != nil {
		// The agent holds its max-agents slot since st.conn was set: give it back.
		s.release(st, sc)
		return nil, h, err
	}
	_ = sc.c.SetDeadline(time.Time{})
	return st, h, nil
}

func (s *Server) refuse(sc *serverConn, status wire.Status) {
	wel := wire.Welcome{Version: wire.Version, Status: status}
	_, _ = sc.c.Write(wire.AppendWelcome(nil, &wel))
}

func (s *Server) authorized(token string) bool {
	if len(s.cfg.Tokens) == 0 {
		return true
	}
	ok := 0
	for _, t := range s.cfg.Tokens {
		ok |= subtle.ConstantTimeCompare([]byte(t), []byte(token))
	}
	return ok == 1
}

// readFrames is the per-connection loop: read a frame, write its packets, acknowledge.
func (s *Server) readFrames(sc *serverConn, st *agentState, h wire.Hello) error {
	var dec *wire.Decompressor
	if h.Capabilities&wire.CapZstd != 0 {
		var err error
		if dec, err = wire.NewDecompressor(); err != nil {
			return err
		}
		defer dec.Close()
	}
	// Frames larger than the buffer are read straight into the frame reader's buffer.
	br := bufio.NewReaderSize(sc.c, 64<<10)
	fr := wire.NewFrameReader(br, dec)
	conn := connInterfaces{}
	ack := make([]byte, 0, wire.AckLen)
	var unacked, badFrames int
	for {
		sc.mu.Lock()
		if sc.closed {
			sc.mu.Unlock()
			return s.finish(sc, st)
		}
		_ = sc.c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		sc.mu.Unlock()
		fh, payload, err := fr.ReadFrame()
		var payloadErr error
		if errors.Is(err, wire.ErrPayload) {
			// Read whole, so the stream is still in step: the frame is dropped and
			// acknowledged below, or the agent would send it again forever.
			payloadErr, err = err, nil
		}
		if err != nil {
			if s.stopping.Load() {
				return s.finish(sc, st)
			}
			select {
			case <-sc.takenOver: // closed by the new connection: not the agent's error
				return errTakenOver
			default:
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				s.metrics.errors.WithLabelValues("truncated-frame").Inc()
			} else if !errors.Is(err, io.EOF) {
				s.metrics.errors.WithLabelValues("bad-frame").Inc()
			}
			return err
		}
		if !s.waitForReader(sc, st.out) {
			if s.stopping.Load() {
				return s.finish(sc, st)
			}
			return errTakenOver
		}
		st.out.mu.Lock()
		err = s.writeFrame(st, &conn, fh, payload, payloadErr)
		seq := st.lastSeq
		st.out.mu.Unlock()
		if err != nil {
			// The frame's length was right, so the stream is still in step: go on.
			s.metrics.errors.WithLabelValues("bad-frame").Inc()
			if badFrames++; badFrames == 1 {
				s.log.Warn("agent sent a malformed frame: its packets are dropped (logged once per connection)",
					"agent", st.name, "seq", fh.Seq, "error", err)
			}
		}
		if fh.Seq != 0 {
			unacked++
		}
		// Acknowledge once the agent's burst is consumed, and at least every 16 frames so
		// that a sustained stream (whose next frame is always partly buffered) is acknowledged
		// too.
		if unacked > 0 && (br.Buffered() == 0 || unacked >= 16) {
			ack = wire.AppendAck(ack[:0], seq)
			_ = sc.c.SetWriteDeadline(time.Now().Add(s.cfg.IdleTimeout))
			if _, err := sc.c.Write(ack); err != nil {
				return err
			}
			unacked = 0
		}
	}
}

// waitForReader holds a connection's frames back while its output is a FIFO that no reader has
// opened, as tcpdump -w does, trying the open again every reopenInterval without holding the
// output's lock. It returns false when the server stops or a new connection of the agent takes
// over: the frame in hand is then neither written nor acknowledged, and the agent sends it
// again.
func (s *Server) waitForReader(sc *serverConn, out *outputFile) bool {
	var retry *time.Timer
	for {
		out.mu.Lock()
		noReader := errors.Is(out.w.Open(), errNoReader)
		if noReader != out.noReader {
			out.noReader = noReader
			if noReader {
				s.metrics.outputsWaiting.Inc()
				s.log.Info("capture output has no reader: frames wait for one", "path", out.w.base)
			} else {
				s.metrics.outputsWaiting.Dec()
				s.log.Info("capture output has a reader", "path", out.w.base)
			}
		}
		out.mu.Unlock()
		if !noReader {
			return true
		}
		if retry == nil {
			retry = time.NewTimer(reopenInterval)
			defer retry.Stop()
		} else {
			retry.Reset(reopenInterval)
		}
		select {
		case <-s.done:
			return false
		case <-sc.takenOver:
			return false
		case <-retry.C:
		}
	}
}

// finish flushes the output and acknowledges everything written before closing a connection
// during Stop, so that the agent resends exactly the rest. Packets a failed flush loses are
// counted as server drops, so their frames are acknowledged too.
func (s *Server) finish(sc *serverConn, st *agentState) error {
	st.out.mu.Lock()
	_ = st.out.w.Flush()
	seq := st.lastSeq
	st.out.mu.Unlock()
	_ = sc.c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := sc.c.Write(wire.AppendAck(nil, seq))
	return err
}

// connInterfaces maps an agent's interface indexes to pcapng interface ids for one
// connection (agents announce their interfaces again on every connection).
type connInterfaces struct {
	small [64]int32 // index+1 → id+1 for the common small indexes
	large map[uint32]int
	n     int // indexes mapped
	// refusedLogged is set once an interface beyond max-interfaces-per-agent was logged.
	refusedLogged bool
}

func (c *connInterfaces) set(index uint32, id int) {
	if _, ok := c.get(index); !ok {
		c.n++
	}
	if index < uint32(len(c.small)) {
		c.small[index] = int32(id + 1)
		return
	}
	if c.large == nil {
		c.large = map[uint32]int{}
	}
	c.large[index] = id
}

func (c *connInterfaces) get(index uint32) (int, bool) {
	if index < uint32(len(c.small)) {
		id := int(c.small[index]) - 1
		return id, id >= 0
	}
	id, ok := c.large[index]
	return id, ok
}

// checkFrame decodes every record of a frame without writing anything, so that a frame with a
// malformed record is refused whole rather than written in part. It returns the number of
// packet records. For a refused frame that number also counts the records the header
// announces beyond the first bad one: they cannot be read, and agents send packets in frames
// of their own, so they are most likely packets.
func checkFrame(fh wire.FrameHeader, payload []byte) (packets uint64, err error) {
	var p wire.Packet
	records := uint32(0)
	for rest := payload; len(rest) > 0 && err == nil; records++ {
		var rec wire.Record
		if rec, rest, err = wire.NextRecord(rest); err != nil {
			break
		}
		switch rec.Type {
		case wire.RecordPacket:
			packets++
			err = rec.Packet(&p)
		case wire.RecordInterface:
			_, err = rec.Interface()
		case wire.RecordDropReport:
			_, err = rec.DropReport()
		}
	}
	if err != nil {
		if fh.Records > records {
			packets += uint64(fh.Records - records)
		}
		return packets, err
	}
	if records != fh.Records {
		return packets, wire.ErrRecordCount
	}
	return packets, nil
}

// writeFrame writes the records of one frame; called with st.out.mu held. A frame already
// written (resent after a reconnect whose acknowledgement was lost) is skipped. A frame that
// checkFrame refuses is not written at all: its packets count as server drops, and its
// sequence number is acknowledged like a written frame's, since sending it again would only
// fail again.
func (s *Server) writeFrame(st *agentState, conn *connInterfaces, fh wire.FrameHeader, payload []byte, payloadErr error) error {
	if fh.Seq != 0 && fh.Seq <= st.lastSeq {
		return nil
	}
	st.m.frames.Inc()
	st.stats.Frames++
	if fh.Seq != 0 {
		st.lastSeq = fh.Seq
	}
	if payloadErr != nil {
		// Packets cannot be told from other records in a payload that cannot be read: every
		// record the header announces counts as a dropped packet.
		st.dropServer(uint64(fh.Records))
		return payloadErr
	}
	if n, err := checkFrame(fh, payload); err != nil {
		st.dropServer(n)
		return err
	}
	var dropped uint64
	var p wire.Packet
	for rest := payload; len(rest) > 0; {
		// checkFrame has decoded every record: the errors below cannot happen.
		rec, next, err := wire.NextRecord(rest)
		if err != nil {
			break
		}
		rest = next
		switch rec.Type {
		case wire.RecordPacket:
			_ = rec.Packet(&p)
			id, ok := conn.get(p.Interface)
			if !ok {
				dropped++
				continue
			}
			if err := st.out.w.WritePacket(id, p.Timestamp, p.Length, p.Data); err != nil {
				dropped++
				continue
			}
			if st.consumer != nil {
				st.consumer.Packet(p.Interface, uint16(st.out.w.intfs[id].LinkType), p.Timestamp, p.Length, p.Data)
			}
		case wire.RecordInterface:
			in, _ := rec.Interface()
			id, known := st.out.w.interfaceID(st.name, in)
			_, mapped := conn.get(in.Index)
			// Interfaces new to the output, and indexes new to the connection (they could all
			// name one interface), are bounded alike.
			if (!known && st.interfaces >= s.cfg.MaxInterfacesPerAgent) || (!mapped && conn.n >= s.cfg.MaxInterfacesPerAgent) {
				s.metrics.tooManyInterfaces.Inc()
				if !conn.refusedLogged {
					conn.refusedLogged = true
					s.log.Warn("agent announced more interfaces than max-interfaces-per-agent: the others are refused and their packets dropped",
						"agent", st.name, "max-interfaces-per-agent", s.cfg.MaxInterfacesPerAgent, "interface", in.Name)
				}
				continue
			}
			if !known {
				// A write error is counted by the output; the interface keeps its id and the
				// next file describes it.
				id, _ = st.out.w.Interface(st.name, in)
				st.interfaces++
			}
			st.out.setOwner(id, st)
			conn.set(in.Index, id)
		case wire.RecordDropReport:
			d, _ := rec.DropReport()
			if d.Interface == wire.AllInterfaces {
				if d.Kernel > st.lastKernel {
					st.m.dropKernel.Add(float64(d.Kernel - st.lastKernel))
					st.stats.DropKernel += d.Kernel - st.lastKernel
					st.lastKernel = d.Kernel
				}
				if d.Agent > st.lastAg {
					st.m.dropAgent.Add(float64(d.Agent - st.lastAg))
					st.stats.DropAgent += d.Agent - st.lastAg
					st.lastAg = d.Agent
				}
			}
		case wire.RecordHeartbeat:
			// The read deadline was already pushed back by reading the frame.
		}
	}
	if st.consumer != nil {
		st.consumer.Tick(time.Now(), false)
	}
	st.dropServer(dropped)
	return nil
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
