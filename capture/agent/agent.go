// Package agent captures packets on network interfaces (AF_PACKET) or replays capture files,
// and streams them to a capture server in the framing of package capture/wire, keeping every
// frame until the server acknowledges it.
package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/capture/wire"
	"flowzero/internal/clock"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
)

// Agent captures or replays packets and streams them to a server.
//
// Sources (one goroutine per live interface, one for all replayed files) batch packets into
// frames of their own and push finished frames into a bounded queue. One sender goroutine
// writes queued frames to the server and keeps them until the server acknowledges them, so
// that a reconnect resends exactly what the server has not written. When the queue is full,
// live capture drops the new frame and counts its packets; replay waits while connected and
// until the first connection (files can wait, the kernel's ring cannot) and drops while
// disconnected after that.
type Agent struct {
	cfg     Configuration
	log     *slog.Logger
	metrics *metrics
	tls     *tls.Config
	clock   clock.Clock
	id      uint64

	q *frameQueue

	intfMu sync.Mutex
	intfs  []wire.Interface

	captured    atomic.Uint64
	kernelDrops atomic.Uint64
	connects    atomic.Uint64
	lastErr     atomic.Pointer[error]
	// fatal is the error the agent gave up on (the server refused its token).
	fatal atomic.Pointer[error]

	// health is the agent's state in /healthz; notedDrops and notedKernel are the drop
	// counts it has reported (guarded by q.mu).
	health                  *health.State
	notedDrops, notedKernel uint64

	// connLog and streamLog limit the lines about failed connections and ended streams.
	connLog, streamLog *lograte.Limiter

	cancelSources context.CancelCauseFunc
	sourcesDone   chan struct{} // closed when the sources end
	sourcesErr    error
	stopOnce      sync.Once
	stopErr       error
	stopSender    chan struct{}
	senderCtx     context.Context // cancelled with stopSender: interrupts dials and blocked writes
	cancelSender  context.CancelFunc
	senderDone    chan struct{}
}

// Stats are an agent's counters. After Stop, Captured = Sent + DroppedAgent.
type Stats struct {
	Captured, Sent, DroppedAgent, DroppedKernel uint64
	Connections                                 uint64
	BufferedBytes                               int
}

// Dependencies are what the agent needs from its caller.
type Dependencies struct {
	Logger *slog.Logger
	// Clock dates heartbeats and checks the server's certificate (nil: the system's).
	Clock clock.Clock
}

// Connection log lines are limited to logBurst per logWindow for each kind (failed
// connections, ended streams), the first burst included; the next line allowed says how many
// were suppressed, and connection_errors_total counts them all.
const (
	logBurst  = 3
	logWindow = 30 * time.Second
)

// New validates the configuration and returns an agent; Start runs it.
func New(r prometheus.Registerer, cfg Configuration, deps Dependencies) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.Default()
	}
	clk := clock.Or(deps.Clock)
	tlsConf, err := newTLSConfig(cfg.TLS, cfg.Server, clk)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	a := &Agent{
		cfg: cfg, log: logger.With("component", "capture-agent", "agent", cfg.Name),
		metrics: newMetrics(r), tls: tlsConf, clock: clk, id: binary.LittleEndian.Uint64(id[:]) | 1,
		connLog: lograte.New(logBurst, logWindow), streamLog: lograte.New(logBurst, logWindow),
		stopSender: make(chan struct{}), senderDone: make(chan struct{}), sourcesDone: make(chan struct{}),
		health: health.NewState(clk),
	}
	a.q = newFrameQueue(cfg.BufferSize, cfg.FrameSize)
	a.senderCtx, a.cancelSender = context.WithCancel(context.Background())
	return a, nil
}

// Start starts the sources and the sender.
func (a *Agent) Start() error {
	ctx, cancel := context.WithCancelCause(context.Background())
	a.cancelSources = cancel
	var run func(ctx context.Context) error
	if len(a.cfg.Replay.Files) > 0 {
		run = a.runReplay
	} else {
		live, err := a.openLive()
		if err != nil {
			cancel(err)
			return err
		}
		run = live
	}
	go a.sendLoop()
	go func() {
		a.sourcesErr = run(ctx)
		close(a.sourcesDone)
	}()
	return nil
}

// Done returns a channel closed once the sources end: replay finished, a capture error, or
// the agent gave up because the server refused its token (see Err).
func (a *Agent) Done() <-chan struct{} { return a.sourcesDone }

// Err returns, once Done is closed, the error the agent gave up on, or the one that ended the
// sources.
func (a *Agent) Err() error {
	select {
	case <-a.sourcesDone:
	default:
		return nil
	}
	if p := a.fatal.Load(); p != nil {
		return *p
	}
	if errors.Is(a.sourcesErr, context.Canceled) {
		return nil
	}
	return a.sourcesErr
}

// giveUp stops the agent's sending for good: its sources stop, Done is closed and Err (and
// Stop) return err.
func (a *Agent) giveUp(err error) {
	a.fatal.Store(&err)
	a.log.Error("capture agent stops", "server", a.cfg.Server, "error", err)
	a.q.senderGone()
	a.cancelSources(err)
}

// Stop stops the sources, waits up to DrainTimeout for the server to acknowledge the
// buffered frames, then closes the connection. Packets never acknowledged are counted as
// agent drops.
func (a *Agent) Stop() error {
	a.stopOnce.Do(func() { a.stopErr = a.stop() })
	return a.stopErr
}

func (a *Agent) stop() error {
	a.cancelSources(nil)
	var err error
	select {
	case <-a.sourcesDone:
		err = a.Err()
	case <-time.After(a.cfg.DrainTimeout):
		// A replay waiting for room in a queue that does not drain (no server): drop.
		a.q.abort()
		select {
		case <-a.sourcesDone:
			err = a.Err()
		case <-time.After(time.Second):
			err = errors.New("capture agent: sources did not stop")
		}
	}
	a.q.waitEmpty(a.cfg.DrainTimeout)
	close(a.stopSender)
	a.cancelSender()
	a.q.wake()
	<-a.senderDone
	a.q.dropAll()
	a.publishQueueStats()
	if p := a.fatal.Load(); p != nil {
		err = *p
	}
	return err
}

// Stats returns the agent's counters.
func (a *Agent) Stats() Stats {
	a.q.mu.Lock()
	defer a.q.mu.Unlock()
	return Stats{
		Captured: a.captured.Load(), Sent: a.q.acked, DroppedAgent: a.q.dropped,
		DroppedKernel: a.kernelDrops.Load(), Connections: a.connects.Load(), BufferedBytes: a.q.bytes,
	}
}

// LastError returns the last connection error (nil once connected).
func (a *Agent) LastError() error {
	if p := a.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// publishQueueStats moves the queue's counters to the metrics.
func (a *Agent) publishQueueStats() {
	a.q.mu.Lock()
	defer a.q.mu.Unlock()
	a.metrics.sent.Add(float64(a.q.acked - a.q.pubAcked))
	a.metrics.dropAgent.Add(float64(a.q.dropped - a.q.pubDropped))
	a.q.pubAcked, a.q.pubDropped = a.q.acked, a.q.dropped
	a.metrics.buffered.Set(float64(a.q.bytes))
	a.noteDrops()
}

// noteDrops records packets dropped since the last call as a health event; called with q.mu
// held.
func (a *Agent) noteDrops() {
	dropped, kernel := a.q.dropped, a.kernelDrops.Load()
	if dropped == a.notedDrops && kernel == a.notedKernel {
		return
	}
	a.health.Event(fmt.Sprintf("%d packets dropped by the agent (send buffer full or server unreachable) and %d by the kernel, %d and %d since start",
		dropped-a.notedDrops, kernel-a.notedKernel, dropped, kernel))
	a.notedDrops, a.notedKernel = dropped, kernel
}

// Name names the agent in /healthz.
func (a *Agent) Name() string { return "capture-agent" }

// Health implements health.Reporter: degraded while the agent is not connected to its
// server, and for health.Hold after it or the kernel dropped packets.
func (a *Agent) Health() health.Report {
	if err := a.LastError(); err != nil {
		a.health.Set("connection", fmt.Sprintf("not connected to %s: %v", a.cfg.Server, err))
	} else {
		a.health.Clear("connection")
	}
	a.q.mu.Lock()
	a.noteDrops()
	a.q.mu.Unlock()
	st := a.Stats()
	r := a.health.Report()
	r.Counters = map[string]uint64{
		"captured": st.Captured, "sent": st.Sent, "drops-agent": st.DroppedAgent, "drops-kernel": st.DroppedKernel,
		"connections": st.Connections, "buffered-bytes": uint64(st.BufferedBytes),
	}
	return r
}

// registerInterface returns the agent-wide index of a capture interface.
func (a *Agent) registerInterface(name string, linkType uint16, snapLen uint32) uint32 {
	name = wire.InterfaceName(name) // the server refuses longer names and control characters
	a.intfMu.Lock()
	defer a.intfMu.Unlock()
	for i, in := range a.intfs {
		if in.Name == name && in.LinkType == linkType {
			return uint32(i)
		}
	}
	a.intfs = append(a.intfs, wire.Interface{Index: uint32(len(a.intfs)), LinkType: linkType, SnapLength: snapLen, Name: name})
	return uint32(len(a.intfs) - 1)
}

func (a *Agent) interfaces(from int) []wire.Interface {
	a.intfMu.Lock()
	defer a.intfMu.Unlock()
	return append([]wire.Interface(nil), a.intfs[from:]...)
}

// emitter batches one source's packets into frames.
type emitter struct {
	a       *Agent
	fb      wire.FrameBuilder
	comp    *wire.Compressor
	block   bool // wait for room in the queue while connected (replay)
	packets uint64
	pkt     wire.Packet
}

func (a *Agent) newEmitter(block bool) (*emitter, error) {
	e := &emitter{a: a, block: block}
	if a.cfg.Compress {
		c, err := wire.NewCompressor()
		if err != nil {
			return nil, err
		}
		e.comp = c
	}
	e.fb.Buf = a.q.getBuf()
	e.fb.Reset(0)
	return e, nil
}

// packet appends one packet to the current frame and sends the frame once full.
func (e *emitter) packet(index uint32, ts int64, length uint32, data []byte) {
	e.pkt = wire.Packet{Timestamp: ts, Length: length, Interface: index, Data: data}
	e.fb.Buf = wire.AppendPacket(e.fb.Buf, &e.pkt)
	e.fb.Records++
	e.packets++
	if e.fb.PayloadLen() >= e.a.cfg.FrameSize {
		e.flush()
	}
}

// flush queues the current frame, if any.
func (e *emitter) flush() {
	if e.fb.Records == 0 {
		return
	}
	if _, err := e.fb.Finish(e.comp); err != nil {
		// Only a frame over MaxFramePayload fails, which FrameSize's bound rules out.
		e.a.q.countDrops(e.packets)
	} else {
		// The queue keeps the frame's buffer until the server acknowledges it.
		frame := e.fb.Take(e.a.q.getBuf())
		e.a.captured.Add(e.packets)
		e.a.metrics.captured.Add(float64(e.packets))
		e.a.q.push(frame, e.packets, e.block)
	}
	e.packets = 0
	e.fb.Reset(0)
}

// sendLoop connects, streams and reconnects with exponential backoff until Stop, or until
// the server refuses the agent's token (unless retry-unauthorized).
func (a *Agent) sendLoop() {
	defer close(a.senderDone)
	tick := time.NewTicker(a.cfg.Heartbeat)
	defer tick.Stop()
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		for {
			select {
			case <-a.stopSender:
				return
			case <-ended:
				return
			case <-tick.C:
				a.q.heartbeat()
				a.publishQueueStats()
			}
		}
	}()
	backoff := a.cfg.ReconnectMin
	for {
		select {
		case <-a.stopSender:
			return
		default:
		}
		conn, wel, reason, err := a.connect()
		if err != nil {
			if a.senderCtx.Err() != nil {
				return // Stop interrupted the attempt
			}
			a.lastErr.Store(&err)
			a.metrics.connectErrors[reason].Inc()
			if reason == connUnauthorized && !a.cfg.RetryUnauthorized {
				a.giveUp(fmt.Errorf("%w; the agent stops (set retry-unauthorized: true, or the flag -retry-unauthorized, to keep trying)", err))
				return
			}
			if ok, suppressed := a.connLog.Allow(a.clock.Now()); ok {
				a.logSuppressed(slog.LevelWarn, suppressed, "connecting to capture server", "server", a.cfg.Server, "error", err, "retry", backoff)
			}
			select {
			case <-a.stopSender:
				return
			case <-time.After(jitter(backoff)):
			}
			backoff = min(2*backoff, a.cfg.ReconnectMax)
			continue
		}
		a.lastErr.Store(nil)
		backoff = a.cfg.ReconnectMin
		if a.connects.Add(1) > 1 {
			a.metrics.reconnects.Inc()
		}
		a.metrics.connected.Set(1)
		err = a.stream(conn, wel)
		a.metrics.connected.Set(0)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			a.lastErr.Store(&err)
			a.metrics.connectErrors[connStream].Inc()
			if ok, suppressed := a.streamLog.Allow(a.clock.Now()); ok {
				a.logSuppressed(slog.LevelInfo, suppressed, "capture stream ended", "server", a.cfg.Server, "error", err)
			}
		}
	}
}

// logSuppressed logs a rate-limited line, saying how many lines of its kind were suppressed
// before it.
func (a *Agent) logSuppressed(level slog.Level, suppressed int, msg string, args ...any) {
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	a.log.Log(context.Background(), level, msg, args...)
}

// jitter spreads reconnections of many agents by ±25 %.
func jitter(d time.Duration) time.Duration {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return d*3/4 + time.Duration(uint64(d/2)*uint64(binary.LittleEndian.Uint16(b[:]))>>16)
}

// RefusedError is a refusal by the server (LastError returns it).
type RefusedError struct{ Status wire.Status }

func (e RefusedError) Error() string {
	msg := "server refused the agent: " + e.Status.String()
	switch e.Status {
	case wire.StatusUnauthorized:
		return msg + ": the agent's token is not one of the server's tokens (agent key token, flag -token-file)"
	case wire.StatusTLSRequired:
		return msg + ": the server requires TLS; set tls.enable: true and tls.ca on the agent"
	case wire.StatusUnsupportedVersion:
		return msg + ": the agent and the server speak different versions of the capture protocol"
	case wire.StatusBusy:
		return msg + ": max-agents agents are connected to the server"
	}
	return msg
}

// Errors of a connection whose two ends disagree about TLS.
var (
	errServerNotTLS = errors.New("the server answered without TLS: it does not serve TLS; set tls.enable: false on the agent, or tls.enable, tls.cert and tls.key on the server")
	errServerTLS    = errors.New("the server answered with TLS: it requires TLS; set tls.enable: true and tls.ca on the agent")
)

// connect connects and handshakes; on error it says why, as connection_errors_total's reason.
func (a *Agent) connect() (net.Conn, wire.Welcome, connReason, error) {
	var wel wire.Welcome
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	var conn net.Conn
	var err error
	ctx := a.senderCtx
	if a.tls != nil {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: a.tls}).DialContext(ctx, "tcp", a.cfg.Server)
		if err != nil {
			var rec tls.RecordHeaderError
			var op *net.OpError
			switch {
			case errors.As(err, &rec) && wire.StartsWelcome(rec.RecordHeader[:]):
				return nil, wel, connServerNotTLS, errServerNotTLS
			case errors.As(err, &op) && op.Op == "dial":
				return nil, wel, connDial, err
			}
			return nil, wel, connTLS, fmt.Errorf("TLS handshake with the server: %w", err)
		}
	} else {
		conn, err = d.DialContext(ctx, "tcp", a.cfg.Server)
		if err != nil {
			return nil, wel, connDial, err
		}
	}
	// Stop interrupts the handshake at once.
	stopHandshake := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stopHandshake()
	caps := uint16(0)
	if a.cfg.Compress {
		caps |= wire.CapZstd
	}
	hello, err := wire.AppendHello(nil, &wire.Hello{Version: wire.Version, Capabilities: caps, AgentID: a.id, AgentName: a.cfg.Name, Token: a.cfg.Token})
	if err != nil {
		conn.Close()
		return nil, wel, connRefused, err
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(hello); err != nil {
		conn.Close()
		return nil, wel, connDial, err
	}
	var b [wire.WelcomeLen]byte
	n, err := io.ReadFull(conn, b[:])
	if err != nil || !wire.StartsWelcome(b[:]) {
		conn.Close()
		reason, err := a.noWelcome(b[:n], err)
		return nil, wel, reason, err
	}
	if wel, err = wire.ParseWelcome(b[:]); err != nil {
		conn.Close()
		return nil, wel, connNoWelcome, err
	}
	if wel.Status != wire.StatusOK {
		conn.Close()
		reason := connRefused
		switch wel.Status {
		case wire.StatusUnauthorized:
			reason = connUnauthorized
		case wire.StatusTLSRequired:
			reason = connTLSRequired
		case wire.StatusBusy:
			reason = connBusy
		}
		return nil, wel, reason, RefusedError{wel.Status}
	}
	if a.cfg.Compress && wel.Capabilities&wire.CapZstd == 0 {
		conn.Close()
		return nil, wel, connRefused, errors.New("server does not accept zstd frames")
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, wel, 0, nil
}

// noWelcome says why got, what the server answered to the hello, is no welcome: a TLS
// server's answer to an agent without TLS, an end of connection (a TLS server that is not
// flowzero's, which answers status "TLS required"), or not a capture server.
func (a *Agent) noWelcome(got []byte, err error) (connReason, error) {
	switch {
	case a.tls == nil && wire.StartsTLS(got):
		return connTLSRequired, errServerTLS
	case a.tls == nil && len(got) == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return connNoWelcome, fmt.Errorf("reading welcome: %w: the server closed the connection without answering the hello; "+
			"if it requires TLS, set tls.enable: true and tls.ca on the agent", err)
	case err != nil:
		return connNoWelcome, fmt.Errorf("reading welcome: %w", err)
	}
	return connNoWelcome, fmt.Errorf("the server's answer starts with %q, not a capture welcome: is %s a capture server?", got[:4], a.cfg.Server)
}

// stream sends frames on one connection until it fails or Stop.
func (a *Agent) stream(conn net.Conn, wel wire.Welcome) error {
	a.q.startConnection(wel.LastSeq)
	// After Stop, a write blocked on a server that stopped reading gets one more second (for
	// the last drop report) instead of the full write timeout.
	stopWrites := context.AfterFunc(a.senderCtx, func() { _ = conn.SetWriteDeadline(time.Now().Add(time.Second)) })
	defer stopWrites()
	ackDone := make(chan struct{})
	go func() {
		defer close(ackDone)
		a.readAcks(conn)
	}()
	defer func() {
		// Acknowledgements the server sent before the connection ended (a stopping server
		// acknowledges all it wrote, then closes) may still wait in the socket: read them
		// first, or the next server is sent frames this one wrote. Half-closing tells the
		// server we are done; the deadline bounds the wait for one that does not answer.
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		<-ackDone
		a.q.endConnection()
		conn.Close()
	}()
	var ctl wire.FrameBuilder
	announced := 0
	control := func(hb bool) error {
		ctl.Reset(0)
		for _, in := range a.interfaces(announced) {
			var err error
			if ctl.Buf, err = wire.AppendInterface(ctl.Buf, &in); err != nil {
				return err
			}
			ctl.Records++
			announced++
		}
		if hb {
			ctl.Buf = wire.AppendHeartbeat(ctl.Buf, &wire.Heartbeat{Time: a.clock.Now().UnixNano(), Captured: a.captured.Load()})
			ctl.Buf = wire.AppendDropReport(ctl.Buf, &wire.DropReport{Interface: wire.AllInterfaces, Kernel: a.kernelDrops.Load(), Agent: a.q.droppedCount()})
			ctl.Records += 2
		}
		if ctl.Records == 0 {
			return nil
		}
		frame, err := ctl.Finish(nil)
		if err != nil {
			return err
		}
		_ = conn.SetWriteDeadline(a.writeDeadline())
		_, err = conn.Write(frame)
		return err
	}
	if err := control(true); err != nil {
		return err
	}
	var iov net.Buffers
	for {
		frames, hb, stop := a.q.nextBatch(a.stopSender, iov[:0])
		if stop {
			// A last drop report so the server's counters are exact after a clean stop.
			return control(true)
		}
		if err := control(hb); err != nil {
			return err
		}
		if len(frames) == 0 {
			continue
		}
		_ = conn.SetWriteDeadline(a.writeDeadline())
		iov = frames
		if _, err := iov.WriteTo(conn); err != nil {
			return err
		}
		iov = frames[:0]
	}
}

// writeDeadline bounds a write: three heartbeats, or one second once stopping.
func (a *Agent) writeDeadline() time.Time {
	if a.senderCtx.Err() != nil {
		return time.Now().Add(time.Second)
	}
	return time.Now().Add(a.cfg.Heartbeat * 3)
}

// readAcks applies the server's acknowledgements until the connection fails.
func (a *Agent) readAcks(conn net.Conn) {
	defer a.q.connectionBroken()
	var b [wire.AckLen]byte
	for {
		if _, err := io.ReadFull(conn, b[:]); err != nil {
			return
		}
		rec, _, err := wire.NextRecord(b[:])
		if err != nil {
			return
		}
		if seq, err := rec.Ack(); err == nil {
			a.q.ack(seq)
		}
	}
}
