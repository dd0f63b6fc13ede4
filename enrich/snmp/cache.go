// Package snmp learns exporters' interface names, descriptions and speeds, and their system
// names, from their SNMP agents (github.com/gosnmp/gosnmp, SNMPv2c or SNMPv3): ifName,
// ifDescr, ifAlias, ifHighSpeed and sysName, kept in a cache keyed by exporter and ifIndex.
//
// # Design
//
// Flows never wait for SNMP. Lookup answers from the cache at once; on a miss it queues the
// interface for a poll (counted) and the caller goes on with what it knows. Workers (a
// bounded number) take exporters with queued interfaces, one poll in flight per exporter,
// and ask several interfaces in one GET request; each answer is handed to the function set
// with OnUpdate, which refreshes what the flows get (enrich's MetadataCache re-encodes the
// interface's columns). Interfaces still in use are polled again in the background after
// cache-refresh, keeping their previous answer meanwhile and if the agent does not answer
// (or answers with values of the wrong type); those unused for cache-duration are
// forgotten. An agent answering tooBig is asked about fewer interfaces per request. The
// cache is saved to a file and read back at start, so that a restart enriches flows before
// the first poll returns.
//
// An exporter whose agent does not answer breaker-failures polls in a row has its circuit
// breaker opened: no poll goes to it for breaker-cooldown, then one poll tries again
// (doubling the cooldown when it fails too). Its flows keep flowing with the cached answers.
//
// Names follow Akvorado's SNMP provider: the name is ifName (ifDescr when the agent has no
// ifName), the description ifAlias, or ifDescr when ifAlias is empty or the name, and the
// speed ifHighSpeed in Mbit/s.
package snmp

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/clock"
	"flowzero/internal/lograte"
)

// Interface is what an agent says about an interface.
type Interface struct {
	// Name is ifName (ifDescr without ifName).
	Name string
	// Description is ifAlias (ifDescr when ifAlias is empty or equal to the name).
	Description string
	// Speed is ifHighSpeed, in Mbit/s.
	Speed uint32
}

// Answer is what the cache knows about an interface of an exporter.
type Answer struct {
	// ExporterName is the agent's sysName.
	ExporterName string
	Interface    Interface
	// Found is false when the agent answered that it has no such interface.
	Found bool
}

// Update tells what a poll changed.
type Update struct {
	Exporter netip.Addr
	// Indexes are the interfaces whose answer changed.
	Indexes []uint32
	// ExporterName is set when the exporter's sysName changed.
	ExporterName bool
}

// Dependencies of the cache.
type Dependencies struct {
	// Clock tells the time (clock.System{} when nil).
	Clock clock.Clock
	// Logger receives rate-limited warnings (slog.Default() when nil).
	Logger *slog.Logger
}

// maxExporters bounds the exporters the cache tracks, so that spoofed sources cannot grow it
// without limit.
const maxExporters = 4096

// maxStringLen bounds the strings kept from an agent (ifName's maximum, RFC 2863).
const maxStringLen = 255

// entry is the cached answer for one interface.
type entry struct {
	iface  Interface
	found  bool
	polled time.Time // last answer
	used   time.Time // last Lookup or Touch
}

// exporter is the state of one exporter's agent.
type exporter struct {
	addr    netip.Addr
	target  netip.AddrPort
	creds   *Credentials
	sysName string
	// namePolled is set once the agent answered a poll.
	namePolled bool
	// used is the time of the last Lookup, ExporterName or Touch: an exporter whose sysName
	// is known is kept, without interfaces, until cache-duration of non-use.
	used    time.Time
	entries map[uint32]*entry
	// pending are the interfaces waiting for a poll; 0 asks for the sysName only.
	pending  map[uint32]struct{}
	queued   bool // in Cache.ready
	inFlight bool
	// polling are the interfaces of the request in flight, which a miss does not queue again.
	polling []uint32
	// batch is how many interfaces a request asks about: max-batch-requests, halved each time
	// the agent answers tooBig.
	batch   int
	breaker breaker
	metrics exporterMetrics
}

// breaker is an exporter's circuit breaker.
type breaker struct {
	failures  int
	open      bool
	openUntil time.Time
	cooldown  time.Duration
}

// pollResult is an agent's answer to one request.
type pollResult struct {
	sysName    string
	hasSysName bool
	// badSysName: the agent answered sysName with a value of the wrong type.
	badSysName bool
	interfaces map[uint32]polledInterface
}

type polledInterface struct {
	iface Interface
	found bool
	// bad: a column came with a value of the wrong type, or not at all; the answer is not
	// used (the previous one, if any, is kept).
	bad bool
}

// errTooBig is an agent's tooBig error status: its answer would not fit in its maximum
// message size (RFC 3416 section 4.2.1).
var errTooBig = errors.New("agent answered tooBig (the answer does not fit in its message size)")

// pollFunc sends one request for the sysName and the interfaces to an agent.
type pollFunc func(ctx context.Context, target netip.AddrPort, creds *Credentials, indexes []uint32) (pollResult, error)

// Cache is the SNMP cache and its pollers. It is safe for concurrent use.
type Cache struct {
	cfg     Configuration
	tables  *tables
	clock   clock.Clock
	log     *slog.Logger
	logRate *lograte.Limiter
	metrics *metrics
	poll    pollFunc

	mu        sync.Mutex
	exporters map[netip.Addr]*exporter
	pending   int // total of the exporters' pending interfaces
	entries   int
	dirty     bool // changed since the last save
	onUpdate  func(Update)

	ready   chan *exporter
	started bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a cache (not started). Metrics go to reg (nil: not registered).
func New(reg prometheus.Registerer, cfg Configuration, deps Dependencies) (*Cache, error) {
	t, err := cfg.tables()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	c := &Cache{
		cfg:       cfg,
		tables:    t,
		clock:     clock.Or(deps.Clock),
		log:       deps.Logger,
		logRate:   lograte.New(3, 30*time.Second),
		metrics:   m,
		exporters: map[netip.Addr]*exporter{},
		ready:     make(chan *exporter, maxExporters),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.poll = c.snmpPoll
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// OnUpdate sets the function told of each answer that changes the cache, from a poller's
// goroutine. Call it before Start.
func (c *Cache) OnUpdate(fn func(Update)) { c.onUpdate = fn }

// Start reads the cache file, when configured, and starts the pollers and the periodic
// check. A cache file that cannot be read is logged and counted, not fatal: the cache starts
// empty.
func (c *Cache) Start() error {
	if path := c.cfg.CachePersistFile; path != "" {
		n, err := c.Load(path)
		switch {
		case err == nil:
			c.log.Info("SNMP cache loaded", "file", path, "interfaces", n)
		case errors.Is(err, errNotExist):
		case n > 0:
			c.log.Warn("SNMP cache file loaded without its bad entries", "file", path, "interfaces", n, "error", err)
		default:
			c.log.Warn("SNMP cache file not loaded; starting empty", "file", path, "error", err)
		}
	}
	c.started = true
	for range c.cfg.Workers {
		c.wg.Go(c.worker)
	}
	c.wg.Go(c.checker)
	return nil
}

// Stop stops the pollers (cancelling requests in flight) and saves the cache file. A cache
// never started saves nothing: its file may hold a previous run's answers.
func (c *Cache) Stop() error {
	c.cancel()
	c.wg.Wait()
	if c.started && c.cfg.CachePersistFile != "" {
		return c.Save(c.cfg.CachePersistFile)
	}
	return nil
}

// Lookup returns what the cache knows about interface index of exporter, and whether it
// holds an answer for it; it never waits. On a miss, the interface is queued for a poll and
// the answer carries the exporter's sysName when known.
func (c *Cache) Lookup(exporterAddr netip.Addr, index uint32) (Answer, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.exporter(exporterAddr.Unmap())
	if e == nil {
		c.metrics.misses.Inc()
		return Answer{}, false
	}
	e.used = now
	if en, ok := e.entries[index]; ok {
		en.used = now
		c.metrics.hits.Inc()
		return Answer{ExporterName: e.sysName, Interface: en.iface, Found: en.found}, true
	}
	c.metrics.misses.Inc()
	c.queue(e, index)
	return Answer{ExporterName: e.sysName}, false
}

// ExporterName returns the exporter's sysName when known; when the agent was never asked,
// it queues a poll of the sysName alone.
func (c *Cache) ExporterName(exporterAddr netip.Addr) (string, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.exporter(exporterAddr.Unmap())
	if e == nil {
		return "", false
	}
	e.used = now
	if !e.namePolled && len(e.pending) == 0 && !e.inFlight {
		c.queue(e, 0)
	}
	return e.sysName, e.namePolled
}

// Touch marks an exporter and interfaces of it as used by flows, so that they are refreshed
// and not forgotten; those the cache does not hold (forgotten, or never answered) are
// queued. Without indexes it only keeps the exporter's sysName, if the cache has one.
func (c *Cache) Touch(exporterAddr netip.Addr, indexes ...uint32) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var e *exporter
	if len(indexes) == 0 {
		e = c.exporters[exporterAddr.Unmap()]
	} else {
		e = c.exporter(exporterAddr.Unmap())
	}
	if e == nil {
		return
	}
	e.used = now
	for _, index := range indexes {
		if en, ok := e.entries[index]; ok {
			en.used = now
		} else {
			c.queue(e, index)
		}
	}
}

// exporter returns the state of exporter a, created when new; nil past maxExporters.
// c.mu is held.
func (c *Cache) exporter(a netip.Addr) *exporter {
	if e, ok := c.exporters[a]; ok {
		return e
	}
	if len(c.exporters) >= maxExporters {
		c.metrics.exportersFull.Inc()
		return nil
	}
	e := c.newExporter(a)
	c.exporters[a] = e
	return e
}

func (c *Cache) newExporter(a netip.Addr) *exporter {
	e := &exporter{addr: a, used: c.clock.Now(), batch: c.cfg.MaxBatchRequests, entries: map[uint32]*entry{}, pending: map[uint32]struct{}{}}
	k := key(a)
	agent, ok := c.tables.agents.Lookup(k)
	if !ok {
		agent = netip.AddrPortFrom(a, 0)
	}
	if agent.Port() == 0 {
		port, ok := c.tables.ports.Lookup(k)
		if !ok {
			port = 161
		}
		agent = netip.AddrPortFrom(agent.Addr(), port)
	}
	e.target = agent
	e.creds, _ = c.tables.credentials.Lookup(k)
	e.breaker.cooldown = c.cfg.BreakerCooldown
	e.metrics = c.metrics.forExporter(a.String())
	return e
}

// queue adds an interface to an exporter's pending polls. c.mu is held.
func (c *Cache) queue(e *exporter, index uint32) {
	if e.creds == nil {
		return // no credentials for this exporter: never polled
	}
	if _, ok := e.pending[index]; ok {
		return
	}
	if e.inFlight && (index == 0 || slices.Contains(e.polling, index)) {
		return // the request in flight asks for it (every request asks for the sysName)
	}
	if c.pending >= c.cfg.QueueSize {
		c.metrics.queueFull.Inc()
		return
	}
	e.pending[index] = struct{}{}
	c.pending++
	c.metrics.queued.Inc()
	c.schedule(e, c.clock.Now())
}

// schedule hands an exporter with pending interfaces to the workers, unless it is already
// waiting or polled, or its breaker is open. c.mu is held.
func (c *Cache) schedule(e *exporter, now time.Time) {
	if e.queued || e.inFlight || len(e.pending) == 0 || (e.breaker.open && now.Before(e.breaker.openUntil)) {
		return
	}
	select {
	case c.ready <- e:
		e.queued = true
	default: // cannot happen: the channel holds every exporter
	}
}

// worker polls exporters handed to it until the cache stops.
func (c *Cache) worker() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case e := <-c.ready:
			c.pollExporter(e)
		}
	}
}

// pollExporter sends one request for up to max-batch-requests pending interfaces of e.
func (c *Cache) pollExporter(e *exporter) {
	c.mu.Lock()
	e.queued = false
	if c.exporters[e.addr] != e {
		c.mu.Unlock()
		return // forgotten meanwhile
	}
	if e.breaker.open && c.clock.Now().Before(e.breaker.openUntil) {
		c.mu.Unlock()
		return // the checker schedules it again when the cooldown ends
	}
	// Index 0 asks for the sysName alone, which every request carries.
	indexes := make([]uint32, 0, len(e.pending))
	for index := range e.pending {
		if index != 0 {
			indexes = append(indexes, index)
		}
	}
	slices.Sort(indexes)
	indexes = indexes[:min(len(indexes), e.batch)]
	before := len(e.pending)
	_, askedName := e.pending[0]
	delete(e.pending, 0)
	for _, index := range indexes {
		delete(e.pending, index)
	}
	c.pending -= before - len(e.pending)
	e.inFlight, e.polling = true, indexes
	target, creds := e.target, e.creds
	c.mu.Unlock()

	start := time.Now()
	res, err := c.poll(c.ctx, target, creds, indexes)
	e.metrics.seconds.Observe(time.Since(start).Seconds())

	c.mu.Lock()
	e.inFlight, e.polling = false, nil
	now := c.clock.Now()
	var update Update
	tooBig := errors.Is(err, errTooBig)
	switch {
	case err != nil && c.ctx.Err() != nil:
		c.mu.Unlock()
		return
	case tooBig && len(indexes) > 1:
		// Not the agent failing: smaller requests will fit. The breaker is left alone.
		e.metrics.tooBig.Inc()
		e.batch = max(1, len(indexes)/2)
		c.requeue(e, indexes, askedName)
		if ok, suppressed := c.logRate.Allow(now); ok {
			c.log.Info("SNMP answer too big: asking fewer interfaces per request", "exporter", e.addr.String(),
				"agent", target.String(), "interfaces", e.batch, "suppressed", suppressed)
		}
	case err != nil:
		if tooBig {
			e.metrics.tooBig.Inc() // even one interface does not fit: a real failure
		}
		e.metrics.errors.Inc()
		c.fail(e, now)
		// The interfaces, and the sysName when asked alone, wait for the next poll (after the
		// cooldown if the breaker opened).
		c.requeue(e, indexes, askedName)
		if ok, suppressed := c.logRate.Allow(now); ok {
			c.log.Warn("SNMP poll failed", "exporter", e.addr.String(), "agent", target.String(),
				"error", err, "breaker-open", e.breaker.open, "suppressed", suppressed)
		}
	default:
		e.metrics.polls.Inc()
		c.succeed(e)
		update = c.store(e, res, indexes, now)
	}
	c.schedule(e, now)
	c.mu.Unlock()
	if c.onUpdate != nil && (update.ExporterName || len(update.Indexes) > 0) {
		c.onUpdate(update)
	}
}

// requeue puts back the interfaces of a request that failed, and index 0 when the sysName
// was asked alone (a request for interfaces asks for it too). c.mu is held.
func (c *Cache) requeue(e *exporter, indexes []uint32, askedName bool) {
	if askedName && len(indexes) == 0 {
		indexes = []uint32{0}
	}
	for _, index := range indexes {
		if _, ok := e.pending[index]; !ok && c.pending < c.cfg.QueueSize {
			e.pending[index] = struct{}{}
			c.pending++
		}
	}
}

// store records an answer and returns what changed. c.mu is held.
func (c *Cache) store(e *exporter, res pollResult, indexes []uint32, now time.Time) Update {
	u := Update{Exporter: e.addr}
	switch {
	case res.badSysName:
		// The previous sysName, if any, stays (the next request for interfaces asks again);
		// without one, the exporter is as an agent without sysName, so that this is not asked
		// again and again.
		e.metrics.badAnswers.Inc()
		c.warnBadAnswer(e, "sysName", now)
	case res.hasSysName:
		name := clean(res.sysName)
		if name != e.sysName {
			e.sysName = name
			u.ExporterName = true
			c.dirty = true
		}
	}
	e.namePolled = true
	for _, index := range indexes {
		p, ok := res.interfaces[index]
		if !ok || p.bad {
			// The previous answer, if any, stays; a refresh or the next flow asks again.
			e.metrics.badAnswers.Inc()
			c.warnBadAnswer(e, "interface "+strconv.FormatUint(uint64(index), 10), now)
			continue
		}
		p.iface.Name, p.iface.Description = clean(p.iface.Name), clean(p.iface.Description)
		en, ok := e.entries[index]
		if !ok {
			en = &entry{used: now}
			e.entries[index] = en
			c.entries++
			c.metrics.entries.Inc()
		}
		if !ok || en.iface != p.iface || en.found != p.found {
			u.Indexes = append(u.Indexes, index)
		}
		en.iface, en.found, en.polled = p.iface, p.found, now
		c.dirty = true
	}
	return u
}

// warnBadAnswer logs, rate-limited, an answer with values of the wrong type. c.mu is held.
func (c *Cache) warnBadAnswer(e *exporter, what string, now time.Time) {
	if ok, suppressed := c.logRate.Allow(now); ok {
		c.log.Warn("SNMP agent answered with values of the wrong type; previous answer kept", "exporter", e.addr.String(),
			"agent", e.target.String(), "object", what, "suppressed", suppressed)
	}
}

// clean makes an agent's string valid UTF-8 and at most maxStringLen bytes.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxStringLen {
		n := maxStringLen
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// fail records a failed poll in the exporter's breaker. c.mu is held.
func (c *Cache) fail(e *exporter, now time.Time) {
	b := &e.breaker
	b.failures++
	switch {
	case b.open:
		// The try after the cooldown failed: wait longer.
		b.cooldown = min(2*b.cooldown, max(time.Hour, c.cfg.BreakerCooldown))
		b.openUntil = now.Add(b.cooldown)
	case b.failures >= c.cfg.BreakerFailures:
		b.open = true
		b.openUntil = now.Add(b.cooldown)
		e.metrics.breakerOpen.Set(1)
		e.metrics.breakerTrips.Inc()
		c.log.Warn("SNMP agent not answering: circuit breaker open", "exporter", e.addr.String(),
			"agent", e.target.String(), "failures", b.failures, "cooldown", b.cooldown)
	}
}

// succeed closes the exporter's breaker. c.mu is held.
func (c *Cache) succeed(e *exporter) {
	b := &e.breaker
	if b.open {
		c.log.Info("SNMP agent answering again: circuit breaker closed", "exporter", e.addr.String())
		e.metrics.breakerOpen.Set(0)
	}
	*b = breaker{cooldown: c.cfg.BreakerCooldown}
}

// checker runs check every cache-check-interval and saves the cache file when it changed.
func (c *Cache) checker() {
	t := time.NewTicker(c.cfg.CacheCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.check()
			if path := c.cfg.CachePersistFile; path != "" && c.isDirty() {
				if err := c.Save(path); err != nil {
					if ok, suppressed := c.logRate.Allow(c.clock.Now()); ok {
						c.log.Warn("cannot save the SNMP cache file; retrying", "file", path, "error", err, "suppressed", suppressed)
					}
				}
			}
		}
	}
}

// check queues the interfaces in use whose answer is older than cache-refresh, forgets
// those unused for cache-duration (and exporters left without interfaces, unless their
// sysName is known and they were used within cache-duration), and schedules exporters whose
// breaker cooldown ended.
func (c *Cache) check() {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, e := range c.exporters {
		for index, en := range e.entries {
			switch {
			case now.Sub(en.used) >= c.cfg.CacheDuration:
				delete(e.entries, index)
				c.entries--
				c.metrics.entries.Dec()
				c.dirty = true
			case now.Sub(en.polled) >= c.cfg.CacheRefresh:
				if _, ok := e.pending[index]; !ok {
					c.metrics.refreshes.Inc()
					c.queue(e, index)
				}
			}
		}
		if len(e.entries) == 0 && len(e.pending) == 0 && !e.inFlight && !e.queued &&
			(!e.namePolled || now.Sub(e.used) >= c.cfg.CacheDuration) {
			delete(c.exporters, a)
			c.metrics.deleteExporter(a.String())
			continue
		}
		c.schedule(e, now)
	}
}

func (c *Cache) isDirty() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirty
}

// BreakerOpen reports whether the exporter's circuit breaker is open.
func (c *Cache) BreakerOpen(exporterAddr netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.exporters[exporterAddr.Unmap()]
	return ok && e.breaker.open
}
