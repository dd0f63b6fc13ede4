package bmp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/health"
	"flowzero/internal/lograte"
	"flowzero/rib"
)

// Server accepts BMP sessions from routers and applies their route monitoring to a Table.
type Server struct {
	cfg     Configuration
	table   *rib.RIB
	log     *slog.Logger
	metrics *metrics
	rds     map[RD]struct{} // nil: accept every RD

	mu       sync.Mutex
	listener net.Listener
	conns    map[*session]struct{}
	stale    map[*session]*time.Timer // closed sessions whose routes are kept for Keep
	owners   map[rib.PeerID]*session  // the session feeding each RIB peer
	stopping bool
	wg       sync.WaitGroup

	connLog *lograte.Keyed[string] // refused, timed-out and uninitiated connections, by reason

	// health is degraded for health.Hold after a router's session was lost.
	health *health.State
	lost   atomic.Uint64 // router sessions lost since start
}

// New returns a BMP server writing routes to table. Metrics are registered on reg. The
// configuration is expected to be validated (internal/config does it when decoding).
func New(reg prometheus.Registerer, cfg Configuration, table *rib.RIB, logger *slog.Logger) (*Server, error) {
	if table == nil {
		return nil, errors.New("bmp: nil table")
	}
	m, err := newMetrics(reg, table)
	if err != nil {
		return nil, fmt.Errorf("bmp metrics: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		cfg:     cfg,
		table:   table,
		log:     logger.With("component", "bmp"),
		metrics: m,
		conns:   make(map[*session]struct{}),
		stale:   make(map[*session]*time.Timer),
		owners:  make(map[rib.PeerID]*session),
		connLog: lograte.NewKeyed[string](3, 30*time.Second, 8),
		health:  health.NewState(nil),
	}
	if len(cfg.RDs) > 0 {
		s.rds = make(map[RD]struct{}, len(cfg.RDs))
		for _, rd := range cfg.RDs {
			s.rds[rd] = struct{}{}
		}
	}
	return s, nil
}

// keepAlive finds routers that vanished (power loss, a cut link) without closing their
// session: BMP has no keepalive of its own and a silent router is normal, so TCP's probes are
// what tells a dead peer from a quiet one: about two minutes after the last segment.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: time.Minute, Interval: 15 * time.Second, Count: 4}

// Start listens on the configured address and serves routers in the background.
func (s *Server) Start() error {
	lc := net.ListenConfig{KeepAliveConfig: keepAlive}
	l, err := lc.Listen(context.Background(), "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("bmp: listen on %s: %w", s.cfg.Listen, err)
	}
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
	s.adoptRestored()
	s.log.Info("listening for BMP sessions", "listen", l.Addr().String())
	s.wg.Add(1)
	go s.acceptLoop(l)
	return nil
}

// Addr returns the listening address (useful with port 0), nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Stop closes the listener and every session and waits for them. Routes are left in the
// table: the process is going away and the RIB snapshot should keep what it knew.
func (s *Server) Stop() error {
	s.mu.Lock()
	s.stopping = true
	l := s.listener
	for c := range s.conns {
		c.conn.Close()
	}
	for c, t := range s.stale {
		t.Stop()
		delete(s.stale, c)
	}
	s.mu.Unlock()
	var err error
	if l != nil {
		err = l.Close()
	}
	s.wg.Wait()
	return err
}

func (s *Server) acceptLoop(l net.Listener) {
	defer s.wg.Done()
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accept failed", "err", err)
			time.Sleep(50 * time.Millisecond) // out of file descriptors: do not spin
			continue
		}
		remote, _ := netip.ParseAddrPort(conn.RemoteAddr().String())
		router := netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
		if !s.serveConn(conn, router) {
			return
		}
	}
}

// serveConn starts a session on a connection from router, unless the router is not allowed
// or max-sessions is reached. It returns false when the server is stopping.
func (s *Server) serveConn(conn net.Conn, router netip.AddrPort) bool {
	if !s.allowed(router.Addr()) {
		s.metrics.refusedNotAllowed.Inc()
		s.warnConn("not-allowed", "BMP connection refused: router not in allowed-routers", "router", router.String())
		conn.Close()
		return true
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		conn.Close()
		return false
	}
	if limit := s.cfg.MaxSessions; limit > 0 && len(s.conns) >= limit {
		// A connection still waiting for its initiation message gives way to the new one:
		// otherwise hosts that connect and say nothing could keep every router out.
		old := s.oldestUninitiatedLocked()
		if old == nil {
			s.mu.Unlock()
			s.metrics.refusedMaxSessions.Inc()
			s.warnConn("max-sessions", "BMP connection refused: max-sessions reached", "router", router.String(), "max-sessions", limit)
			conn.Close()
			return true
		}
		old.evicted.Store(true)
		old.conn.Close()
	}
	sess := newSession(s, conn, router)
	s.conns[sess] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if tc, ok := conn.(*net.TCPConn); ok && s.cfg.ReceiveBuffer > 0 {
		tc.SetReadBuffer(s.cfg.ReceiveBuffer)
	}
	go sess.serve()
	return true
}

// warnConn logs a refused or timed-out connection, at most 3 lines per reason every 30 s: a
// connection flood must not flood the log as well.
func (s *Server) warnConn(reason, msg string, args ...any) {
	s.logConn(slog.LevelWarn, reason, msg, args...)
}

// logConn is warnConn at any level.
func (s *Server) logConn(level slog.Level, reason, msg string, args ...any) {
	ok, suppressed := s.connLog.Allow(reason, time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	s.log.Log(context.Background(), level, msg, args...)
}

func (s *Server) allowed(a netip.Addr) bool {
	if len(s.cfg.AllowedRouters) == 0 {
		return true
	}
	for _, p := range s.cfg.AllowedRouters {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (s *Server) acceptRD(rd RD) bool {
	if s.rds == nil {
		return true
	}
	_, ok := s.rds[rd]
	return ok
}

// oldestUninitiatedLocked returns the earliest accepted connection still waiting for its
// initiation message and not already evicted, or nil.
func (s *Server) oldestUninitiatedLocked() *session {
	var old *session
	for c := range s.conns {
		if c.initiated.Load() || c.evicted.Load() {
			continue
		}
		if old == nil || c.accepted.Before(old.accepted) {
			old = c
		}
	}
	return old
}

// sessionClosed keeps the routes of a finished session for Keep, then removes them; a
// router that reconnects sends its table again under a new session meanwhile.
func (s *Server) sessionClosed(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, sess)
	if s.stopping || sess.peerCount() == 0 {
		return
	}
	s.stale[sess] = time.AfterFunc(s.cfg.Keep, func() {
		s.mu.Lock()
		_, ok := s.stale[sess]
		delete(s.stale, sess)
		s.mu.Unlock()
		if ok {
			sess.removeAllPeers("stale")
		}
	})
}

// adoptRestored treats the BMP routes already in the table at start (loaded from the RIB
// snapshot) like those of a session that just closed: kept for Keep, then removed unless
// their router reconnects and takes its peers over (see adopt).
func (s *Server) adoptRestored() {
	byRouter := make(map[netip.Addr]*session)
	for _, p := range s.table.Peers() {
		if !p.Router.IsValid() || p.Routes == 0 {
			continue
		}
		c := byRouter[p.Router]
		if c == nil {
			rs := p.Router.String()
			c = &session{
				srv: s, router: netip.AddrPortFrom(p.Router, 0), routerStr: rs,
				peers: make(map[peerKey]*peer), negotiated: make(map[sessionKey]*negotiated),
				metrics: &routerMetrics{peers: s.metrics.peers.WithLabelValues(rs), closed: s.metrics.closed.WithLabelValues(rs)},
			}
			byRouter[p.Router] = c
		}
		k := peerKey{sessionKey: sessionKey{typ: PeerTypeGlobal, rd: RD(p.Distinguisher), addr: p.Address, as: p.AS}, postPolicy: p.PostPolicy}
		if p.Distinguisher != 0 {
			k.typ = PeerTypeRD
		}
		pp := c.addPeerLocked(k)
		pp.ribPeers = append(pp.ribPeers, ribPeer{rd: RD(p.Distinguisher), id: p.ID})
		s.mu.Lock()
		s.owners[p.ID] = c
		s.mu.Unlock()
	}
	for _, c := range byRouter {
		s.log.Info("BMP routes restored, kept until the router reconnects", "router", c.routerStr, "peers", len(c.peers), "keep", s.cfg.Keep)
		s.sessionClosed(c)
	}
}

// adopt records that session c feeds RIB peer id (called inside tx). The RIB names a peer by
// router address, not by TCP session, so a router that reconnects gets the IDs of its previous
// session back. That session's kept routes are then dropped at once: the router is sending its
// table again, and leftovers withdrawn while it was away must not linger.
func (s *Server) adopt(tx *rib.Tx, c *session, id rib.PeerID) {
	s.mu.Lock()
	prev := s.owners[id]
	s.owners[id] = c
	_, stale := s.stale[prev]
	s.mu.Unlock()
	if prev == nil || prev == c {
		return
	}
	if stale {
		tx.RemovePeer(id)
	}
	if prev.disown(id) && stale {
		// Every peer of the closed session was taken over: nothing is left to expire.
		s.mu.Lock()
		if t := s.stale[prev]; t != nil {
			t.Stop()
			delete(s.stale, prev)
		}
		s.mu.Unlock()
	}
}

// peerDownStale removes what closed sessions of c's router still keep for the BGP session
// sk: a router that reconnects reports the peers that went down while it was away, which its
// new session never saw, and their routes must not wait for Keep.
func (s *Server) peerDownStale(c *session, sk sessionKey) {
	router := c.router.Addr()
	s.mu.Lock()
	var olds []*session
	for old := range s.stale {
		if old != c && old.router.Addr() == router {
			olds = append(olds, old)
		}
	}
	s.mu.Unlock()
	for _, old := range olds {
		old.peersMu.Lock()
		ps := old.detachRIBPeerLocked(sk)
		empty := len(old.peers) == 0
		old.peersMu.Unlock()
		if len(ps) == 0 {
			continue
		}
		old.dropRoutes(ps, "down")
		if empty {
			// Nothing is left to expire.
			s.mu.Lock()
			if t := s.stale[old]; t != nil {
				t.Stop()
				delete(s.stale, old)
			}
			s.mu.Unlock()
		}
	}
}

// release forgets that c feeds id and reports whether it did.
func (s *Server) release(c *session, id rib.PeerID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners[id] != c {
		return false
	}
	delete(s.owners, id)
	return true
}

// session is one BMP TCP connection from a router. All its state is owned by its goroutine
// until the session ends; after that only the stale timer touches it.
type session struct {
	srv       *Server
	conn      net.Conn
	router    netip.AddrPort
	routerStr string
	// metrics are the router's series, nil until its initiation message is accepted: any
	// host reaching the port can connect, and only a BMP speaker gets its address in labels.
	metrics *routerMetrics
	sysName string
	peers   map[peerKey]*peer
	// negotiated is the state of each BGP session the router monitors, shared by its views.
	negotiated map[sessionKey]*negotiated
	peersMu    sync.Mutex // guards peers and negotiated against the stale timer after the session ended
	update     updateDecoder
	ph         PeerHeader
	errLogged  time.Time
	// accepted is when the connection was accepted; initiated is set once its initiation
	// message is, and evicted when max-sessions closed it for a newer connection before.
	accepted  time.Time
	initiated atomic.Bool
	evicted   atomic.Bool
}

func newSession(s *Server, conn net.Conn, router netip.AddrPort) *session {
	rs := router.Addr().String()
	return &session{
		srv:        s,
		conn:       conn,
		router:     router,
		routerStr:  rs,
		peers:      make(map[peerKey]*peer),
		negotiated: make(map[sessionKey]*negotiated),
		accepted:   time.Now(),
	}
}

func (c *session) serve() {
	defer c.srv.wg.Done()
	defer func() {
		c.conn.Close()
		if c.metrics != nil {
			c.metrics.closed.Inc()
		}
		c.srv.sessionClosed(c)
	}()
	// One deadline for the whole initiation message, so trickling bytes does not extend it.
	c.conn.SetReadDeadline(time.Now().Add(c.srv.cfg.InitiationTimeout))
	why := c.run(&deadlineReader{conn: c.conn, idle: c.srv.cfg.IdleTimeout})
	if c.metrics != nil {
		c.srv.log.Info("BMP session down", "router", c.router.String(), "sysname", c.sysName, "reason", why)
		c.srv.sessionLost(c, why)
	}
}

// sessionLost records, unless the server is stopping, that a router's session ended: its
// routes are now only kept for Keep, and the RIB no longer follows the router.
func (s *Server) sessionLost(c *session, why string) {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		return
	}
	s.lost.Add(1)
	name := c.router.Addr().String()
	if c.sysName != "" {
		name += " (" + c.sysName + ")"
	}
	s.health.Event(fmt.Sprintf("BMP session of router %s lost: %s; its routes are kept for %s", name, why, s.cfg.Keep))
}

// Name identifies the BMP listener in /healthz.
func (s *Server) Name() string { return "bmp" }

// Health implements health.Reporter: degraded for health.Hold after a router's session was
// lost (closed, terminated, timed out or broken), whose routes then wait for its return.
func (s *Server) Health() health.Report {
	r := s.health.Report()
	s.mu.Lock()
	sessions := 0
	for c := range s.conns {
		if c.initiated.Load() {
			sessions++
		}
	}
	s.mu.Unlock()
	r.Counters = map[string]uint64{"sessions": uint64(sessions), "sessions-lost": s.lost.Load()}
	return r
}

// run reads and applies messages from r until the stream ends, breaks or terminates, and
// says why it stopped.
func (c *session) run(rd io.Reader) (why string) {
	r := NewReader(rd)
	first := true
	for {
		h, msg, err := r.Next()
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.timedOut(first)
			return "nothing received within idle-timeout"
		case first && c.evicted.Load():
			c.uninitiated(c.srv.metrics.uninitiatedEvicted, "evicted", slog.LevelWarn,
				"BMP connection closed before its initiation message: max-sessions reached, a newer connection took its place", nil)
			return
		case errors.Is(err, net.ErrClosed): // Stop
			return "server stopping"
		case first && errors.Is(err, io.EOF):
			c.uninitiated(c.srv.metrics.uninitiatedClosed, "closed", slog.LevelInfo,
				"BMP connection closed before its initiation message", nil)
			return
		case first:
			c.uninitiated(c.srv.metrics.uninitiatedBroken, "broken", slog.LevelWarn,
				"BMP connection broken before its initiation message", err)
			return
		case errors.Is(err, io.EOF):
			return "connection closed by the router"
		default:
			c.fail("read", err)
			return fmt.Sprintf("read error: %v", err)
		}
		if first {
			// RFC 7854 §4.3: the initiation message is the first one a router sends.
			if h.Type != MsgInitiation {
				c.uninitiated(c.srv.metrics.uninitiatedNotInitiation, "not-initiation", slog.LevelWarn,
					"BMP connection closed: first message not initiation", fmt.Errorf("got %s", h.Type))
				return
			}
			if dr, ok := rd.(*deadlineReader); ok {
				dr.initiated()
			}
			c.metrics = c.srv.metrics.forRouter(c.routerStr)
			c.initiated.Store(true)
		}
		stop, err := c.handle(h, msg[CommonHeaderLen:])
		if err != nil {
			c.fail("malformed "+h.Type.String(), err)
		}
		// Counted once applied, so that the counter tells what the RIB already reflects.
		c.metrics.message(h.Type)
		if first {
			c.srv.log.Info("BMP session up", "router", c.router.String(), "sysname", c.sysName)
			first = false
		}
		if stop {
			return "terminated by the router"
		}
	}
}

// uninitiated counts and logs (rate-limited, by reason) a connection that ended before its
// initiation message. Its address labels no series: it may be any host reaching the port.
func (c *session) uninitiated(counter prometheus.Counter, reason string, level slog.Level, msg string, err error) {
	counter.Inc()
	args := []any{"router", c.router.String()}
	if err != nil {
		args = append(args, "err", err)
	}
	c.srv.logConn(level, "uninitiated-"+reason, msg, args...)
}

// timedOut counts and logs a session closed because its router sent nothing in time.
func (c *session) timedOut(beforeInitiation bool) {
	if beforeInitiation {
		c.srv.metrics.initiationTimeouts.Inc()
		c.srv.warnConn("initiation-timeout", "BMP connection closed: no initiation message in time",
			"router", c.router.String(), "initiation-timeout", c.srv.cfg.InitiationTimeout)
		return
	}
	c.srv.metrics.idleTimeouts.Inc()
	c.srv.warnConn("idle-timeout", "BMP session closed: nothing received in time",
		"router", c.router.String(), "sysname", c.sysName, "idle-timeout", c.srv.cfg.IdleTimeout)
}

// deadlineReader reads a router's connection. Until initiated, the initiation deadline set
// by serve applies; from then on each read waits at most idle (0: forever) for data.
type deadlineReader struct {
	conn    net.Conn
	idle    time.Duration
	started bool
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	if r.started && r.idle > 0 {
		r.conn.SetReadDeadline(time.Now().Add(r.idle))
	}
	return r.conn.Read(p)
}

// initiated lifts the initiation deadline.
func (r *deadlineReader) initiated() {
	r.started = true
	r.conn.SetReadDeadline(time.Time{})
}

// fail counts an error and logs it at most every 30 seconds per session.
func (c *session) fail(reason string, err error) {
	c.srv.metrics.errors.WithLabelValues(c.routerStr, reason).Inc()
	if now := time.Now(); now.Sub(c.errLogged) > 30*time.Second {
		c.errLogged = now
		c.srv.log.Warn("BMP error", "router", c.router.String(), "reason", reason, "err", err)
	}
}

// handle processes one message body (after the common header). stop ends the session.
func (c *session) handle(h CommonHeader, body []byte) (stop bool, err error) {
	switch h.Type {
	case MsgInitiation:
		return false, WalkTLVs(body, func(t TLV) {
			if t.Type == InfoSysName {
				c.sysName = string(t.Value)
			}
		})
	case MsgTermination:
		var reason string
		WalkTLVs(body, func(t TLV) {
			if t.Type == InfoString {
				reason = string(t.Value)
			}
		})
		c.srv.log.Info("BMP termination", "router", c.router.String(), "reason", reason)
		return true, nil
	case MsgRouteMirroring:
		// Mirrored PDUs may be deliberately malformed BGP (RFC 7854 §4.7): never parsed.
		return false, nil
	case MsgRouteMonitoring, MsgStatisticsReport, MsgPeerDown, MsgPeerUp:
	default:
		return false, nil
	}
	// The header lives in the session so that handing it down by pointer costs nothing.
	c.ph, err = ParsePeerHeader(body)
	if err != nil {
		return false, err
	}
	ph := &c.ph
	body = body[PeerHeaderLen:]
	switch h.Type {
	case MsgPeerUp:
		return false, c.peerUp(ph, body)
	case MsgPeerDown:
		if _, err := ParsePeerDown(body); err != nil {
			return false, err
		}
		c.peerDown(ph)
		return false, nil
	case MsgStatisticsReport:
		p := c.lookupPeer(ph)
		if p == nil {
			return false, nil
		}
		return false, WalkStatistics(body, func(st Statistic) {
			switch st.Type {
			case StatAdjRIBIn:
				p.metrics.adjRIBIn.Set(float64(st.Value))
			case StatRejectedPrefixes:
				p.metrics.rejected.Set(float64(st.Value))
			}
		})
	case MsgRouteMonitoring:
		return false, c.routeMonitoring(ph, body)
	}
	return false, nil
}

func (c *session) peerCount() int {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	return len(c.peers)
}

func (c *session) removeAllPeers(reason string) {
	c.peersMu.Lock()
	ps := make([]*peer, 0, len(c.peers))
	for k, p := range c.peers {
		c.forgetPeerLocked(k, p)
		ps = append(ps, p)
	}
	c.peersMu.Unlock()
	c.dropRoutes(ps, reason)
}

// disown drops RIB peer id from the session's peers (another session took it over) and
// reports whether the session has no peer left.
func (c *session) disown(id rib.PeerID) (empty bool) {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	for k, p := range c.peers {
		for i, rp := range p.ribPeers {
			if rp.id != id {
				continue
			}
			p.ribPeers = append(p.ribPeers[:i], p.ribPeers[i+1:]...)
			if len(p.ribPeers) == 0 {
				c.forgetPeerLocked(k, p)
			}
			return len(c.peers) == 0
		}
	}
	return len(c.peers) == 0
}
