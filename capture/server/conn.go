package server

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"flowzero/capture/pcapng"
	"flowzero/capture/wire"
)

type serverConn struct {
	c net.Conn
	// raw is the TCP connection under c: eviction closes it without a TLS close_notify,
	// whose write could wait on the peer.
	raw    net.Conn
	remote string
	seq    uint64     // accept order
	mu     sync.Mutex // orders deadline changes between the reader and Stop
	closed bool
	done   chan struct{}
	// takenOver is closed when a new connection of the same agent replaces this one.
	takenOver chan struct{}
	// state is connHandshake until the connection sends an authorized hello (connAgent: it is
	// never evicted) or is closed to make room for a newer connection (connEvicted).
	state atomic.Int32
}

// serverConn states.
const (
	connHandshake int32 = iota
	connAgent
	connEvicted
)

func (sc *serverConn) evicted() bool { return sc.state.Load() == connEvicted }

// errTakenOver ends a connection replaced by a newer one of the same agent.
var errTakenOver = errors.New("a new connection of the agent took over")

// errAckWrite wraps the error of an acknowledgement that could not be written.
var errAckWrite = errors.New("writing an acknowledgement")

// maxExtraHandshakes bounds the connections beyond max-agents that may be in their handshake
// (to be answered busy, or to replace an agent's connection). At the bound, a new connection
// takes the place of the oldest one that has not sent an authorized hello, so that clients
// that connect and say nothing cannot keep agents out; it is refused only when every
// connection is an agent's.
const maxExtraHandshakes = 64

// handshakeTimeout bounds the TLS handshake and the hello, so that a client sending nothing
// (or a byte at a time) holds a connection only that long.
const handshakeTimeout = 10 * time.Second

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
			s.connError(reasonAccept, slog.LevelWarn, "accepting agent", "error", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		// With TLS, serve puts a tls.Server in c once it has seen the client's first bytes.
		sc := &serverConn{c: c, raw: c, remote: c.RemoteAddr().String(), done: make(chan struct{}), takenOver: make(chan struct{})}
		s.mu.Lock()
		if s.stopping.Load() {
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		if len(s.conns) >= s.cfg.MaxAgents+maxExtraHandshakes {
			old := s.evictOldestLocked()
			if old == nil {
				s.mu.Unlock()
				s.connError(reasonTooManyConnections, slog.LevelWarn,
					"connection refused: max-agents agents and 64 more connections are open, all of them agents'",
					"remote", sc.remote, "max-agents", s.cfg.MaxAgents)
				_ = c.Close()
				continue
			}
			// Counted and logged by its own goroutine when its read fails.
			_ = old.raw.Close()
		}
		s.nconn++
		sc.seq = s.nconn
		s.conns[sc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(sc)
	}
}

// evictOldestLocked marks evicted the oldest connection that has not sent an authorized hello
// and returns it, or nil; called with s.mu held.
func (s *Server) evictOldestLocked() *serverConn {
	for {
		var old *serverConn
		for sc := range s.conns {
			if sc.state.Load() == connHandshake && (old == nil || sc.seq < old.seq) {
				old = sc
			}
		}
		if old == nil || old.state.CompareAndSwap(connHandshake, connEvicted) {
			return old
		}
		// It sent its hello meanwhile: look again.
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
	st, hello, ok := s.handshake(sc)
	if !ok {
		return
	}
	s.metrics.connections.Inc()
	defer s.metrics.connections.Dec()
	defer s.release(st, sc)
	s.streamEnded(sc, st, s.readFrames(sc, st, hello))
}

// streamEnded counts and logs why an agent's stream ended.
func (s *Server) streamEnded(sc *serverConn, st *agentState, err error) {
	var nerr net.Error
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, errTakenOver):
	case errors.Is(err, errAckWrite):
		s.connError(reasonConnection, slog.LevelWarn,
			"agent connection closed: an acknowledgement could not be written (the agent stopped reading for idle-timeout, or went away)",
			"agent", st.name, "remote", sc.remote, "error", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		s.connError(reasonTruncatedFrame, slog.LevelWarn,
			"agent disconnected in the middle of a frame: the frame is lost unless the agent sends it again",
			"agent", st.name, "remote", sc.remote)
	case errors.As(err, &nerr) && nerr.Timeout():
		s.connError(reasonIdleTimeout, slog.LevelWarn,
			"agent connection closed: no frame, or no whole frame, received for idle-timeout",
			"agent", st.name, "remote", sc.remote, "idle-timeout", s.cfg.IdleTimeout)
	case errors.Is(err, wire.ErrFrameTooLong):
		s.connError(reasonFrameTooLong, slog.LevelWarn,
			"agent connection closed: a frame header announces more than the frame size limit",
			"agent", st.name, "remote", sc.remote, "limit", wire.MaxFramePayload, "error", err)
	case errors.Is(err, wire.ErrFrameHeader):
		s.connError(reasonBadFrame, slog.LevelWarn, "agent connection closed: malformed frame header",
			"agent", st.name, "remote", sc.remote, "error", err)
	default:
		s.connError(reasonConnection, slog.LevelWarn, "agent connection failed",
			"agent", st.name, "remote", sc.remote, "error", err)
	}
}

// handshake runs the TLS handshake, reads the Hello, authenticates the agent and answers;
// every refusal is counted and logged. An agent name already connected is taken over by the
// new connection (the old one is usually a dead peer whose disconnection the server has not
// noticed yet), even with max-agents connected; any other agent is then answered busy and
// tries again later.
func (s *Server) handshake(sc *serverConn) (*agentState, wire.Hello, bool) {
	sc.setDeadline(time.Now().Add(s.handshakeTimeout))
	h, ok := s.readHello(sc)
	if !ok {
		return nil, h, false
	}
	if h.Version != wire.Version {
		s.connError(reasonVersion, slog.LevelWarn, "agent refused: it speaks another version of the capture protocol: upgrade the older side",
			"agent", h.AgentName, "remote", sc.remote, "version", h.Version, "server-version", wire.Version)
		s.refuse(sc, wire.StatusUnsupportedVersion)
		return nil, h, false
	}
	if !s.authorized(h.Token) {
		s.connError(reasonUnauthorized, slog.LevelWarn, "agent refused: its token is not one of tokens",
			"agent", h.AgentName, "remote", sc.remote)
		s.refuse(sc, wire.StatusUnauthorized)
		return nil, h, false
	}
	if err := wire.CheckAgentName(h.AgentName); err != nil {
		s.connError(reasonBadHello, slog.LevelWarn, "agent refused: bad agent name",
			"remote", sc.remote, "error", err)
		s.refuse(sc, wire.StatusMalformedHello)
		return nil, h, false
	}
	if !sc.state.CompareAndSwap(connHandshake, connAgent) {
		s.readFailed(sc, "hello", net.ErrClosed) // evicted just before
		return nil, h, false
	}
	s.mu.Lock()
	st := s.agents[h.AgentName]
	if (st == nil || st.conn == nil) && s.active >= s.cfg.MaxAgents {
		s.mu.Unlock()
		s.connError(reasonTooManyAgents, slog.LevelInfo, "agent answered busy: max-agents agents are connected; it tries again later",
			"agent", h.AgentName, "remote", sc.remote, "max-agents", s.cfg.MaxAgents)
		s.refuse(sc, wire.StatusBusy)
		return nil, h, false
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
		if tcp, ok := sc.raw.RemoteAddr().(*net.TCPAddr); ok {
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
		s.connError(reasonConnection, slog.LevelWarn, "agent disconnected during its handshake",
			"agent", h.AgentName, "remote", sc.remote, "error", err)
		return nil, h, false
	}
	sc.setDeadline(time.Time{})
	return st, h, true
}

// readFailed counts and logs a handshake whose read failed: timed out, closed by the peer, or
// evicted for a newer connection.
func (s *Server) readFailed(sc *serverConn, what string, err error) {
	var nerr net.Error
	switch {
	case sc.evicted():
		s.connError(reasonEvicted, slog.LevelWarn,
			"connection closed before its hello: max-agents agents and 64 more connections were open, and a newer connection took its place",
			"remote", sc.remote, "max-agents", s.cfg.MaxAgents)
	case s.stopping.Load():
	case errors.As(err, &nerr) && nerr.Timeout():
		s.connError(reasonHandshakeTimeout, slog.LevelWarn, "connection closed: no complete "+what+" within the handshake timeout",
			"remote", sc.remote, "timeout", s.handshakeTimeout)
	default:
		s.connError(reasonBadHello, slog.LevelWarn, "connection closed during its "+what,
			"remote", sc.remote, "error", err)
	}
}

// setDeadline sets the connection's deadline, or ends it now when Stop has closed it.
func (sc *serverConn) setDeadline(t time.Time) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closed {
		t = time.Now()
	}
	_ = sc.c.SetDeadline(t)
}

// readHello reads an agent's Hello, after the TLS handshake on a TLS listener. The client's
// first bytes tell a Hello from a TLS ClientHello: each one sent to the other kind of listener
// is answered in plain text (status "TLS required" to a Hello; a Welcome, which the agent's
// TLS client finds where it expected a TLS record, to a ClientHello), so that both ends can
// say which side expects TLS. It reports whether the Hello can be answered; it counts and logs
// every refusal.
func (s *Server) readHello(sc *serverConn) (wire.Hello, bool) {
	var start [5]byte
	if _, err := io.ReadFull(sc.raw, start[:]); err != nil {
		s.readFailed(sc, "hello", err)
		return wire.Hello{}, false
	}
	var r io.Reader = io.MultiReader(bytes.NewReader(start[:]), sc.raw)
	switch {
	case s.tls == nil && wire.StartsTLS(start[:]):
		// The record's length follows its type and version (RFC 8446 section 5.1): read the
		// rest, so that closing leaves nothing unread, which would reset the connection before
		// the agent reads the answer.
		s.connError(reasonUnexpectedTLS, slog.LevelWarn,
			"connection refused: the agent speaks TLS but this listener does not: set tls.enable, tls.cert and tls.key on the server, or tls.enable: false on the agent",
			"remote", sc.remote)
		if _, err := io.CopyN(io.Discard, sc.raw, int64(binary.BigEndian.Uint16(start[3:]))); err == nil {
			s.refuse(sc, wire.StatusMalformedHello)
		}
		return wire.Hello{}, false
	case s.tls != nil && wire.StartsHello(start[:]):
		name := ""
		h, err := wire.ReadHello(r)
		if err == nil {
			name = h.AgentName
		}
		s.connError(reasonNotTLS, slog.LevelWarn,
			"agent refused: it connected without TLS but this listener requires TLS: set tls.enable: true and tls.ca on the agent",
			"agent", name, "remote", sc.remote)
		if err == nil {
			s.refuse(sc, wire.StatusTLSRequired)
		}
		return wire.Hello{}, false
	case s.tls != nil && !wire.StartsTLS(start[:]):
		s.connError(reasonNotTLS, slog.LevelWarn, "connection refused: neither TLS nor a capture agent on the TLS listener",
			"remote", sc.remote, "start", fmt.Sprintf("%q", start[:]))
		return wire.Hello{}, false
	case s.tls != nil:
		tc := tls.Server(&prefixConn{Conn: sc.raw, prefix: bytes.Clone(start[:])}, s.tls)
		sc.mu.Lock()
		sc.c = tc
		sc.mu.Unlock()
		if err := tc.Handshake(); err != nil {
			s.tlsFailed(sc, err)
			return wire.Hello{}, false
		}
		if _, err := io.ReadFull(tc, start[:]); err != nil {
			s.readFailed(sc, "hello", err)
			return wire.Hello{}, false
		}
		r = io.MultiReader(bytes.NewReader(start[:]), tc)
	}
	if !wire.StartsHello(start[:]) {
		s.connError(reasonBadHello, slog.LevelWarn, "connection refused: not a capture agent (its first bytes are not a hello)",
			"remote", sc.remote, "start", fmt.Sprintf("%q", start[:]))
		s.refuse(sc, wire.StatusMalformedHello)
		return wire.Hello{}, false
	}
	h, err := wire.ReadHello(r)
	if err != nil {
		if errors.Is(err, wire.ErrBadRecord) {
			s.connError(reasonBadHello, slog.LevelWarn, "agent refused: malformed hello", "remote", sc.remote, "error", err)
			s.refuse(sc, wire.StatusMalformedHello)
		} else {
			s.readFailed(sc, "hello", err)
		}
		return h, false
	}
	return h, true
}

// prefixConn is a connection whose first bytes were already read: Read returns them first.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// tlsFailed counts and logs a failed TLS handshake.
func (s *Server) tlsFailed(sc *serverConn, err error) {
	var nerr net.Error
	if sc.evicted() || s.stopping.Load() || (errors.As(err, &nerr) && nerr.Timeout()) {
		s.readFailed(sc, "TLS handshake", err)
		return
	}
	s.connError(reasonTLSHandshake, slog.LevelWarn, "TLS handshake with an agent failed",
		"remote", sc.remote, "error", err)
}

// refuse answers the agent with status. Callers count and log the refusal first, so that an
// agent that reads the answer finds it counted.
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
	conn := connInterfaces{refusedLog: s.reasons[reasonTooManyInterfaces].limit.Local()}
	badFrameLog := s.reasons[reasonBadFrame].limit.Local()
	var recs frameRecords
	ack := make([]byte, 0, wire.AckLen)
	var unacked int
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
			s.connErrorLocal(&badFrameLog, reasonBadFrame, slog.LevelWarn, "agent sent a malformed frame: its packets are dropped",
				"agent", st.name, "seq", fh.Seq, "error", refused)
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
				return fmt.Errorf("%w: %w", errAckWrite, err)
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
			s.setNoReader(out, noReader)
			if noReader {
				s.log.Info("capture output has no reader: frames wait for one", "path", out.w.Path())
			} else {
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
