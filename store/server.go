package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/clock"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
	"flowzero/output"
	"flowzero/schema"
	"flowzero/store/ddl"
	"flowzero/store/engine"
	"flowzero/store/native"
)

// ServerSink is the store output of a split collector's outlet when outputs.store.clickhouse.url
// names a ClickHouse server: it inserts each unit of the outlet (a partition's offset range,
// outlet.UnitSink) in one INSERT over the server's HTTP interface, into the flows table, with
// the unit's insert_deduplication_token and deduplicate_blocks_in_dependent_materialized_views
// in the statement's SETTINGS. Every outlet of the group inserts into the same server, so a
// unit inserted by an outlet that died before committing, and inserted again by the outlet
// that takes its partition, is stored once: the server's tables remember the token
// (non_replicated_deduplication_window, set by `flowzero store migrate` in mode outlet, or a
// Replicated table's own window). The aggregated tables are filled by the server's
// materialized views, which deduplicate each block on their own with that setting.
//
// The flows go in the Native format (native.Encoder, as the embedded sink): the server parses
// it several times more cheaply than Protobuf, it needs no .proto file in the server's
// format_schema_path, and a malformed flow is left out and counted rather than failing the
// whole unit. The body is one unit, which the outlet bounds (outlet.max-unit-bytes). A failed
// INSERT is tried again with the same token (server.retries), so that a retry after a reply
// lost on the way stores nothing twice; when every attempt fails the error goes to the outlet,
// which commits nothing and consumes the partition again.
//
// It accepts units only: in mode all there are no units, and configuration refuses a server
// there (app.Configuration.Validate).
type ServerSink struct {
	cfg    Configuration
	schema *schema.Schema
	log    *slog.Logger
	clock  clock.Clock
	m      *serverMetrics
	client *engine.HTTPClient
	ddl    *ddl.DDL
	// insert is the INSERT statement without its token; format is Native (enc set) or
	// Protobuf.
	insert string
	format string

	// mu makes units go one at a time through the encoder.
	mu      sync.Mutex
	enc     *native.Encoder
	running atomic.Bool

	health   *health.State
	inserted atomic.Int64
	dropped  atomic.Int64
	failures atomic.Int64
	errLog   *lograte.Limiter
	// sleep waits between attempts; tests shorten it.
	sleep func(ctx context.Context, d time.Duration) error
}

// NewServerSink returns a sink inserting into the server of cfg.ClickHouse. Nothing is
// contacted before Start.
func NewServerSink(r prometheus.Registerer, cfg Configuration, deps Dependencies) (*ServerSink, error) {
	if err := cfg.ValidateSink(); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if cfg.ClickHouse.URL == "" {
		return nil, errors.New("store: clickhouse.url: no server to insert into")
	}
	if deps.Schema == nil {
		return nil, errors.New("store: no schema")
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	client, err := engine.NewHTTPClient(cfg.ClickHouse)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	m, err := newServerMetrics(r)
	if err != nil {
		return nil, fmt.Errorf("store: metrics: %w", err)
	}
	s := &ServerSink{
		cfg: cfg, schema: deps.Schema, log: log, clock: clock.Or(deps.Clock), m: m, client: client,
		ddl:    NewDDL(cfg, deps.Schema, ""),
		health: health.NewState(deps.Clock),
		errLog: lograte.New(3, time.Minute),
		sleep:  sleepCtx,
	}
	if enc, err := native.NewEncoder(deps.Schema); err == nil {
		s.enc, s.insert, s.format = enc, s.ddl.NativeInsertStatement(enc.Columns()), "Native"
	} else {
		// The Protobuf input reads the .proto `flowzero store migrate` installs.
		log.Warn("store: inserting Protobuf into the server", "error", err)
		s.insert, s.format = s.ddl.InsertStatement(), "Protobuf"
	}
	return s, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start checks that the server has the flows table and that it remembers deduplication
// tokens: without them every unit inserted again would be stored twice.
func (s *ServerSink) Start() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Server.InsertTimeout)
	defer cancel()
	if err := s.checkTables(ctx); err != nil {
		return err
	}
	s.running.Store(true)
	s.log.Info("store: inserting into the ClickHouse server", "table", s.ddl.FlowsTable(), "format", s.format)
	return nil
}

// checkTables reads the flows table's engine and settings from system.tables.
func (s *ServerSink) checkTables(ctx context.Context) error {
	db := s.cfg.Database
	rows, err := engine.QueryRows(ctx, s.client, "SELECT engine, create_table_query FROM system.tables WHERE database = "+
		ddl.QuoteString(db)+" AND name = 'flows'")
	if err != nil {
		return fmt.Errorf("store: reading the flows table of the server: %w", err)
	}
	if len(rows) == 0 || len(rows[0]) < 2 {
		return fmt.Errorf("store: the server has no table %s.flows: create it with `flowzero store migrate` and this configuration", db)
	}
	eng, create := rows[0][0], rows[0][1]
	if s.cfg.Cluster == "" && !strings.HasPrefix(eng, "Replicated") && !strings.Contains(create, "non_replicated_deduplication_window") {
		return fmt.Errorf("store: the server's table %s.flows (%s) does not remember deduplication tokens: "+
			"run `flowzero store migrate` with this configuration (mode: outlet sets non_replicated_deduplication_window)", db, eng)
	}
	return nil
}

// Stop stops accepting units. A unit being inserted finishes first.
func (s *ServerSink) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running.Store(false)
	return nil
}

// Name implements output.Sink.
func (s *ServerSink) Name() string { return "store" }

// Send implements output.Sink and refuses the batch: the sink takes units only (InsertUnit).
func (s *ServerSink) Send(b *output.Batch) bool {
	flows := b.Flows
	b.Release()
	s.m.droppedNoUnit.Add(float64(flows))
	s.countDropped(flows, "a batch without deduplication token (the server sink stores the units of mode outlet only)")
	return false
}

// InsertUnit implements outlet.UnitSink: data (length-delimited flow messages, flows of them)
// in one INSERT carrying token, tried up to server.retries+1 times with the same token. It
// returns once the server has the unit, or with the last error.
func (s *ServerSink) InsertUnit(ctx context.Context, token string, data []byte, flows int) error {
	if token == "" {
		return errors.New("store: a unit needs a deduplication token")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running.Load() {
		return errors.New("store: sink not running")
	}
	body, ok := data, flows
	if s.enc != nil {
		s.enc.Reset()
		var first error
		ok, first = s.enc.AppendDelimited(data)
		if dropped := flows - ok; dropped > 0 {
			s.m.droppedInvalid.Add(float64(dropped))
			s.countDropped(dropped, "malformed flows")
			s.logError("store: malformed flows dropped", "flows", dropped, "error", first)
		}
		if ok == 0 {
			return nil
		}
		body = s.enc.Block()
	}
	stmt := ddl.WithDeduplicationToken(s.insert, token) + " FORMAT " + s.format
	var err error
	for attempt := 0; attempt <= s.cfg.Server.Retries; attempt++ {
		if attempt > 0 {
			s.m.retries.Inc()
			if err := s.sleep(ctx, s.cfg.Server.RetryDelay<<(attempt-1)); err != nil {
				break
			}
		}
		start := s.clock.Now()
		actx, cancel := context.WithTimeout(ctx, s.cfg.Server.InsertTimeout)
		err = s.client.Insert(actx, stmt, bytes.NewReader(body))
		cancel()
		s.m.insertSeconds.Observe(s.clock.Now().Sub(start).Seconds())
		if err == nil {
			s.m.inserts.Inc()
			s.m.flows.Add(float64(ok))
			s.m.bytes.Add(float64(len(body)))
			s.inserted.Add(int64(ok))
			return nil
		}
		s.m.insertErrors.Inc()
		s.logError("store: insert into the server failed", "token", token, "attempt", attempt+1, "error", err)
		if !retriable(err) || ctx.Err() != nil {
			break
		}
	}
	s.m.unitsFailed.Inc()
	n := s.failures.Add(1)
	s.health.Event(fmt.Sprintf("a unit's INSERT into the server failed (%d since start; the outlet consumes it again): %v", n, err))
	return fmt.Errorf("store: unit %s: %w", token, err)
}

// retriable tells whether an INSERT that failed with err may succeed when tried again: not
// when the server refused the statement or its data (HTTP 4xx).
func retriable(err error) bool {
	var se *engine.ServerError
	if errors.As(err, &se) {
		return se.Status >= http.StatusInternalServerError || se.Status == http.StatusTooManyRequests ||
			se.Status == http.StatusRequestTimeout
	}
	return true
}

func (s *ServerSink) logError(msg string, args ...any) {
	if ok, suppressed := s.errLog.Allow(s.clock.Now()); ok {
		s.log.Error(msg, append(args, "suppressed", suppressed)...)
	}
}

func (s *ServerSink) countDropped(flows int, why string) {
	s.dropped.Add(int64(flows))
	s.health.Event(fmt.Sprintf("%s; %d flows dropped since start", why, s.dropped.Load()))
}

// Health implements health.Reporter: degraded for health.Hold after a unit could not be
// inserted (every attempt failed) or flows were dropped (malformed).
func (s *ServerSink) Health() health.Report {
	r := s.health.Report()
	r.Counters = map[string]uint64{
		"flows-inserted": uint64(s.inserted.Load()), "flows-dropped": uint64(s.dropped.Load()),
		"units-failed": uint64(s.failures.Load()),
	}
	return r
}

type serverMetrics struct {
	inserts, insertErrors, retries, unitsFailed prometheus.Counter
	flows, bytes                                prometheus.Counter
	droppedInvalid, droppedNoUnit               prometheus.Counter
	insertSeconds                               prometheus.Histogram
}

func newServerMetrics(r prometheus.Registerer) (*serverMetrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowzero", Subsystem: "store_server", Name: name, Help: help})
	}
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "flowzero", Subsystem: "store_server", Name: "flows_dropped_total",
		Help: "Flows the server store sink did not insert, by reason.",
	}, []string{"reason"})
	m := &serverMetrics{
		inserts:        c("inserts_total", "Units inserted into the ClickHouse server."),
		insertErrors:   c("insert_errors_total", "INSERT attempts into the ClickHouse server that failed."),
		retries:        c("insert_retries_total", "INSERT attempts repeated with the same deduplication token."),
		unitsFailed:    c("units_failed_total", "Units not inserted after every attempt (the outlet consumes them again)."),
		flows:          c("flows_inserted_total", "Flows inserted into the ClickHouse server (a unit inserted again counts again)."),
		bytes:          c("bytes_inserted_total", "Bytes of INSERT bodies the ClickHouse server accepted."),
		droppedInvalid: dropped.WithLabelValues("malformed"),
		droppedNoUnit:  dropped.WithLabelValues("not a unit"),
		insertSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "flowzero", Subsystem: "store_server", Name: "insert_seconds",
			Help:    "Duration of the INSERT attempts into the ClickHouse server.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
	}
	if r != nil {
		for _, col := range []prometheus.Collector{m.inserts, m.insertErrors, m.retries, m.unitsFailed, m.flows, m.bytes, dropped, m.insertSeconds} {
			if err := r.Register(col); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
