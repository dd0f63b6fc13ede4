// Package collector is flowzero's main job: it reads NetFlow/IPFIX and sFlow datagrams from
// UDP sockets, decodes them into schema.FlowMessage values, enriches and finalizes each flow,
// and hands batches of encoded flows to the sinks (Kafka, files, stdout, the embedded store).
//
// Design: one goroutine per socket does everything for its datagrams — read, decode, enrich,
// encode, batch — with no lock and no allocation per flow; SO_REUSEPORT spreads exporters over
// the sockets and the kernel socket buffer is the only queue before decoding (its drops are
// read with SO_RXQ_OVFL). A listener with receive: af-packet reads AF_PACKET rings instead,
// one per worker (ring.go). Batches meet the sinks at bounded queues; whatever is dropped is
// counted by stage and reason. Per-exporter state (allow-list verdict, rate limiter, batch,
// metric handles) is looked up once per datagram in the worker's own map.
package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/clock"
	"flowzero/internal/health"
	"flowzero/internal/httpserver"
	"flowzero/internal/lograte"
	"flowzero/output"
	"flowzero/schema"
)

// Decoder is what a listener's workers call for each datagram: it calls emit once per flow
// with fm filled, and returns an error for a malformed datagram (flows decoded before the
// error were emitted).
type Decoder interface {
	Decode(payload []byte, exporter netip.AddrPort, received time.Time, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error
}

// Forwarder takes the datagrams of allowed exporters in place of the decoders: the inlet of a
// split collector (mode: inlet) sends them on, undecoded. Forward is called from the socket's
// worker; payload is valid during the call only.
type Forwarder interface {
	Forward(payload []byte, exporter netip.AddrPort, received time.Time, protocol string)
}

// BatchForwarder is a Forwarder that sends the datagrams of each read of a socket (several
// with recvmmsg), or of a short wait, together: each worker forwards through its own
// ForwardBatch instead of Forward.
type BatchForwarder interface {
	Forwarder
	// NewBatch returns a new worker's ForwardBatch.
	NewBatch() ForwardBatch
}

// ForwardBatch holds one worker's datagrams until they are sent; it is used from that worker's
// goroutine only. The worker calls Send(now, false) after each read and when Due is reached,
// and Send(now, true) when it stops.
type ForwardBatch interface {
	// Add takes a datagram; payload is valid during the call only.
	Add(payload []byte, exporter netip.AddrPort, received time.Time, protocol string)
	// Due is when the datagrams held must be sent (zero when none is held).
	Due() time.Time
	// Send sends the datagrams held that are due at now, or all of them.
	Send(now time.Time, all bool)
}

// Enricher fills flow fields from other sources (routing table, interface metadata) between
// decoding and encoding. A flow it rejects (FlowMessage.Rejected) is dropped.
type Enricher interface {
	Enrich(fm *schema.FlowMessage)
}

// Dependencies are the components the collector runs on.
type Dependencies struct {
	Schema *schema.Schema
	// Decoders by listener protocol ("netflow", "sflow").
	Decoders map[string]Decoder
	// Forward, when set, receives every datagram of an allowed exporter instead of the
	// decoders (which are then not needed), with the listener's protocol.
	Forward Forwarder
	// Enricher may be nil.
	Enricher Enricher
	// Sinks receive every batch.
	Sinks []output.Sink
	// Registry for the metrics; /metrics serves it.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// Handlers are extra HTTP handlers mounted on the collector's server, by pattern (for
	// example "POST /api/v0/rib/lookup").
	Handlers map[string]http.Handler
	// Reload, when set, is called by POST /api/v0/reload with RequestHeader (and by the
	// command on SIGHUP); it returns what it applied and what needs a restart.
	Reload func() (string, error)
	// ExporterDetails, when set, adds decoder state (templates, sampling rates) for an exporter
	// to /api/v0/exporters.
	ExporterDetails func(netip.Addr) any
	// Health are components /healthz reports on besides the collector itself and the sinks
	// that implement health.Reporter.
	Health []health.Reporter
	// Clock gives the receive time of each datagram, an exporter's first and last datagram
	// and the time the rate limits and batch ages count in (clock.System{} when nil). The
	// sockets' deadlines still follow the machine's clock: they are timers, not dates.
	Clock clock.Clock
}

// Collector is the running service.
type Collector struct {
	cfg     Configuration
	deps    Dependencies
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics
	pool    *output.BatchPool
	keyed   bool // batches are per exporter (Kafka keyed by exporter)

	policy        atomic.Pointer[exporterPolicy]
	batchInterval atomic.Int64

	exporters     sync.Map // netip.Addr → *exporterInfo
	exporterCount atomic.Int64

	workers  []*worker
	wg       sync.WaitGroup
	pollStop chan struct{}
	pollDone chan struct{}
	stopping atomic.Bool
	logLimit *lograte.Keyed[netip.Addr]
	// notAllowedLog is one limiter for every refused source: a key per source would let a
	// flood from many addresses log without limit. Workers reach it through a
	// lograte.Local each.
	notAllowedLog *lograte.Limiter
	readErrLog    *lograte.Limiter

	http         *httpServer
	httpTimeouts httpserver.Timeouts

	// health is the collector's own state in /healthz (foreign sockets on its ports).
	health *health.State
	// foreign are the sockets found sharing the listeners' ports, by inode (poller only,
	// and Start before it runs).
	foreignMu sync.Mutex
	foreign   map[uint64]foreignSocket
	// decodeErrLog limits the "cannot decode datagram" lines of every exporter together
	// (logLimit limits them per exporter): a flood from many sources, spoofed or not,
	// must not log a burst per source.
	decodeErrLog *lograte.Limiter
}

// New checks the configuration and prepares the collector; Start binds the sockets.
func New(cfg Configuration, deps Dependencies) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Schema == nil {
		return nil, errors.New("collector: a schema is required")
	}
	for i, l := range cfg.Listeners {
		if deps.Decoders[l.Protocol] == nil && deps.Forward == nil {
			return nil, fmt.Errorf("collector: listeners[%d]: no decoder for protocol %q", i, l.Protocol)
		}
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Registry == nil {
		deps.Registry = prometheus.NewRegistry()
	}
	c := &Collector{
		cfg:           cfg,
		deps:          deps,
		clock:         clock.Or(deps.Clock),
		log:           deps.Logger,
		pool:          output.NewBatchPool(cfg.BatchSize+cfg.BatchSize/4, 256),
		logLimit:      lograte.NewKeyed[netip.Addr](3, 30*time.Second, 10000),
		decodeErrLog:  lograte.New(10, 30*time.Second),
		notAllowedLog: lograte.New(3, 30*time.Second),
		readErrLog:    lograte.New(3, 30*time.Second),
		httpTimeouts:  httpserver.DefaultTimeouts,
		health:        health.NewState(deps.Clock),
	}
	for _, s := range deps.Sinks {
		if ks, ok := s.(interface{ KeyedByExporter() bool }); ok && ks.KeyedByExporter() {
			c.keyed = true
		}
	}
	c.metrics = newMetrics(deps.Registry, c)
	c.policy.Store(newExporterPolicy(cfg.Exporters))
	c.batchInterval.Store(int64(cfg.BatchInterval))
	return c, nil
}

// Start starts the sinks, binds every listener and starts the workers and the HTTP server.
func (c *Collector) Start() error {
	for _, s := range c.deps.Sinks {
		if err := s.Start(); err != nil {
			return fmt.Errorf("sink %s: %w", s.Name(), err)
		}
	}
	// Sockets on the ports already, before the listeners take any datagram from them.
	if err := c.checkPortSharing(c.plannedListeners(), nil); err != nil {
		return err
	}
	for li, l := range c.cfg.Listeners {
		var err error
		if l.Receive == "af-packet" {
			err = c.startRings(li, l)
		} else {
			err = c.startSockets(li, l)
		}
		if err != nil {
			c.closeWorkers()
			return err
		}
	}
	// Again with the ports bound (port 0 picked one; a socket may have come meanwhile).
	if err := c.checkPortSharing(c.boundListeners()); err != nil {
		c.closeWorkers()
		return err
	}
	if c.cfg.HTTP.Listen != "" {
		h, err := c.startHTTP()
		if err != nil {
			c.closeWorkers()
			return err
		}
		c.http = h
	}
	for _, w := range c.workers {
		c.wg.Add(1)
		go w.run()
	}
	c.pollStop = make(chan struct{})
	c.pollDone = make(chan struct{})
	go c.pollKernelDrops()
	return nil
}

// startSockets binds a listener's UDP sockets and makes a worker for each.
func (c *Collector) startSockets(li int, l ListenerConfiguration) error {
	conns, granted, err := openSockets(l.Address, l.Workers, l.ReceiveBuffer)
	if err != nil {
		return err
	}
	name := l.Protocol + "/" + conns[0].LocalAddr().String()
	c.metrics.rcvbuf.WithLabelValues(name).Set(float64(granted))
	if l.ReceiveBuffer > 0 && granted < l.ReceiveBuffer {
		c.log.Warn("the kernel capped the socket receive buffer; raise net.core.rmem_max or run with CAP_NET_ADMIN",
			"listener", name, "asked", l.ReceiveBuffer, "granted", granted)
	}
	c.log.Info("listening", "listener", name, "sockets", len(conns), "receive-buffer", granted)
	for si, conn := range conns {
		r, err := newBatchReader(conn)
		if err != nil {
			for _, conn := range conns[si:] {
				conn.Close()
			}
			return err
		}
		w := newWorker(c, li, name, strconv.Itoa(si), conn, c.deps.Decoders[l.Protocol], l.Protocol)
		w.src = r
		w.inode, _ = socketInode(conn)
		c.workers = append(c.workers, w)
	}
	return nil
}

// startRings binds a listener's UDP socket, which drops what it receives, and opens its
// AF_PACKET rings, a worker each.
func (c *Collector) startRings(li int, l ListenerConfiguration) error {
	conns, _, err := openSockets(l.Address, 1, 0)
	if err != nil {
		return err
	}
	conn := conns[0]
	// The configured address (Validate refuses an unspecified one), with the port bound.
	configured, err := netip.ParseAddrPort(l.Address)
	if err != nil {
		conn.Close()
		return fmt.Errorf("listeners[%d].address: %w", li, err)
	}
	ap := netip.AddrPortFrom(configured.Addr(), conn.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	name := l.Protocol + "/" + conn.LocalAddr().String()
	var errs [ringReasons]prometheus.Counter
	for i, reason := range ringReasonNames {
		errs[i] = c.metrics.ringErrors.WithLabelValues(name, reason)
	}
	rings, err := openRings(ap, l.Interface, l.Workers, l.ReceiveBuffer, l.BlockTimeout, errs)
	if err != nil {
		conn.Close()
		return fmt.Errorf("listeners[%d] (%s): %w", li, name, err)
	}
	// The socket drops from now on, when the rings have every datagram; those it holds
	// from before, never read, came before the listener started.
	if err := dropAll(conn); err != nil {
		for _, r := range rings {
			r.Close()
		}
		conn.Close()
		return fmt.Errorf("listen %s: %w", l.Address, err)
	}
	inode, _ := socketInode(conn)
	c.metrics.rcvbuf.WithLabelValues(name).Set(float64(len(rings[0].mem)))
	c.log.Info("listening", "listener", name, "af-packet-rings", len(rings), "interface", l.Interface,
		"ring-bytes", len(rings[0].mem), "block-timeout", l.BlockTimeout)
	for si, r := range rings {
		w := newWorker(c, li, name, strconv.Itoa(si), conn, c.deps.Decoders[l.Protocol], l.Protocol)
		w.src, w.ring, w.inode = r, r, inode
		c.workers = append(c.workers, w)
	}
	return nil
}

// pollKernelDrops reads the sockets' drop counters from /proc every second, so drops that
// no later datagram reports through SO_RXQ_OVFL are counted too.
func (c *Collector) pollKernelDrops() {
	defer close(c.pollDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.pollStop:
			c.readKernelDrops()
			return
		case <-t.C:
			c.readKernelDrops()
		}
	}
}

func (c *Collector) readKernelDrops() {
	socks := procUDPSockets()
	drops := make(map[uint64]uint32, len(socks))
	for _, s := range socks {
		drops[s.inode] = s.drops
	}
	for _, w := range c.workers {
		if w.ring != nil {
			// The socket drops every datagram on purpose: the ring's own count is the one.
			w.countKernelDrops(uint32(w.ring.Drops()))
		} else if v, ok := drops[w.inode]; ok && w.inode != 0 {
			w.countKernelDrops(v)
		}
	}
	listeners, own := c.boundListeners()
	c.foreignMu.Lock()
	known := c.foreign
	c.foreignMu.Unlock()
	c.watchForeign(foreignSockets(socks, listeners, own, known))
}

// ListenAddrs returns the bound address of the first socket of each listener, in
// configuration order (useful with port 0).
func (c *Collector) ListenAddrs() []netip.AddrPort {
	var out []netip.AddrPort
	last := -1
	for _, w := range c.workers {
		if w.listener != last {
			last = w.listener
			out = append(out, w.conn.LocalAddr().(*net.UDPAddr).AddrPort())
		}
	}
	return out
}

// HTTPAddr returns the address of the HTTP server, or "".
func (c *Collector) HTTPAddr() string {
	if c.http == nil {
		return ""
	}
	return c.http.addr
}

func (c *Collector) closeWorkers() {
	for _, w := range c.workers {
		w.src.Close()
		w.conn.Close() // an af-packet listener's, shared: closed again does nothing
	}
}

// Stop stops reading (after draining what the kernel already queued for a short moment),
// flushes every worker's batches to the sinks, stops the sinks (which deliver or count what
// they hold) and the HTTP server.
func (c *Collector) Stop() error {
	c.stopping.Store(true)
	for _, w := range c.workers {
		w.src.SetReadDeadline(time.Now()) // wake the worker; it drains, then exits
	}
	c.wg.Wait()
	if c.pollStop != nil {
		close(c.pollStop)
		<-c.pollDone
	}
	c.closeWorkers()
	var errs []error
	for _, s := range c.deps.Sinks {
		if err := s.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("sink %s: %w", s.Name(), err))
		}
	}
	if c.http != nil {
		errs = append(errs, c.http.stop())
	}
	return errors.Join(errs...)
}

// Reload applies what can change without a restart (exporter allow-list and rate limit,
// batch interval) and returns the keys that differ but need a restart.
func (c *Collector) Reload(cfg Configuration) (restartNeeded []string, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c.policy.Store(newExporterPolicy(cfg.Exporters))
	c.batchInterval.Store(int64(cfg.BatchInterval))
	if fmt.Sprint(cfg.Listeners) != fmt.Sprint(c.cfg.Listeners) {
		restartNeeded = append(restartNeeded, "collector.listeners")
	}
	if cfg.HTTP != c.cfg.HTTP {
		restartNeeded = append(restartNeeded, "collector.http")
	}
	if cfg.BatchSize != c.cfg.BatchSize {
		restartNeeded = append(restartNeeded, "collector.batch-size")
	}
	c.cfg.Exporters, c.cfg.BatchInterval = cfg.Exporters, cfg.BatchInterval
	return restartNeeded, nil
}

// dispatch hands a batch to every sink (the batch holds one reference on entry).
func (c *Collector) dispatch(b *output.Batch) {
	if b.Flows == 0 || len(c.deps.Sinks) == 0 {
		b.Release()
		return
	}
	c.metrics.batches.Inc()
	b.Retain(len(c.deps.Sinks) - 1)
	for _, s := range c.deps.Sinks {
		s.Send(b)
	}
}

// exporterPolicy is the reloadable part of the exporter configuration.
type exporterPolicy struct {
	generation uint64
	allow      []netip.Prefix
	rate       float64
}

var policyGeneration atomic.Uint64

func newExporterPolicy(p ExporterPolicy) *exporterPolicy {
	return &exporterPolicy{generation: policyGeneration.Add(1), allow: p.Allow, rate: p.RateLimit}
}

func (p *exporterPolicy) allowed(a netip.Addr) bool {
	if len(p.allow) == 0 {
		return true
	}
	for _, pfx := range p.allow {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}
