package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/clock"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
	"flowzero/output"
	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/engine"
	"flowzero/store/native"
)

// Sink stores encoded flows in the embedded engine, in batches cut by size
// (embedded.batch-bytes) and age (embedded.flush-interval), into a persistent data directory.
//
// Write copies each message into the current batch. The inserter converts a full batch to
// the Native format (native.Encoder: the engine reads it several times more cheaply than its
// Protobuf input) and streams it to `INSERT INTO flows (columns) FORMAT Native` (chDB's
// streaming insert: binary data never goes through the SQL parser); a message that does not
// convert is dropped and counted, the rest of its batch is stored. Should the schema have a
// column type the encoder cannot write, the batch goes as it is to `FORMAT Protobuf` with
// the schema's .proto. With pre-aggregation (ddl.DDL.PreAggregated) the encoder also groups
// the batch by the finest resolution's dimensions (native.Aggregator), summing successive
// batches for embedded.pre-aggregate-interval, and the sums go to that table in their own
// INSERT, after the flows (see insertBatch for when, and what a failure leaves).
// No allocation per flow: batch buffers, the encoder and its group table are recycled.
// Full batches wait in a bounded queue for the single inserter goroutine; when the queue is
// full the batch is dropped and its flows counted, so that a slow disk never stalls the
// collector's workers.
type Sink struct {
	cfg    Configuration
	schema *schema.Schema
	log    *slog.Logger
	clock  clock.Clock
	m      *metrics

	conn   *chdb.Conn
	ro     *engine.ReadOnly // read-only statements of other components (Engine)
	ddl    *ddl.DDL
	insert string // the INSERT statement of every batch
	format string // its input format: Native (enc set) or Protobuf
	enc    *native.Encoder
	// agg groups each batch for the pre-aggregated resolution (nil without
	// pre-aggregation); aggInsert is its INSERT.
	agg       *native.Aggregator
	aggInsert string
	// aggFlows is the number of flows summed in agg's groups, not inserted yet, and aggSince
	// when the first of them was added (inserter only).
	aggFlows int
	aggSince time.Time
	// aggMaxBytes bounds the pending groups' memory: the constant aggMaxBytes, lowered by tests.
	aggMaxBytes int
	// invalidLogged is when malformed flows were last logged (by the inserter only).
	invalidLogged time.Time

	// life keeps Stop from closing the queue under a Flush.
	life  sync.RWMutex
	mu    sync.Mutex
	cur   *batch
	first time.Time // when the first flow of cur was written
	// startCalled is set by the first Start: the engine and the goroutines are made once.
	startCalled bool
	started     bool
	stopped     bool
	err         error // first insert error since the last Flush

	// ackDropped is the queue-full drop count at the previous Acknowledge.
	ackMu      sync.Mutex
	ackDropped float64

	queue chan *batch
	free  chan *batch
	done  chan struct{}
	wg    sync.WaitGroup

	// health and counts report the sink's state to /healthz (health.go); dropLog bounds
	// the lines about dropped batches (a slow or failing engine drops one per batch).
	health  *health.State
	counts  healthCounts
	dropLog *lograte.Limiter
}

// batch is one INSERT: length-delimited messages. A batch without
// buffer is a flush marker: the inserter closes ack when it reaches it.
type batch struct {
	buf   []byte
	flows int
	ack   chan struct{}
	// token marks a unit (InsertUnit): buf is the caller's, inserted with this
	// deduplication token, and err is its outcome when ack is closed.
	token string
	err   error
}

// Dependencies are what a Sink needs besides its configuration.
type Dependencies struct {
	// Schema of the flows written to the sink (required).
	Schema *schema.Schema
	// Logger; nil is slog.Default().
	Logger *slog.Logger
	// Clock cuts batches by age and pre-aggregation windows; nil is the machine's clock.
	Clock clock.Clock
}

// NewSink returns a sink for the schema's flows. Nothing is opened before Start.
func NewSink(r prometheus.Registerer, cfg Configuration, deps Dependencies) (*Sink, error) {
	if err := cfg.ValidateSink(); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if cfg.ClickHouse.URL != "" {
		return nil, errors.New("store: clickhouse.url: the embedded sink does not insert into a server (ServerSink does)")
	}
	if deps.Schema == nil {
		return nil, errors.New("store: no schema")
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	m, err := newMetrics(r)
	if err != nil {
		return nil, fmt.Errorf("store: metrics: %w", err)
	}
	return &Sink{
		cfg: cfg, schema: deps.Schema, log: log, clock: clock.Or(deps.Clock), m: m,
		queue: make(chan *batch, cfg.Embedded.QueueLength),
		free:  make(chan *batch, cfg.Embedded.QueueLength+2),
		done:  make(chan struct{}),

		aggMaxBytes: aggMaxBytes,
		health:      health.NewState(nil),
		dropLog:     lograte.New(3, time.Minute),
	}, nil
}

// Start opens the engine, migrates the database and starts the inserter. A sink starts once:
// a second call, even after a failed first one or after Stop, returns an error and changes
// nothing.
func (s *Sink) Start() error {
	s.mu.Lock()
	again := s.startCalled
	s.startCalled = true
	s.mu.Unlock()
	if again {
		return errors.New("store: sink started twice")
	}
	if !chdb.Built {
		return chdb.ErrNotBuilt
	}
	conn, d, err := OpenEmbedded(context.Background(), s.cfg, s.schema, s.log)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.conn, s.ddl = conn, d
	if enc, err := native.NewEncoder(s.schema); err == nil {
		s.enc, s.insert, s.format = enc, d.NativeInsertStatement(enc.Columns()), "Native"
	} else {
		s.log.Warn("store: inserting Protobuf", "error", err)
		s.enc, s.insert, s.format = nil, d.InsertStatement(), "Protobuf"
	}
	s.agg, s.aggInsert = nil, ""
	if r, ok := d.PreAggregated(); ok {
		// The DDL made the same checks on the same schema: the view is gone, so failing here
		// would lose the resolution's rows; it cannot happen short of a bug.
		var agg *native.Aggregator
		err := native.ErrNotAggregable
		if s.enc != nil {
			// The groups go sorted by the table's key as it is (a table created by an
			// earlier version keeps its order), so that the engine need not sort them.
			dims, kerr := d.PreAggregatedKeyDims(context.Background(), engine.Embedded{Conn: conn}, r)
			if kerr != nil {
				s.log.Warn("store: reading the sorting key of the pre-aggregated table", "error", kerr)
			}
			agg, err = native.NewAggregator(s.enc, dims, r.Interval)
		}
		if err != nil {
			s.mu.Unlock()
			conn.Close()
			return fmt.Errorf("store: pre-aggregation: %w", err)
		}
		s.agg, s.aggInsert = agg, d.AggregatedInsertStatement(r, agg.Columns())
		s.log.Info("store: pre-aggregating", "table", ddl.AggregatedTableName(r))
	}
	s.ro = engine.NewReadOnly(s.cfg.Embedded.Path, s.cfg.Embedded.QueryConnections, s.cfg.Embedded.MaxResultBytes, embeddedArgs(s.cfg)...)
	s.cur = s.newBatch()
	s.started = true
	s.mu.Unlock()
	s.wg.Add(2)
	go s.insertLoop()
	go s.tickLoop()
	s.log.Info("store: embedded sink started", "path", s.cfg.Embedded.Path, "schema", s.schema.Hash())
	return nil
}

// Conn returns the sink's own connection to the engine, for tests and tools: a statement on
// it waits for the sink's inserts and they wait for it. Other components query through
// Engine. Valid between Start and Stop.
func (s *Sink) Conn() *chdb.Conn { return s.conn }

// Engine returns the executor of read-only statements on the sink's engine (the engine holds
// one data directory per process), for other components of the process such as the query
// API: safe for concurrent use, its statements run on connections of their own, beside the
// sink's inserts, within embedded.query-connections and embedded.max-result-bytes, and stop
// when their context ends (engine.ReadOnly). Nil before Start; after Stop its statements
// return engine.ErrClosed.
func (s *Sink) Engine() engine.Executor {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ro == nil {
		return nil
	}
	return s.ro
}

// DDL returns the DDL the sink created its tables with. Valid after Start.
func (s *Sink) DDL() *ddl.DDL { return s.ddl }

func (s *Sink) newBatch() *batch {
	select {
	case b := <-s.free:
		return b
	default:
	}
	return &batch{buf: make([]byte, 0, s.cfg.Embedded.BatchBytes+64<<10)}
}

// Write adds one length-delimited flow message (as returned by schema.FlowMessage.Finalize)
// to the current batch. msg is copied: the caller may reuse it at once.
func (s *Sink) Write(msg []byte) {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		s.m.droppedStopped.Inc()
		return
	}
	b := s.cur
	if b.flows == 0 {
		s.first = s.clock.Now()
	}
	b.buf = append(b.buf, msg...)
	b.flows++
	if len(b.buf) >= s.cfg.Embedded.BatchBytes {
		s.rotateLocked()
	}
	s.mu.Unlock()
}

// Name implements output.Sink.
func (s *Sink) Name() string { return "store" }

// Send implements output.Sink: the collector's batch (length-delimited messages back to
// back, the Protobuf format's input as is) is appended to the current insert batch.
func (s *Sink) Send(ob *output.Batch) bool {
	defer ob.Release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped {
		s.m.droppedStopped.Add(float64(ob.Flows))
		return false
	}
	b := s.cur
	if b.flows == 0 {
		s.first = s.clock.Now()
	}
	b.buf = append(b.buf, ob.Data...)
	b.flows += ob.Flows
	if len(b.buf) >= s.cfg.Embedded.BatchBytes {
		s.rotateLocked()
	}
	return true
}

// rotateLocked queues the current batch (or drops it when the queue is full) and starts a
// new one.
func (s *Sink) rotateLocked() {
	b := s.cur
	if b.flows == 0 {
		return
	}
	select {
	case s.queue <- b:
		s.m.queued.Inc()
		s.cur = s.newBatch()
	default:
		s.m.droppedFull.Add(float64(b.flows))
		s.countDropped(b.flows, "insert queue full: the engine is slower than the flows")
		if ok, suppressed := s.dropLog.Allow(s.clock.Now()); ok {
			s.log.Warn("store: insert queue full, batch dropped", "flows", b.flows,
				"dropped-total", s.counts.dropped.Load(), "suppressed", suppressed)
		}
		s.reset(b)
	}
}

func (s *Sink) reset(b *batch) {
	b.buf = b.buf[:0]
	b.flows = 0
}

// tickLoop cuts batches older than the flush interval.
func (s *Sink) tickLoop() {
	defer s.wg.Done()
	every := s.cfg.Embedded.FlushInterval / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.mu.Lock()
			if !s.stopped && s.cur.flows > 0 && s.clock.Now().Sub(s.first) >= s.cfg.Embedded.FlushInterval {
				s.rotateLocked()
			}
			s.mu.Unlock()
		}
	}
}

func (s *Sink) insertLoop() {
	defer s.wg.Done()
	// The pending groups are inserted once PreAggregateInterval has passed, even when no
	// batch comes.
	var tick <-chan time.Time
	if s.agg != nil && s.cfg.Embedded.PreAggregateInterval > 0 {
		t := time.NewTicker(max(s.cfg.Embedded.PreAggregateInterval/4, 10*time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	for {
		var b *batch
		select {
		case <-tick:
			if s.aggFlows > 0 && s.groupsDue() {
				s.insertGroups()
			}
			continue
		case b = <-s.queue:
			if b == nil {
				// Closed by Stop after its last batch: the groups summed so far go in.
				s.insertGroups()
				return
			}
		}
		if b.token != "" {
			s.insertUnit(b)
			close(b.ack)
			continue
		}
		if b.ack != nil {
			// A Flush: everything written before it is in the engine, groups included.
			s.insertGroups()
			close(b.ack)
			continue
		}
		s.m.queued.Dec()
		start := s.clock.Now()
		flows, err := s.insertBatch(b)
		s.m.insertSeconds.Observe(s.clock.Now().Sub(start).Seconds())
		if err != nil {
			s.m.insertErrors.Inc()
			s.m.droppedError.Add(float64(flows))
			s.countDropped(flows, "insert failed: "+err.Error())
			if ok, suppressed := s.dropLog.Allow(s.clock.Now()); ok {
				s.log.Error("store: insert failed", "flows", flows, "error", err,
					"dropped-total", s.counts.dropped.Load(), "suppressed", suppressed)
			}
			s.setErr(err)
		} else {
			s.m.flows.Add(float64(flows))
			s.counts.inserted.Add(int64(flows))
			s.m.bytes.Add(float64(len(b.buf)))
			s.m.batches.Inc()
		}
		s.reset(b)
		select {
		case s.free <- b:
		default:
		}
	}
}

// groupsDue tells if the pending groups are to be inserted: PreAggregateInterval has passed
// since their first batch, or their flows' times span that much (a replay, or a batch
// holding more than the interval's traffic), or they take aggMaxBytes of memory.
func (s *Sink) groupsDue() bool {
	iv := s.cfg.Embedded.PreAggregateInterval
	return s.clock.Now().Sub(s.aggSince) >= iv || s.agg.Span() >= iv || s.agg.Bytes() >= s.aggMaxBytes
}

// aggMaxBytes is how much memory the pending groups may take before they are inserted
// whatever the interval: at up to ~250 bytes per group with the default columns (~100 when
// only the demo's dimensions are set, see native.Aggregator), 250k groups or more,
// as much memory as a default batch. Traffic with more distinct dimensions than that in an
// interval (many exporters, interfaces and ASes at a high rate) would otherwise grow the
// sink without bound; its groups then go in more often, as they would in smaller batches.
const aggMaxBytes = 64 << 20

// setErr keeps err for the next Flush, unless an earlier error is kept already.
func (s *Sink) setErr(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// insertGroups inserts the pending groups into the finest resolution's table (whose insert
// feeds the coarser views) and starts new ones, with the encoder Reset. A failed INSERT
// leaves the flows stored and counts them as not aggregated.
func (s *Sink) insertGroups() {
	if s.agg == nil {
		return
	}
	if flows := s.aggFlows; flows > 0 && s.agg.Groups() > 0 {
		if _, err := s.conn.Insert(s.aggInsert, "Native", s.agg.Block()); err != nil {
			s.m.insertErrors.Inc()
			s.m.notAggregated.Add(float64(flows))
			s.log.Error("store: insert of the pre-aggregated rows failed", "flows", flows, "error", err)
			s.setErr(&aggregateInsertError{err})
		} else {
			s.m.groups.Add(float64(s.agg.Groups()))
		}
	}
	s.dropGroups()
}

// dropGroups forgets the pending groups (Reset also forgets the interned values they were
// keyed by, when there are too many).
func (s *Sink) dropGroups() {
	s.enc.Reset()
	s.aggFlows = 0
	s.m.pendingFlows.Set(0)
	s.m.pendingGroups.Set(0)
}

// aggregateInsertError is the failure of a pre-aggregated INSERT after its flows were stored.
type aggregateInsertError struct{ err error }

func (e *aggregateInsertError) Error() string {
	return "pre-aggregated rows not inserted: " + e.err.Error()
}
func (e *aggregateInsertError) Unwrap() error { return e.err }

// insertBatch inserts a batch and returns how many flows it held: with the Native format,
// messages that do not convert are left out and counted (the Protobuf input would refuse the
// whole batch for one of them).
//
// With pre-aggregation, the encoder also sums the batch into the pending groups, which are
// inserted into the finest resolution's table (whose insert feeds the coarser views) when
// groupsDue says so, at a Flush, or before the interned values they are keyed by must be
// forgotten (insertGroups). The flows go first
// because they are the raw data every other table derives from. A failed flows INSERT is
// returned (its flows counted as dropped) and the pending groups, which hold the batch too,
// are dropped and counted as not aggregated: the aggregated tables may lack flows that the
// flows table has, never the reverse, and INSERT ... SELECT ... GROUP BY rebuilds them.
func (s *Sink) insertBatch(b *batch) (int, error) {
	if s.enc == nil {
		_, err := s.conn.Insert(s.insert, s.format, b.buf)
		return b.flows, err
	}
	switch {
	case s.agg == nil:
		s.enc.Reset()
	case s.aggFlows > 0 && !s.groupsDue() && s.enc.ResetBlocks():
		// The groups keep summing.
	default:
		s.insertGroups()
	}
	ok, first := s.enc.AppendDelimited(b.buf)
	// Every flow of the batch not appended is dropped, those after a length prefix that
	// frames no message included.
	if dropped := b.flows - ok; dropped > 0 {
		s.m.droppedInvalid.Add(float64(dropped))
		s.countDropped(dropped, "malformed flows")
		if now := s.clock.Now(); now.Sub(s.invalidLogged) >= time.Minute {
			s.invalidLogged = now
			s.log.Warn("store: malformed flows dropped", "flows", dropped, "error", first)
		}
	}
	if ok == 0 {
		return 0, nil
	}
	if _, err := s.conn.Insert(s.insert, s.format, s.enc.Block()); err != nil {
		if s.aggFlows > 0 {
			// The failed batch is summed in the groups with the earlier ones: drop them all
			// rather than let the aggregated tables count flows the flows table lacks.
			s.m.notAggregated.Add(float64(s.aggFlows))
			s.log.Error("store: pre-aggregated rows dropped with a failed insert", "flows", s.aggFlows)
		}
		if s.agg != nil {
			s.dropGroups()
		}
		return ok, err
	}
	if s.agg != nil {
		if s.aggFlows == 0 {
			s.aggSince = s.clock.Now()
		}
		s.aggFlows += ok
		s.m.pendingFlows.Set(float64(s.aggFlows))
		s.m.pendingGroups.Set(float64(s.agg.Groups()))
		if s.groupsDue() {
			s.insertGroups()
		}
	}
	return ok, nil
}

// InsertUnit inserts data (length-delimited flow messages, flows of them) in one INSERT into
// the flows table carrying the deduplication token, and, with pre-aggregation, the unit's own
// groups in one INSERT into the pre-aggregated table with the same token: inserting the same
// unit again with the same token stores nothing in either table, nor in the views they feed,
// as long as the tables remember the token (ddl.Configuration.Deduplicate). A split
// collector's outlet calls it once per partition's offset range, which a replay after a crash
// cuts the same (docs/scaling.md). It returns once the engine has the unit, or with the first
// error; the sink does not keep data. Flows written by Write and Send before it are inserted
// first.
func (s *Sink) InsertUnit(ctx context.Context, token string, data []byte, flows int) error {
	if token == "" {
		return errors.New("store: a unit needs a deduplication token")
	}
	s.life.RLock()
	defer s.life.RUnlock()
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return errors.New("store: sink not running")
	}
	var pending *batch
	if s.cur.flows > 0 {
		pending = s.cur
		s.cur = s.newBatch()
		s.m.queued.Inc()
	}
	s.mu.Unlock()
	b := &batch{buf: data, flows: flows, token: token, ack: make(chan struct{})}
	for _, q := range []*batch{pending, b} {
		if q == nil {
			continue
		}
		select {
		case s.queue <- q:
		case <-ctx.Done():
			if q == pending {
				// Not queued: its flows go with the next batch.
				s.mu.Lock()
				s.cur.buf = append(s.cur.buf, q.buf...)
				s.cur.flows += q.flows
				s.m.queued.Dec()
				s.mu.Unlock()
			}
			return ctx.Err()
		}
	}
	// The inserter owns data until it closes ack: wait for it even when ctx ends.
	<-b.ack
	return b.err
}

// UnitRows returns how many flows of a partition's datagrams at offsets [first, end) the flows
// table holds, counted by identity (DatagramPartition, DatagramOffset): an outlet replaying a
// unit after a crash or a rewind chooses its token by it (outlet.ReplaySink). ok is false
// without the identity columns. The unit's flows have a TimeReceived in [minTime, maxTime]
// (Unix seconds): bounding the count by it reads the parts of those days and the granules of
// those minutes only, where the identity alone would read the whole table.
func (s *Sink) UnitRows(_ context.Context, partition int32, first, end int64, minTime, maxTime uint64) (rows int, ok bool, err error) {
	if !s.schema.Enabled(schema.ColumnDatagramPartition) || !s.schema.Enabled(schema.ColumnDatagramOffset) || s.conn == nil {
		return 0, false, nil
	}
	out, err := s.conn.Query(fmt.Sprintf("SELECT count() FROM %s WHERE TimeReceived >= toDateTime(%d) AND TimeReceived <= toDateTime(%d) "+
		"AND DatagramPartition = %d AND DatagramOffset >= %d AND DatagramOffset < %d",
		s.ddl.FlowsTable(), minTime, maxTime, partition, first, end), "TabSeparated")
	if err != nil {
		return 0, false, fmt.Errorf("store: counting the flows of partition %d at [%d, %d): %w", partition, first, end, err)
	}
	rows, err = strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, false, fmt.Errorf("store: counting the flows of partition %d at [%d, %d): %q", partition, first, end, out)
	}
	return rows, true, nil
}

// insertUnit inserts a unit (inserter only): the groups summed from earlier batches go
// first, so that the unit's groups are its own and a replay gives the same rows.
func (s *Sink) insertUnit(b *batch) {
	s.insertGroups()
	start := s.clock.Now()
	flows, err := s.insertTokenBatch(b)
	s.m.insertSeconds.Observe(s.clock.Now().Sub(start).Seconds())
	if err != nil {
		s.m.insertErrors.Inc()
		s.m.droppedError.Add(float64(flows))
		s.countDropped(flows, "insert failed: "+err.Error())
		if ok, suppressed := s.dropLog.Allow(s.clock.Now()); ok {
			s.log.Error("store: insert of a unit failed", "token", b.token, "flows", flows, "error", err,
				"dropped-total", s.counts.dropped.Load(), "suppressed", suppressed)
		}
		b.err = fmt.Errorf("store: unit %s: %w", b.token, err)
		return
	}
	s.m.flows.Add(float64(flows))
	s.counts.inserted.Add(int64(flows))
	s.m.bytes.Add(float64(len(b.buf)))
	s.m.batches.Inc()
}

// insertTokenBatch inserts a unit's flows, then its groups, with its token.
func (s *Sink) insertTokenBatch(b *batch) (int, error) {
	if s.enc == nil {
		_, err := s.conn.Insert(ddl.WithDeduplicationToken(s.insert, b.token), s.format, b.buf)
		return b.flows, err
	}
	s.enc.Reset()
	ok, first := s.enc.AppendDelimited(b.buf)
	if dropped := b.flows - ok; dropped > 0 {
		s.m.droppedInvalid.Add(float64(dropped))
		s.countDropped(dropped, "malformed flows")
		if now := s.clock.Now(); now.Sub(s.invalidLogged) >= time.Minute {
			s.invalidLogged = now
			s.log.Warn("store: malformed flows dropped", "flows", dropped, "error", first)
		}
	}
	if ok == 0 {
		return 0, nil
	}
	if _, err := s.conn.Insert(ddl.WithDeduplicationToken(s.insert, b.token), s.format, s.enc.Block()); err != nil {
		if s.agg != nil {
			s.dropGroups()
		}
		return ok, err
	}
	if s.agg == nil {
		return ok, nil
	}
	defer s.dropGroups()
	if s.agg.Groups() == 0 {
		return ok, nil
	}
	if _, err := s.conn.Insert(ddl.WithDeduplicationToken(s.aggInsert, b.token), "Native", s.agg.Block()); err != nil {
		// The flows are stored: inserting the unit again (same token) adds only the groups.
		s.m.notAggregated.Add(float64(ok))
		return 0, &aggregateInsertError{err}
	}
	s.m.groups.Add(float64(s.agg.Groups()))
	return ok, nil
}

// Flush inserts every flow written so far and waits until the engine has them. It returns
// the first insert error since the previous Flush.
func (s *Sink) Flush() error {
	s.life.RLock()
	defer s.life.RUnlock()
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return errors.New("store: sink not running")
	}
	if s.cur.flows > 0 {
		// A flush must not lose data: wait for room rather than drop.
		b := s.cur
		s.cur = s.newBatch()
		s.m.queued.Inc()
		s.mu.Unlock()
		s.queue <- b
	} else {
		s.mu.Unlock()
	}
	ack := make(chan struct{})
	s.queue <- &batch{ack: ack}
	<-ack
	s.mu.Lock()
	err := s.err
	s.err = nil
	s.mu.Unlock()
	return err
}

// Stop inserts what is buffered, stops the inserter and closes the engine connection; it
// returns the first insert error since the last Flush. A flow written while it runs is
// inserted or counted as dropped; one written after it is counted as dropped. With
// kafka.enabled, once the inserter has stopped, the Kafka table and both views reading it
// are dropped before the connection closes (the next Start creates them again;
// flows_kafka_errors keeps its rows): chDB cannot reopen a data directory holding a Kafka
// table.
func (s *Sink) Stop() error {
	// life waits for running Flushes, which send to the queue; later ones see stopped.
	s.life.Lock()
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		s.life.Unlock()
		return nil
	}
	// From here Write, Send, Flush and tickLoop leave cur alone: it is the last batch.
	s.stopped = true
	last := s.cur
	s.cur = nil
	s.mu.Unlock()
	s.life.Unlock()
	if last.flows > 0 {
		// Wait for room rather than drop, as Flush does.
		s.m.queued.Inc()
		s.queue <- last
	}
	close(s.done)
	// The inserter stores the queued batches, then the pending groups, and ends.
	close(s.queue)
	s.wg.Wait()
	s.mu.Lock()
	err := s.err
	s.err = nil
	s.mu.Unlock()
	// The read-only statements end before the connection holding the engine closes.
	s.ro.Close()
	if s.cfg.Kafka.Enabled {
		m := &ddl.Migrator{DDL: s.ddl, Exec: engine.Embedded{Conn: s.conn}, Logger: s.log}
		if derr := m.DropKafka(context.Background()); derr != nil && err == nil {
			err = derr
		}
	}
	if cerr := s.conn.Close(); err == nil {
		err = cerr
	}
	s.log.Info("store: embedded sink stopped")
	return err
}
