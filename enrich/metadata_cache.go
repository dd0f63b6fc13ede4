package enrich

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/enrich/classifier"
	"flowzero/enrich/snmp"
	"flowzero/internal/clock"
	"flowzero/internal/lograte"
	"flowzero/schema"
)

// MetadataCache fills each flow's exporter and interface columns, as Metadata does, from
// static metadata, SNMP and classifier rules together. For each exporter, and each of its
// interfaces (and VLAN, when a rule reads Interface.VLAN), the three sources are merged and
// the rules run once; the result is encoded into schema fragments and cached. A flow then
// costs what Metadata's does: an exporter lookup, two interface lookups in lock-free tables
// and three fragment copies. When SNMP answers, or a sysName arrives, the fragments of the
// interfaces concerned are rebuilt and swapped atomically.
//
// Precedence, per column: static metadata (enrich.exporters), then the rules (whose
// Classify actions never change a value static metadata set, and whose SetName and
// SetDescription replace SNMP's name and description), then SNMP. Rules read the static
// name, description and speed when set, SNMP's otherwise. An interface whose static entry
// (or the exporter's static default) has a name is not polled.
//
// MetadataCache is safe for concurrent use by the collector's workers.
type MetadataCache struct {
	schema *schema.Schema
	cfg    DynamicMetadataConfiguration
	static *Metadata // nil without enrich.exporters
	rules  *classifier.Classifier
	snmp   *snmp.Cache // nil with SNMP off
	clock  clock.Clock
	log    *slog.Logger
	// byVLAN keys interfaces by (index, VLAN): a rule reads Interface.VLAN. It changes
	// only with the rules (ReloadRules, m.mu held).
	byVLAN atomic.Bool
	// maxExporters bounds the exporters cached (maxSeenExporters; tests lower it).
	maxExporters int

	// exporters maps exporter addresses to their state, copied on write: flows read it
	// without locking.
	exporters atomic.Pointer[addrTable[*exporterState]]
	// epoch changes at each sweep; a flow stores it in the interfaces it uses, so that the
	// sweep knows which were used since the previous one.
	epoch atomic.Uint32

	// mu serializes changes: new exporters and interfaces, SNMP updates, sweeps.
	mu      sync.Mutex
	slots   int
	metrics *metadataCacheMetrics
	logRate *lograte.Limiter

	stop chan struct{}
	done sync.WaitGroup
}

// exporterState is one exporter's cached columns.
type exporterState struct {
	addr   netip.Addr
	static *exporterInfo // nil: not in enrich.exporters
	// name is the exporter's name as rules see it (guarded by MetadataCache.mu).
	name   string
	result atomic.Pointer[exporterResult]
	// dense holds interfaces of index below maxDenseIndex (unless byVLAN), sparse the
	// others by index<<16 | VLAN; both are copied on write.
	dense  atomic.Pointer[[]*ifaceSlot]
	sparse atomic.Pointer[map[uint64]*ifaceSlot]
	// fallback is what flows on new interfaces get when the cache is full: the static
	// default interface, or nothing.
	fallback *ifaceSlot
	rejected [rejectReasonCount]prometheus.Counter
}

type exporterResult struct {
	fragment *schema.Fragment
	reject   bool
}

// ifaceSlot is one interface's cached columns. Its columns never change: a refresh
// replaces the slot, so that a flow reaches the fragments with one pointer less.
type ifaceSlot struct {
	index uint32
	vlan  uint16
	// used is the epoch of the last flow that used it.
	used atomic.Uint32
	// lastUsed is the time of the last sweep that saw it used (guarded by mu).
	lastUsed time.Time
	in, out  *schema.Fragment
	reject   bool
	// unknown: no source gave a name (index not 0).
	unknown bool
	// snmp: SNMP was asked about it (no static name), so the sweep tells SNMP it is used.
	snmp bool
}

type rejectReason uint8

const (
	rejectExporter rejectReason = iota
	rejectInterface
	rejectUnknown
	rejectReasonCount
)

var rejectReasonNames = [rejectReasonCount]string{"exporter-rule", "interface-rule", "unknown-interface"}

// MetadataCacheDependencies are what NewMetadataCache needs beside its configuration.
type MetadataCacheDependencies struct {
	// Registry receives the metrics (of the cache, the rules and SNMP); nil: not registered.
	Registry prometheus.Registerer
	// Clock tells the time (clock.System{} when nil).
	Clock clock.Clock
	// Logger receives rate-limited warnings (slog.Default() when nil).
	Logger *slog.Logger
}

// NewMetadataCache builds the cache for the exporters' static metadata and cfg. It returns
// nil when cfg enables nothing (Metadata alone serves static metadata then).
func NewMetadataCache(cfg DynamicMetadataConfiguration, exporters map[string]ExporterMetadata, s *schema.Schema, deps MetadataCacheDependencies) (*MetadataCache, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	static, err := NewMetadata(exporters, s)
	if err != nil {
		return nil, err
	}
	m := &MetadataCache{
		schema:  s,
		cfg:     cfg,
		static:  static,
		clock:   clock.Or(deps.Clock),
		log:     deps.Logger,
		logRate: lograte.New(3, 30*time.Second),
		stop:    make(chan struct{}),

		maxExporters: maxSeenExporters,
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.metrics, err = newMetadataCacheMetrics(deps.Registry); err != nil {
		return nil, err
	}
	if m.rules, err = classifier.New(deps.Registry, cfg.Configuration, m.log); err != nil {
		return nil, err
	}
	m.byVLAN.Store(m.rules.UsesVLAN())
	if cfg.SNMP.Enabled {
		if m.snmp, err = snmp.New(deps.Registry, cfg.SNMP.Configuration, snmp.Dependencies{Clock: m.clock, Logger: m.log}); err != nil {
			return nil, err
		}
		m.snmp.OnUpdate(m.snmpUpdate)
	}
	m.exporters.Store(newAddrTable[*exporterState]())
	m.epoch.Store(1)
	return m, nil
}

// SNMP returns the SNMP cache, nil when SNMP is off.
func (m *MetadataCache) SNMP() *snmp.Cache { return m.snmp }

// Start starts SNMP (reading its cache file) and the periodic sweep of unused interfaces.
func (m *MetadataCache) Start() error {
	if m.snmp != nil {
		if err := m.snmp.Start(); err != nil {
			return err
		}
	}
	interval := min(m.cfg.ClassifierCacheDuration/4, time.Minute)
	m.done.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sweep()
			}
		}
	})
	return nil
}

// Stop stops the sweep and SNMP, saving its cache file.
func (m *MetadataCache) Stop() error {
	close(m.stop)
	m.done.Wait()
	if m.snmp != nil {
		return m.snmp.Stop()
	}
	return nil
}

// Enrich appends the exporter's and the flow's interfaces' columns, or rejects the flow.
// Columns the decoder already set are kept.
func (m *MetadataCache) Enrich(fm *schema.FlowMessage) {
	e := m.exporter(fm.ExporterAddress)
	if e == nil {
		// More exporters than the cache holds: static metadata only.
		if m.static != nil {
			m.static.Enrich(fm)
		}
		return
	}
	er := e.result.Load()
	if er.reject {
		e.rejected[rejectExporter].Inc()
		fm.Reject()
		return
	}
	// The common case, inlined: interfaces numbered below maxDenseIndex, not keyed by VLAN.
	var in, out *ifaceSlot
	if !m.byVLAN.Load() {
		in, out = e.denseSlot(fm.InIf), e.denseSlot(fm.OutIf)
	}
	if in == nil {
		in = m.iface(e, fm.InIf, fm.SrcVlan)
	}
	if out == nil {
		out = m.iface(e, fm.OutIf, fm.DstVlan)
	}
	// A store once per sweep interval, not per flow: the cache lines stay shared.
	if epoch := m.epoch.Load(); in.used.Load() != epoch || out.used.Load() != epoch {
		in.used.Store(epoch)
		out.used.Store(epoch)
	}
	switch {
	case in.reject || out.reject:
		e.rejected[rejectInterface].Inc()
		fm.Reject()
		return
	case (in.unknown || out.unknown) && m.cfg.DropUnknownInterfaces:
		e.rejected[rejectUnknown].Inc()
		fm.Reject()
		return
	}
	fm.AppendFragment(er.fragment)
	fm.AppendFragment(in.in)
	fm.AppendFragment(out.out)
}

// exporter returns the state of the exporter at a, built on first sight; nil past
// maxExporters exporters.
func (m *MetadataCache) exporter(a netip.Addr) *exporterState {
	t := m.exporters.Load()
	if e, ok := t.get(a); ok {
		return e
	}
	if t.len() >= m.maxExporters {
		// Without the lock: spoofed sources beyond the bound cost no contention.
		m.metrics.exportersFull.Inc()
		return nil
	}
	return m.newExporter(a)
}

// denseSlot returns the cached slot of an interface numbered below maxDenseIndex, or nil.
func (e *exporterState) denseSlot(index uint32) *ifaceSlot {
	if d := *e.dense.Load(); index < uint32(len(d)) {
		return d[index]
	}
	return nil
}

// iface returns the cached slot of an interface, built on first sight: the slow path of
// denseSlot.
func (m *MetadataCache) iface(e *exporterState, index uint32, vlan uint16) *ifaceSlot {
	if s := m.slot(e, index, vlan); s != nil {
		return s
	}
	if s := m.newSlot(e, index, vlan); s != nil {
		return s
	}
	return e.fallback
}

// newExporter builds an exporter's state (the slow path of exporter).
func (m *MetadataCache) newExporter(a netip.Addr) *exporterState {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.exporters.Load()
	if e, ok := cur.get(a); ok {
		return e
	}
	if cur.len() >= m.maxExporters {
		m.metrics.exportersFull.Inc()
		return nil
	}
	e := &exporterState{addr: a.Unmap()}
	if m.static != nil {
		e.static = m.static.exporter(e.addr)
	}
	e.dense.Store(&[]*ifaceSlot{})
	e.sparse.Store(&map[uint64]*ifaceSlot{})
	e.result.Store(m.computeExporter(e))
	e.fallback = &ifaceSlot{}
	if e.static != nil && e.static.def != nil {
		e.fallback = &ifaceSlot{in: e.static.def.in, out: e.static.def.out}
	}
	for r := range e.rejected {
		e.rejected[r] = m.metrics.rejected.WithLabelValues(e.addr.String(), rejectReasonNames[r])
	}
	m.exporters.Store(cur.with(e.addr, e))
	return e
}

// newSlot classifies an interface and caches it (the slow path of iface); nil when the
// cache is full.
func (m *MetadataCache) newSlot(e *exporterState, index uint32, vlan uint16) *ifaceSlot {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.byVLAN.Load() {
		vlan = 0
	}
	if s := m.slot(e, index, vlan); s != nil {
		return s
	}
	if m.slots >= m.cfg.ClassifierCacheSize {
		m.metrics.full.Inc()
		return nil
	}
	m.metrics.misses.Inc()
	s := m.computeInterface(e, index, vlan)
	s.lastUsed = m.clock.Now()
	m.store(e, s)
	m.slots++
	m.metrics.entries.Set(float64(m.slots))
	return s
}

// store puts s in its exporter's tables, in place of the slot it refreshes if any. m.mu is
// held.
func (m *MetadataCache) store(e *exporterState, s *ifaceSlot) {
	if !m.byVLAN.Load() && s.index < maxDenseIndex {
		cur := *e.dense.Load()
		next := make([]*ifaceSlot, max(len(cur), int(s.index)+1))
		copy(next, cur)
		next[s.index] = s
		e.dense.Store(&next)
		return
	}
	cur := *e.sparse.Load()
	next := make(map[uint64]*ifaceSlot, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[uint64(s.index)<<16|uint64(s.vlan)] = s
	e.sparse.Store(&next)
}

// slot returns a cached interface, or nil.
func (m *MetadataCache) slot(e *exporterState, index uint32, vlan uint16) *ifaceSlot {
	byVLAN := m.byVLAN.Load()
	if !byVLAN && index < maxDenseIndex {
		if d := *e.dense.Load(); index < uint32(len(d)) {
			return d[index]
		}
		return nil
	}
	if !byVLAN {
		vlan = 0
	}
	return (*e.sparse.Load())[uint64(index)<<16|uint64(vlan)]
}

// eachSlot calls fn for each cached interface of e. m.mu is held.
func (m *MetadataCache) eachSlot(e *exporterState, fn func(*ifaceSlot)) {
	for _, s := range *e.dense.Load() {
		if s != nil {
			fn(s)
		}
	}
	for _, s := range *e.sparse.Load() {
		fn(s)
	}
}

// computeExporter merges an exporter's static metadata, sysName and rules into its columns.
// m.mu is held.
func (m *MetadataCache) computeExporter(e *exporterState) *exporterResult {
	var st ExporterMetadata
	if e.static != nil {
		st = *e.static.meta
	}
	name := st.Name
	if name == "" && m.snmp != nil {
		name, _ = m.snmp.ExporterName(e.addr)
	}
	e.name = name
	cl := classifier.ExporterClassification{Group: st.Group, Role: st.Role, Site: st.Site, Region: st.Region, Tenant: st.Tenant}
	m.rules.ClassifyExporter(classifier.Exporter{IP: e.addr.String(), Name: name}, &cl)
	info, err := newExporterInfo(&ExporterMetadata{Name: name, Group: cl.Group, Role: cl.Role, Site: cl.Site, Region: cl.Region, Tenant: cl.Tenant}, m.schema)
	r := &exporterResult{reject: cl.Reject}
	if err != nil {
		m.encodeError(e, 0, err)
	} else {
		r.fragment = info.fragment
	}
	return r
}

// computeInterface merges an interface's static metadata, SNMP answer and rules into its
// columns. m.mu is held.
func (m *MetadataCache) computeInterface(e *exporterState, index uint32, vlan uint16) *ifaceSlot {
	var st InterfaceMetadata
	if e.static != nil {
		if i, ok := e.static.meta.Interfaces[index]; ok {
			st = i
		} else if d := e.static.meta.Default; d != nil {
			st = *d
		}
	}
	name, description, speed := st.Name, st.Description, st.Speed
	known := name != ""
	polled := m.snmp != nil && index != 0 && st.Name == ""
	if polled {
		if a, ok := m.snmp.Lookup(e.addr, index); ok && a.Found {
			known = true
			name = a.Interface.Name
			if description == "" {
				description = a.Interface.Description
			}
			if speed == 0 {
				speed = a.Interface.Speed
			}
		}
	}
	boundary, _ := boundaryValue(st.Boundary) // validated with the configuration
	cl := classifier.InterfaceClassification{
		Provider: st.Provider, Connectivity: st.Connectivity, Boundary: classifier.Boundary(boundary),
		Name: st.Name, Description: st.Description,
	}
	m.rules.ClassifyInterface(classifier.Exporter{IP: e.addr.String(), Name: e.name},
		classifier.Interface{Index: index, Name: name, Description: description, Speed: speed, VLAN: vlan}, &cl)
	if cl.Name != "" {
		name = cl.Name
	}
	if cl.Description != "" {
		description = cl.Description
	}
	r := &ifaceSlot{index: index, vlan: vlan, reject: cl.Reject, unknown: index != 0 && !known, snmp: polled}
	ii, err := newInterfaceInfo(&InterfaceMetadata{
		Name: name, Description: description, Speed: speed,
		Provider: cl.Provider, Connectivity: cl.Connectivity, Boundary: boundaryNames[cl.Boundary],
	}, m.schema)
	if err != nil {
		m.encodeError(e, index, err)
		return r
	}
	r.in, r.out = ii.in, ii.out
	return r
}

var boundaryNames = [...]string{classifier.BoundaryUndefined: "", classifier.BoundaryExternal: "external", classifier.BoundaryInternal: "internal"}

// encodeError reports columns that do not fit in a fragment (strings of several kilobytes
// from a rule): the flows get none of them.
func (m *MetadataCache) encodeError(e *exporterState, index uint32, err error) {
	m.metrics.encodeErrors.Inc()
	if errors.Is(err, schema.ErrFragmentSize) {
		err = errors.New("the columns take more than 4 KiB")
	}
	if ok, suppressed := m.logRate.Allow(m.clock.Now()); ok {
		m.log.Warn("exporter or interface columns not encoded", "exporter", e.addr.String(), "interface", index,
			"error", err, "suppressed", suppressed)
	}
}

// snmpUpdate rebuilds the columns an SNMP answer changed.
func (m *MetadataCache) snmpUpdate(u snmp.Update) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.exporters.Load().get(u.Exporter)
	if !ok {
		return
	}
	refresh := func(s *ifaceSlot) {
		n := m.computeInterface(e, s.index, s.vlan)
		n.used.Store(s.used.Load())
		n.lastUsed = s.lastUsed
		m.store(e, n)
		m.metrics.refreshes.Inc()
	}
	if u.ExporterName {
		// Interface rules read the exporter's name: every interface is classified again.
		e.result.Store(m.computeExporter(e))
		m.metrics.refreshes.Inc()
		m.eachSlot(e, refresh)
		return
	}
	for _, index := range u.Indexes {
		if !m.byVLAN.Load() {
			if s := m.slot(e, index, 0); s != nil {
				refresh(s)
			}
			continue
		}
		for k, s := range *e.sparse.Load() {
			if uint32(k>>16) == index {
				refresh(s)
			}
		}
	}
}

// ReloadRules compiles the exporter and interface rules of cfg and classifies every cached
// exporter and interface again with them: flows get the new columns from the next one on. A
// rule that does not compile is an error naming it and the position in it, and the previous
// rules stay.
func (m *MetadataCache) ReloadRules(cfg classifier.Configuration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if slices.Equal(cfg.ExporterClassifiers, m.cfg.ExporterClassifiers) &&
		slices.Equal(cfg.InterfaceClassifiers, m.cfg.InterfaceClassifiers) {
		return nil // a reload for another key: nothing to classify again
	}
	rules, err := m.rules.Reload(cfg)
	if err != nil {
		return err
	}
	m.rules = rules
	m.cfg.Configuration = cfg
	rekey := rules.UsesVLAN() != m.byVLAN.Load()
	m.byVLAN.Store(rules.UsesVLAN())
	m.exporters.Load().values(func(e *exporterState) {
		e.result.Store(m.computeExporter(e))
		m.metrics.refreshes.Inc()
		if rekey {
			// Interfaces are now keyed with or without their VLAN: forgotten, and classified
			// again on their next flow.
			m.eachSlot(e, func(*ifaceSlot) { m.slots-- })
			e.dense.Store(&[]*ifaceSlot{})
			e.sparse.Store(&map[uint64]*ifaceSlot{})
			return
		}
		m.eachSlot(e, func(s *ifaceSlot) {
			n := m.computeInterface(e, s.index, s.vlan)
			n.used.Store(s.used.Load())
			n.lastUsed = s.lastUsed
			m.store(e, n)
			m.metrics.refreshes.Inc()
		})
	})
	m.metrics.entries.Set(float64(m.slots))
	return nil
}

// sweep notes which interfaces flows used since the previous sweep and tells SNMP of the
// exporters used and of their interfaces it was asked about (so that it refreshes them and
// keeps the sysName), and forgets those unused for classifier-cache-duration.
// Interfaces named statically are never polled.
func (m *MetadataCache) sweep() {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	epoch := m.epoch.Load()
	m.epoch.Store(epoch + 1)
	m.exporters.Load().values(func(e *exporterState) {
		var used []uint32
		exporterUsed := false
		expired := map[*ifaceSlot]bool{}
		m.eachSlot(e, func(s *ifaceSlot) {
			switch {
			case s.used.Load() == epoch:
				s.lastUsed = now
				exporterUsed = true
				if s.snmp && (len(used) == 0 || used[len(used)-1] != s.index) {
					used = append(used, s.index)
				}
			case now.Sub(s.lastUsed) >= m.cfg.ClassifierCacheDuration:
				expired[s] = true
			}
		})
		if len(expired) > 0 {
			m.forget(e, expired)
		}
		if m.snmp != nil && exporterUsed {
			m.snmp.Touch(e.addr, used...)
		}
	})
}

// forget removes interfaces from an exporter's tables. m.mu is held.
func (m *MetadataCache) forget(e *exporterState, gone map[*ifaceSlot]bool) {
	dense := append([]*ifaceSlot(nil), *e.dense.Load()...)
	for i, s := range dense {
		if gone[s] {
			dense[i] = nil
		}
	}
	for len(dense) > 0 && dense[len(dense)-1] == nil {
		dense = dense[:len(dense)-1]
	}
	e.dense.Store(&dense)
	sparse := map[uint64]*ifaceSlot{}
	for k, s := range *e.sparse.Load() {
		if !gone[s] {
			sparse[k] = s
		}
	}
	e.sparse.Store(&sparse)
	m.slots -= len(gone)
	m.metrics.expired.Add(float64(len(gone)))
	m.metrics.entries.Set(float64(m.slots))
}

type metadataCacheMetrics struct {
	entries                                                       prometheus.Gauge
	misses, full, refreshes, expired, exportersFull, encodeErrors prometheus.Counter
	rejected                                                      *prometheus.CounterVec
}

func newMetadataCacheMetrics(reg prometheus.Registerer) (*metadataCacheMetrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowzero", Subsystem: "enrich", Name: name, Help: help})
	}
	m := &metadataCacheMetrics{
		entries: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "flowzero", Subsystem: "enrich", Name: "metadata_cache_entries",
			Help: "(exporter, interface) pairs whose merged columns (static, SNMP, rules) are cached."}),
		misses:        counter("metadata_cache_misses_total", "Flows on an (exporter, interface) pair not cached yet: it was classified and cached. Every other flow is a hit."),
		full:          counter("metadata_cache_full_total", "Flows on a new interface that found the cache full (classifier-cache-size): they got only their exporter's columns and static default interface."),
		refreshes:     counter("metadata_cache_refreshes_total", "Exporters or interfaces classified again because SNMP answered with new values."),
		expired:       counter("metadata_cache_expired_total", "Interfaces forgotten after classifier-cache-duration without flows."),
		exportersFull: counter("metadata_exporters_full_total", "Flows of exporters beyond the 4096 the cache holds: they got static metadata only."),
		encodeErrors:  counter("metadata_encode_errors_total", "Exporters or interfaces whose columns did not fit in a fragment (4 KiB): their flows get none."),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowzero", Subsystem: "enrich", Name: "rejected_flows_total",
			Help: "Flows dropped by enrichment, by exporter and reason: a Reject() in an exporter or interface rule, or an interface no source knows with drop-unknown-interfaces."},
			[]string{"exporter", "reason"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.entries, m.misses, m.full, m.refreshes, m.expired, m.exportersFull, m.encodeErrors, m.rejected} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
