package server

import (
	"bufio"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"flowzero/capture/pcapng"
	"flowzero/capture/wire"
)

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
		st.gone = s.clock.Now()
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
	if err := wire.CheckAgentName(h.AgentName); err != nil {
		s.metrics.errors.WithLabelValues("bad-hello").Inc()
		s.refuse(sc, wire.StatusMalformedHello)
		return nil, h, fmt.Errorf("agent name %w", err)
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

// readFrames is the per-connection loop: read a frame, decode it, write its packets,
// acknowledge.
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
	var recs frameRecords
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
		var refused error
		var refusedPackets uint64
		if errors.Is(err, wire.ErrPayload) {
			// Read whole, so the stream is still in step: the frame is dropped and
			// acknowledged below, or the agent would send it again forever. Packets cannot be
			// told from other records in a payload that cannot be read: every record the
			// header announces counts as a dropped packet.
			refused, refusedPackets, err = err, uint64(fh.Records), nil
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
		if refused == nil {
			// Decoded before taking the output's lock, which agents may share.
			if n, err := recs.decode(fh, payload); err != nil {
				refused, refusedPackets = err, n
			}
		}
		if !s.waitForReader(sc, st.out) {
			if s.stopping.Load() {
				return s.finish(sc, st)
			}
			return errTakenOver
		}
		st.out.mu.Lock()
		refused = s.writeFrame(st, &conn, fh, &recs, refused, refusedPackets)
		seq := st.lastSeq
		st.out.mu.Unlock()
		if refused != nil {
			// The frame's length was right, so the stream is still in step: go on.
			s.metrics.errors.WithLabelValues("bad-frame").Inc()
			if badFrames++; badFrames == 1 {
				s.log.Warn("agent sent a malformed frame: its packets are dropped (logged once per connection)",
					"agent", st.name, "seq", fh.Seq, "error", refused)
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
// opened, as tcpdump -w does, trying the open again every pcapng.ReopenInterval without
// holding the output's lock. It returns false when the server stops or a new connection of
// the agent takes over: the frame in hand is then neither written nor acknowledged, and the
// agent sends it again.
func (s *Server) waitForReader(sc *serverConn, out *outputFile) bool {
	var retry *time.Timer
	for {
		out.mu.Lock()
		noReader := errors.Is(out.w.Open(), pcapng.ErrNoReader)
		if noReader != out.noReader {
			out.noReader = noReader
			if noReader {
				s.metrics.outputsWaiting.Inc()
				s.log.Info("capture output has no reader: frames wait for one", "path", out.w.Path())
			} else {
				s.metrics.outputsWaiting.Dec()
				s.log.Info("capture output has a reader", "path", out.w.Path())
			}
		}
		out.mu.Unlock()
		if !noReader {
			return true
		}
		if retry == nil {
			retry = time.NewTimer(pcapng.ReopenInterval)
			defer retry.Stop()
		} else {
			retry.Reset(pcapng.ReopenInterval)
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
