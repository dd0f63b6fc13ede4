// Package networks fills each flow's network attributes (Src/DstNetName, Role, Site, Region,
// Tenant), geolocation (Src/DstCountry, GeoState, GeoCity) and, through the "geoip" AS number
// provider, SrcAS and DstAS, from three sources: static networks, network sources fetched
// over HTTP, and GeoIP databases (enrich/geoip).
//
// # Design
//
// A flow costs two lookups and two copies. Everything else is done when a source changes:
// the prefixes of all sources are merged into one longest-prefix table (gaissmai/bart) whose
// leaves hold the attributes already resolved for that prefix (each attribute from the
// source of highest precedence that has it, the longest prefix within a source) and already
// encoded, per direction, as schema fragments. Leaves are interned, so a million GeoIP
// networks share as many leaves as there are distinct records. A new table is built aside and
// swapped in with one atomic store: flows read the old or the new one, never a mix, and never
// wait. The table is exact: for an address, the longest prefix of the union of all sources
// is the one whose resolved attributes are right, since every source's prefixes that hold
// the address also hold that prefix. When the table is large (a GeoIP database), its IPv4
// part is also laid out as a DIR-24-8 array (flat.go) built with it: an IPv4 lookup reads one
// or two entries and the leaf instead of walking three or four trie nodes.
//
// Entries may name a VRF: a table per such VRF holds the VRF's prefixes and the other
// prefixes nested in them, resolved with the VRF's entries first; an address outside them
// falls back to the global table. A flow's source address is looked up in its ingress VRF,
// its destination in its egress VRF, each falling back to the other when the exporter sent
// only one (traffic that stays in its VRF, the common case).
package networks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/enrich/geoip"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
	"flowzero/schema"
)

// Options are what New needs besides the configuration.
type Options struct {
	// ASN fills SrcAS and DstAS when they are still 0 (the "geoip" AS number provider,
	// reached after the others).
	ASN bool
	// Logger receives load and fetch messages.
	Logger *slog.Logger
	// CacheDir holds the network sources' last good copies when their cache-file is unset
	// (default var/network-sources).
	CacheDir string
	// HTTPClient fetches the network sources (default: a client of its own). Each source
	// uses a copy with its own redirect policy.
	HTTPClient *http.Client
}

// Enricher fills flows' network attributes. It is safe for concurrent use by several
// workers; Start loads GeoIP and the network sources, Stop stops refreshing them.
type Enricher struct {
	cfg     Configuration
	schema  *schema.Schema
	asn     bool
	log     *slog.Logger
	table   atomic.Pointer[table]
	geo     *geoip.Databases // nil without databases
	sources []*source        // in name order
	metrics *metrics
	health  *health.State

	mu            sync.Mutex // the inputs of the next table
	static        []Entry
	sourceEntries map[string][]Entry
	geoLayer      *geoip.Layer
}

// New checks the configuration, builds the table of the static networks and prepares (without
// starting) GeoIP and the network sources. Metrics go to reg.
func New(reg prometheus.Registerer, cfg Configuration, s *schema.Schema, opts Options) (*Enricher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	static, _ := staticEntries(cfg.Networks)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CacheDir == "" {
		opts.CacheDir = defaultCacheDir
	}
	cacheFiles, err := cfg.cacheFiles(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	e := &Enricher{cfg: cfg, schema: s, asn: opts.ASN, log: opts.Logger.With("component", "networks"),
		health: health.NewState(nil), static: static, sourceEntries: map[string][]Entry{}}
	e.metrics = newMetrics(reg, e)
	if len(cfg.GeoIP.Databases) > 0 {
		g, err := geoip.New(reg, cfg.GeoIP, opts.Logger)
		if err != nil {
			return nil, err
		}
		e.geo = g
	}
	for _, name := range slices.Sorted(mapsKeys(cfg.NetworkSources)) {
		sc := cfg.NetworkSources[name]
		sc.CacheFile = cacheFiles[name]
		client := *opts.HTTPClient
		src := &source{
			name: name, cfg: sc, client: &client,
			log:      e.log.With("source", name),
			metrics:  e.metrics.source(name),
			health:   e.health,
			logLimit: lograte.New(3, time.Minute),
			onChange: func(name string, entries []Entry) {
				e.mu.Lock()
				e.sourceEntries[name] = entries
				e.mu.Unlock()
				e.rebuild("network source " + name)
			},
		}
		client.CheckRedirect = src.checkRedirect
		e.sources = append(e.sources, src)
	}
	e.rebuild("")
	return e, nil
}

// Name identifies the network attributes in /healthz.
func (e *Enricher) Name() string { return "networks" }

// Health implements health.Reporter: degraded while a network source has failed its last
// fetches or cannot write its cached copy, and while the GeoIP databases failed to read
// (the previous data serving meanwhile).
func (e *Enricher) Health() health.Report {
	if e.geo != nil {
		if err := e.geo.Err(); err != nil {
			e.health.Set("geoip", fmt.Sprintf("%v (the previous data stays until the files read)", err))
		} else {
			e.health.Clear("geoip")
		}
	}
	return e.health.Report()
}

// Start reads the GeoIP databases and the network sources' cached copies, fetches the
// sources that have none (within their timeout), then refreshes everything in the
// background. Only a missing non-optional GeoIP database is an error: a source that cannot
// be fetched is logged and counted, and retried at its interval.
func (e *Enricher) Start() error {
	if e.geo != nil {
		if err := e.geo.Start(func(l *geoip.Layer) {
			e.mu.Lock()
			e.geoLayer = l
			e.mu.Unlock()
			e.rebuild("GeoIP")
		}); err != nil {
			return err
		}
	}
	// Sources without a cached copy are fetched at once, in parallel: the start waits at
	// most one timeout, whatever the number of sources down.
	var wg sync.WaitGroup
	for _, s := range e.sources {
		if !s.loadCache() {
			wg.Go(func() {
				if err := s.refresh(context.Background()); err != nil {
					s.warn("network source not fetched; retried at its interval", "error", err)
				}
			})
		}
	}
	wg.Wait()
	for _, s := range e.sources {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.run(s.stop, s.done)
	}
	return nil
}

// Stop stops refreshing the sources and checking the GeoIP files.
func (e *Enricher) Stop() {
	for _, s := range e.sources {
		if s.stop != nil {
			close(s.stop)
			<-s.done
			s.stop = nil
		}
	}
	if e.geo != nil {
		e.geo.Stop()
	}
}

// rebuild builds a table from the current inputs and swaps it in.
func (e *Enricher) rebuild(why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	start := time.Now()
	b := newBuilder(e.schema, e.asn)
	b.flat = e.cfg.IPv4Array
	b.flat6 = e.cfg.IPv6Array
	add(b.static, e.static)
	for _, s := range e.sources {
		add(b.source, e.sourceEntries[s.name])
	}
	b.geo = e.geoLayer
	t := b.build()
	e.table.Store(t)
	e.metrics.builds.Inc()
	if b.dropped > 0 {
		e.metrics.dropped.Add(float64(b.dropped))
		e.log.Warn("network attribute values left out of flows", "values", b.dropped, "first", b.first)
	}
	if why != "" {
		e.log.Info("network attributes updated", "after", why, "prefixes", t.prefixes, "records", t.leaves,
			"duration", time.Since(start).Round(time.Millisecond))
	}
}

// Enrich appends the attributes of the flow's source and destination addresses. Columns
// already set (by the decoder) are kept; SrcAS and DstAS are set only when still 0 and the
// "geoip" provider is on.
func (e *Enricher) Enrich(fm *schema.FlowMessage) {
	t := e.table.Load()
	var src, dst leaf
	var srcOK, dstOK bool
	srcVRF, dstVRF := fm.IngressVRFID, fm.EgressVRFID
	if t.vrfs != nil {
		if srcVRF == 0 {
			srcVRF = dstVRF
		}
		if dstVRF == 0 {
			dstVRF = srcVRF
		}
	}
	if fm.SrcAddr.IsValid() {
		src, srcOK = t.lookup(fm.SrcAddr.Unmap(), srcVRF)
	}
	if fm.DstAddr.IsValid() {
		dst, dstOK = t.lookup(fm.DstAddr.Unmap(), dstVRF)
	}
	var seen uint8
	if srcOK {
		fm.AppendFragment(src.frag[0])
		if fm.SrcAS == 0 {
			fm.SrcAS = src.asn
		}
		seen = src.from << 3
	}
	if dstOK {
		fm.AppendFragment(dst.frag[1])
		if fm.DstAS == 0 {
			fm.DstAS = dst.asn
		}
		seen |= dst.from
	}
	e.metrics.count(fm.SrcAddr, seen)
}

// Lookup returns the attributes flows get for a in vrf (0: outside any VRF), as resolved
// from every source, and whether any source knows a.
func (e *Enricher) Lookup(a netip.Addr, vrf uint32) (Attributes, bool) {
	if l, ok := e.table.Load().lookup(a.Unmap(), vrf); ok {
		return *l.attrs, true
	}
	return Attributes{}, false
}

// Refresh fetches every network source now (the background refresh does it every interval)
// and tells the first error.
func (e *Enricher) Refresh(ctx context.Context) error {
	var first error
	for _, s := range e.sources {
		if err := s.refresh(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// GeoIP returns the GeoIP databases, or nil when none is configured.
func (e *Enricher) GeoIP() *geoip.Databases { return e.geo }
