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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/capture/wire"
	"flowzero/internal/clock"
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

	cancelSources context.CancelFunc
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
		stopSender: make(chan struct{}), senderDone: make(chan struct{}), sourcesDone: make(chan struct{}),
	}
	a.q = newFrameQueue(cfg.BufferSize, cfg.FrameSize)
	a.senderCtx, a.cancelSender = context.WithCancel(context.Background())
	return a, nil
}

// Start starts the sources and the sender.
func (a *Agent) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancelSources = cancel
	var run func(ctx context.Context) error
	if len(a.cfg.Replay.Files) > 0 {
		run = a.runReplay
	} else {
		live, err := a.openLive()
		if err != nil {
			cancel()
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

// Done returns a channel closed once the sources end (replay finished, or a capture error
// that Err returns).
func (a *Agent) Done() <-chan struct{} { return a.sourcesDone }

// Err returns the error that ended the sources, once Done is closed.
func (a *Agent) Err() error {
	select {
	case <-a.sourcesDone:
		if errors.Is(a.sourcesErr, context.Canceled) {
			return nil
		}
		return a.sourcesErr
	default:
		return nil
	}
}

// Stop stops the sources, waits up to DrainTimeout for the server to acknowledge the
// buffered frames, then closes the connection. Packets never acknowledged are counted as
// agent drops.
func (a *Agent) Stop() error {
	a.stopOnce.Do(func() { a.stopErr = a.stop() })
	return a.stopErr
}

func (a *Agent) stop() error {
	a.cancelSources()
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
}

// registerInterface returns the agent-wide index of a capture interface.
func (a *Agent) registerInterface(name string, linkType uint16, snapLen uint32) uint32 {
	a.intfMu.Lock()
	defer a.intfMu.Unlock()
	for i, in := range a.intfs {
		if in.Name == name && in.LinkType == linkType {
			return uint32(i)
		}
	}
	if len(name) > wire.MaxNameLen {
		name = name[:wire.MaxNameLen]
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

// sendLoop connects, streams and reconnects with exponential backoff until Stop.
func (a *Agent) sendLoop() {
	defer close(a.senderDone)
	tick := time.NewTicker(a.cfg.Heartbeat)
	defer tick.Stop()
	go func() {
		for {
			select {
			case <-a.stopSender:
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
		conn, wel, err := a.connect()
		if err != nil {
			a.lastErr.Store(&err)
			a.log.Warn("connecting to capture server", "server", a.cfg.Server, "error", err, "retry", backoff)
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
			a.log.Info("capture stream ended", "error", err)
		}
	}
}

// jitter spreads reconnections of many agents by ±25 %.
func jitter(d time.Duration) time.Duration {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return d*3/4 + time.Duration(uint64(d/2)*uint64(binary.LittleEndian.Uint16(b[:]))>>16)
}

// RefusedError is a refusal by the server (LastError returns it).
type RefusedError struct{ Status wire.Status }

func (e RefusedError) Error() string { return "server refused the agent: " + e.Status.String() }

func (a *Agent) connect() (net.Conn, wire.Welcome, error) {
	var wel wire.Welcome
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	var conn net.Conn
	var err error
	ctx := a.senderCtx
	if a.tls != nil {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: a.tls}).DialContext(ctx, "tcp", a.cfg.Server)
	} else {
		conn, err = d.DialContext(ctx, "tcp", a.cfg.Server)
	}
	if err != nil {
		return nil, wel, err
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
		return nil, wel, err
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(hello); err != nil {
		conn.Close()
		return nil, wel, err
	}
	var b [wire.WelcomeLen]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		conn.Close()
		return nil, wel, fmt.Errorf("reading welcome: %w", err)
	}
	if wel, err = wire.ParseWelcome(b[:]); err != nil {
		conn.Close()
		return nil, wel, err
	}
	if wel.Status != wire.StatusOK {
		conn.Close()
		return nil, wel, RefusedError{wel.Status}
	}
	if a.cfg.Compress && wel.Capabilities&wire.CapZstd == 0 {
		conn.Close()
		return nil, wel, errors.New("server does not accept zstd frames")
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, wel, nil
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
