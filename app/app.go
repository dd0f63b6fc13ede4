package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"flowzero/capture/flows"
	"flowzero/capture/server"
	"flowzero/collector"
	"flowzero/console"
	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/demo"
	"flowzero/enrich"
	"flowzero/enrich/networks"
	"flowzero/inlet"
	"flowzero/internal/clock"
	"flowzero/internal/config"
	"flowzero/internal/lograte"
	"flowzero/outlet"
	"flowzero/output"
	"flowzero/output/file"
	"flowzero/output/jsonl"
	"flowzero/output/kafka"
	"flowzero/query"
	"flowzero/query/chhttp"
	"flowzero/query/httpapi"
	"flowzero/rib/ribhttp"
	"flowzero/routing"
	"flowzero/schema"
	"flowzero/store"
)

// Dependencies are what an App needs besides its configuration.
type Dependencies struct {
	// Logger receives every component's messages (slog.Default() when nil).
	Logger *slog.Logger
	// Clock is the time every component reads dates from: flows' receive times, exporters'
	// first and last datagrams, the demo exporters' flow times (clock.System{} when nil;
	// tests give testutil.Clock()).
	Clock clock.Clock
	// Version is the collector's version, which the query API's config route reports.
	Version string
}

// App is a running `flowzero collect`.
type App struct {
	cfg       Configuration
	log       *slog.Logger
	clock     clock.Clock
	version   string
	registry  *prometheus.Registry
	schema    *schema.Schema
	netflow   *netflow.Decoder
	sflow     *sflow.Decoder
	sinks     []output.Sink
	routing   *routing.Component
	networks  *networks.Enricher    // nil without network attributes
	enricher  enrich.FlowEnricher   // nil when nothing is configured
	metadata  *enrich.MetadataCache // nil without SNMP, rules or drop-unknown-interfaces
	collector *collector.Collector
	// ConfigPath is re-read by Reload.
	ConfigPath string
	// Stdout receives the stdout sink's lines (os.Stdout by default).
	Stdout io.Writer

	// Summary, when set, receives a live summary of the traffic every SummaryInterval.
	Summary         io.Writer
	SummaryInterval time.Duration
	// Demo starts the built-in demo exporters, sending to the collector's own listeners.
	Demo *demo.Configuration

	capture *server.Server
	// chHTTP answers ClickHouse's HTTP protocol (query.clickhouse-http), when configured.
	chHTTP *chhttp.Server
	// querySvc is the query service of the API, nil without an engine to query.
	querySvc   *query.Service
	aggregator *flows.Aggregator
	kafka      *kafka.Sink
	file       *file.Sink
	store      *store.Sink
	inlet      *inlet.Inlet
	outlet     *outlet.Outlet
	// outletHealth is the outlet for /healthz, which serves before the outlet is made.
	outletHealth atomic.Pointer[outlet.Outlet]
	console      *console.Console // nil when not served
	demoCancel   context.CancelFunc
	demoDone     chan struct{}

	// wrapDecoder, when set (by tests), wraps each protocol's decoder before the collector
	// gets it, to watch what every datagram gives.
	wrapDecoder func(protocol string, d collector.Decoder) collector.Decoder
}

// New builds every component from the configuration; nothing runs before Start.
func New(cfg Configuration, deps Dependencies) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &App{cfg: cfg, log: log, clock: clock.Or(deps.Clock), version: deps.Version, registry: prometheus.NewRegistry(), Stdout: os.Stdout}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s, err := schema.New(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	a.schema = s
	nf, err := netflow.New(a.registry, cfg.NetFlow, s)
	if err != nil {
		return nil, fmt.Errorf("netflow: %w", err)
	}
	a.netflow = nf
	// A failing periodic save (full disk, unwritable directory) is retried at every tick
	// while templates change: say so, but not at every tick.
	saveLog := lograte.New(1, 10*time.Minute)
	nf.OnSaveError(func(err error) {
		if ok, suppressed := saveLog.Allow(a.clock.Now()); ok {
			log.Warn("cannot save the NetFlow templates file; retrying", "error", err, "suppressed", suppressed)
		}
	})
	sf, err := sflow.New(a.registry, cfg.SFlow, s)
	if err != nil {
		return nil, fmt.Errorf("sflow: %w", err)
	}
	a.sflow = sf
	a.routing, err = routing.New(a.registry, cfg.Routing, routing.Dependencies{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("routing: %w", err)
	}
	var steps enrich.Chain
	md, mc, err := newMetadataStep(cfg.Enrich, s, a.registry, log, a.clock)
	if err != nil {
		return nil, fmt.Errorf("enrich: %w", err)
	}
	if md != nil {
		steps = append(steps, md)
	}
	a.metadata = mc
	if cfg.Routing.Used() {
		re, err := enrich.New(cfg.Enrich, a.routing, s)
		if err != nil {
			return nil, fmt.Errorf("enrich: %w", err)
		}
		steps = append(steps, re)
	}
	if a.networks, err = newNetworks(a.registry, &cfg, s, log); err != nil {
		return nil, err
	}
	if a.networks != nil {
		steps = append(steps, a.networks)
	}
	switch len(steps) {
	case 0:
	case 1:
		a.enricher = steps[0]
	default:
		a.enricher = steps
	}
	if cfg.Mode == ModeInlet {
		// An inlet decodes nothing and has no sink.
		return a, a.newSplit()
	}
	if cfg.Outputs.Kafka.Enabled {
		k, err := kafka.New(a.registry, log, cfg.Outputs.Kafka.Configuration, s.Hash())
		if err != nil {
			return nil, fmt.Errorf("outputs.kafka: %w", err)
		}
		k.SetClock(a.clock)
		a.kafka = k
		a.sinks = append(a.sinks, k)
	}
	if cfg.Outputs.File.Enabled {
		f, err := file.New(a.registry, log, cfg.Outputs.File.Configuration)
		if err != nil {
			return nil, fmt.Errorf("outputs.file: %w", err)
		}
		f.SetClock(a.clock)
		a.file = f
		a.sinks = append(a.sinks, f)
	}
	if cfg.Outputs.Store.Enabled {
		stcfg := cfg.Outputs.Store.Configuration
		// An outlet inserts units carrying deduplication tokens (outlet.UnitSink).
		stcfg.Deduplicate = cfg.Mode == ModeOutlet
		if stcfg.ClickHouse.URL != "" {
			// Mode outlet (Validate): units inserted into the server, whichever outlet
			// inserts them.
			st, err := store.NewServerSink(a.registry, stcfg, store.Dependencies{Schema: s, Logger: log, Clock: a.clock})
			if err != nil {
				return nil, fmt.Errorf("outputs.store: %w", err)
			}
			a.sinks = append(a.sinks, st)
		} else {
			st, err := store.NewSink(a.registry, stcfg, store.Dependencies{Schema: s, Logger: log})
			if err != nil {
				return nil, fmt.Errorf("outputs.store: %w", err)
			}
			a.store = st
			a.sinks = append(a.sinks, st)
		}
	}
	if err := a.newConsole(); err != nil {
		return nil, err
	}
	return a, nil
}

// startOutlet is Start's end in mode outlet: the sinks it adds go to the outlet too.
func (a *App) startOutlet() error {
	if err := a.newSplit(); err != nil {
		return err
	}
	a.outletHealth.Store(a.outlet)
	return a.outlet.Start()
}

// Start checks every path the configuration names (CheckPaths), then starts the sinks, the
// decoders' background work and the collector.
func (a *App) Start() error {
	if a.Summary != nil && a.cfg.Mode == ModeInlet {
		// An inlet decodes no flow: the summary would stay empty.
		return errors.New("--summary: mode inlet decodes no flows to summarize (its outlets do): leave the flag out")
	}
	if err := a.cfg.CheckPaths(true); err != nil {
		return err
	}
	if a.cfg.Outputs.Stdout.Enabled {
		out := jsonl.NewSink(a.registry, a.Stdout, a.schema, a.log)
		out.SetClock(a.clock)
		a.sinks = append(a.sinks, out)
	}
	if a.Summary != nil {
		sum := NewSummarySink(a.schema, a.Summary, cmp.Or(a.SummaryInterval, 5*time.Second))
		sum.clock = a.clock
		a.sinks = append(a.sinks, sum)
	}
	if a.cfg.Mode == ModeInlet {
		if err := a.inlet.Start(); err != nil {
			return fmt.Errorf("inlet: %w", err)
		}
	} else if err := a.netflow.Start(); err != nil {
		return fmt.Errorf("netflow: %w", err)
	}
	// The RIB is loaded (snapshot, then MRT) before the first flow is decoded, so that
	// enrichment works from the first second.
	if a.cfg.Mode != ModeInlet {
		if err := a.routing.Start(); err != nil {
			return fmt.Errorf("routing: %w", err)
		}
	}
	// The SNMP cache file is read before the first flow.
	if a.metadata != nil {
		if err := a.metadata.Start(); err != nil {
			return fmt.Errorf("enrich: %w", err)
		}
	}
	if a.networks != nil {
		if err := a.networks.Start(); err != nil {
			return fmt.Errorf("enrich: %w", err)
		}
	}
	lookup, err := ribhttp.New(a.registry, a.routing.RIB())
	if err != nil {
		return err
	}
	queryAPI, err := a.queryHandler()
	if err != nil {
		return err
	}
	if err := a.startClickHouseHTTP(); err != nil {
		return err
	}
	// Any method: the handlers count their 405s.
	handlers := map[string]http.Handler{ribhttp.Path: lookup, httpapi.Prefix: queryAPI}
	a.addConsoleHandlers(handlers)
	decoders := map[string]collector.Decoder{
		"netflow": netflowDecoder{a.netflow},
		"sflow":   sflowDecoder{a.sflow},
	}
	if a.wrapDecoder != nil {
		for p, d := range decoders {
			decoders[p] = a.wrapDecoder(p, d)
		}
	}
	ccfg := a.cfg.Collector
	cdeps := collector.Dependencies{
		Schema:   a.schema,
		Decoders: decoders,
		Enricher: a.enricher, // an interface: nil stays nil
		Sinks:    a.sinks,
		Registry: a.registry,
		Logger:   a.log,
		Reload:   a.Reload,
		Handlers: handlers,
		ExporterDetails: func(addr netip.Addr) any {
			return exporterDetails(addr, map[string]detailsSource{"netflow": a.netflow, "sflow": a.sflow})
		},
		Clock: a.clock,
	}
	if a.networks != nil && a.cfg.Mode != ModeInlet {
		// Degraded while a network source fails or the GeoIP files do not read.
		cdeps.Health = append(cdeps.Health, a.networks)
	}
	if a.cfg.Routing.Used() && a.cfg.Mode != ModeInlet {
		// Degraded while the RIB snapshot fails to load or save, and after a BMP session ended.
		cdeps.Health = append(cdeps.Health, a.routing.HealthReporters()...)
	}
	a.splitCollector(&ccfg, &cdeps)
	c, err := collector.New(ccfg, cdeps)
	if err != nil {
		return err
	}
	a.collector = c
	if err := c.Start(); err != nil {
		return err
	}
	if a.cfg.Mode == ModeOutlet {
		if err := a.startOutlet(); err != nil {
			return err
		}
	}
	if a.cfg.Capture.Enabled {
		deps := server.Dependencies{Logger: a.log, Stdout: a.Stdout}
		if a.cfg.Capture.Flows.Enable {
			em := flows.NewSinkEmitter(a.enricher, a.sinks, a.cfg.Collector.BatchSize)
			agg, err := flows.New(a.registry, a.cfg.Capture.Flows, a.schema, em.Emit, em.Flush)
			if err != nil {
				return fmt.Errorf("capture.flows: %w", err)
			}
			a.aggregator, deps.Packets = agg, agg
		}
		srv, err := server.New(a.registry, a.cfg.Capture.Server, deps)
		if err != nil {
			return fmt.Errorf("capture.server: %w", err)
		}
		if err := srv.Start(); err != nil {
			return fmt.Errorf("capture.server: %w", err)
		}
		a.capture = srv
	}
	a.log.Info("flowzero collector started", "schema", a.schema.Hash(), "summary", a.cfg.summary())
	if a.Demo != nil && a.cfg.Mode != ModeOutlet {
		a.startDemo(*a.Demo)
	}
	return nil
}

// startDemo points the demo exporters at the collector's listeners: NetFlow v9 to the first
// netflow listener, IPFIX to the second (or the first), sFlow to the first sflow listener.
func (a *App) startDemo(cfg demo.Configuration) {
	cfg.NetFlow, cfg.IPFIX, cfg.SFlow = netip.AddrPort{}, netip.AddrPort{}, netip.AddrPort{}
	loopback := func(ap netip.AddrPort) netip.AddrPort {
		if ap.Addr().IsUnspecified() {
			if ap.Addr().Is4() {
				return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port())
			}
			return netip.AddrPortFrom(netip.IPv6Loopback(), ap.Port())
		}
		return ap
	}
	addrs := a.collector.ListenAddrs()
	for i, l := range a.cfg.Collector.Listeners {
		to := loopback(addrs[i])
		switch {
		case l.Protocol == "netflow" && !cfg.NetFlow.IsValid():
			cfg.NetFlow = to
		case l.Protocol == "netflow" && !cfg.IPFIX.IsValid():
			cfg.IPFIX = to
		case l.Protocol == "sflow" && !cfg.SFlow.IsValid():
			cfg.SFlow = to
		}
	}
	if !cfg.IPFIX.IsValid() {
		cfg.IPFIX = cfg.NetFlow
	}
	if cfg.Clock == nil {
		cfg.Clock = a.clock
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.demoCancel, a.demoDone = cancel, make(chan struct{})
	go func() {
		defer close(a.demoDone)
		if _, err := demo.Run(ctx, cfg); err != nil {
			a.log.Error("demo exporter stopped", "error", err)
		}
	}()
	a.log.Info("demo exporters started", "netflow-v9", cfg.NetFlow, "ipfix", cfg.IPFIX, "sflow", cfg.SFlow,
		"flows-per-second-each", cfg.FlowsPerSecond)
}

// Stop stops the collector (which drains into the sinks and stops them), then the decoders
// (which save their templates).
func (a *App) Stop() error {
	if a.demoCancel != nil {
		a.demoCancel()
		<-a.demoDone
	}
	var err error
	if a.chHTTP != nil {
		err = a.chHTTP.Stop()
	}
	if a.capture != nil {
		// Before the collector stops the sinks: the last flows go through them.
		err = a.capture.Stop()
		if a.aggregator != nil {
			a.aggregator.Flush()
		}
	}
	if a.outlet != nil {
		// Before the collector stops the sinks: the last flows are acknowledged.
		if e := a.outlet.Stop(); e != nil && err == nil {
			err = e
		}
	}
	if e := a.collector.Stop(); e != nil && err == nil {
		err = e
	}
	if a.inlet != nil {
		// After the workers stopped forwarding.
		if e := a.inlet.Stop(); e != nil && err == nil {
			err = e
		}
		return err
	}
	if e := a.netflow.Stop(); e != nil && err == nil {
		err = e
	}
	if e := a.routing.Stop(); e != nil && err == nil {
		err = e
	}
	if a.metadata != nil {
		if e := a.metadata.Stop(); e != nil && err == nil {
			err = e
		}
	}
	if a.networks != nil {
		a.networks.Stop()
	}
	return err
}

// Reload re-reads the configuration file and applies what can change while running.
func (a *App) Reload() (string, error) {
	cfg, err := Load(a.ConfigPath)
	if err != nil {
		return "", err
	}
	// The rules first: they are what can still fail (Load compiled them already).
	var restart []string
	rules := cfg.Enrich.Dynamic.Configuration
	reloaded := "collector.exporters, collector.batch-interval"
	switch {
	case a.metadata != nil:
		if err := a.metadata.ReloadRules(rules); err != nil {
			return "", config.Prefix("enrich", err)
		}
		reloaded += ", enrich.exporter-classifiers, enrich.interface-classifiers"
	case rules.Enabled():
		// Started without the metadata cache (no rules, SNMP or drop-unknown-interfaces).
		restart = append(restart, "enrich.exporter-classifiers", "enrich.interface-classifiers")
	}
	more, err := a.collector.Reload(cfg.Collector)
	if err != nil {
		return "", err
	}
	restart = append(more, restart...)
	msg := "configuration reloaded (" + reloaded + ")"
	if len(restart) > 0 {
		msg += fmt.Sprintf("; these changed but need a restart: %v", restart)
	}
	a.log.Info(msg)
	return msg, nil
}

// Schema returns the schema in use.
func (a *App) Schema() *schema.Schema { return a.schema }

// Collector returns the running collector.
func (a *App) Collector() *collector.Collector { return a.collector }

// Kafka returns the Kafka sink, or nil.
func (a *App) Kafka() *kafka.Sink { return a.kafka }

// Store returns the ClickHouse sink, or nil.
func (a *App) Store() *store.Sink { return a.store }

// File returns the file sink, or nil.
func (a *App) File() *file.Sink { return a.file }
