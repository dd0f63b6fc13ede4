// Package outlet is the decoding half of a split collector (mode: outlet): a member of a Kafka
// consumer group reading the datagram records that the inlets wrote (flowzero/datagram),
// decoding them with the usual decoders, enriching the flows and handing them to the usual
// sinks, in batches.
//
// Delivery is at least once: the offset of a datagram is committed only once every sink has
// acknowledged its flows and none of its data sets waits for a template in the
// decoder's pending buffer. Every commit interval, and before its partitions are revoked, the
// outlet sends its current batch, asks each sink to acknowledge everything sent so far, and
// commits; when a sink cannot, nothing is committed and the partitions are read again from
// their last committed offsets. A sink that is a UnitSink (the store output) gets units
// instead, a partition's offset range at a time with a deduplication token, cut the same way
// when the partition is read again (unit.go): it stores each flow once (per engine for the
// embedded one; across outlets for a ClickHouse server they share). Units are closed and
// inserted at every commit, before the commit interval when they hold outlet.max-unit-bytes,
// and before the partitions are revoked, so a graceful rebalance inserts nothing again.
// docs/scaling.md describes the guarantees and their limits.
//
// The NetFlow/IPFIX decoder state (templates, sampling rates) is shared with the other
// outlets through the state topic (flowzero/decoder/state): what this outlet's decoder learns
// is published, what the others publish is applied, so any outlet decodes any partition.
// A datagram whose data sets have no template yet waits in the decoder's pending buffer; when
// the buffer cannot take them (a fresh outlet reading a backlog reaches an exporter's data in
// one partition long before its template in another), the partition stops at that datagram
// (paused in the consumer, its offset set back to it) while the outlet reads the others and
// the state topic, and resumes when new state comes or after a short back-off; past
// outlet.template-wait the datagram is decoded as in mode all (see holdBack).
package outlet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"flowzero/datagram"
	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/decoder/state"
	"flowzero/internal/clock"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
	"flowzero/output"
	"flowzero/schema"
)

// Enricher fills flow fields between decoding and encoding (collector.Enricher).
type Enricher interface {
	Enrich(fm *schema.FlowMessage)
}

// Acknowledger is a sink that can tell when the flows sent to it are delivered: Acknowledge
// returns once every batch sent before the call is stored or delivered, with an error when
// some of them were dropped or failed since the previous call.
type Acknowledger interface {
	Acknowledge(ctx context.Context) error
}

// Dependencies are what an Outlet needs besides its configuration.
type Dependencies struct {
	Schema  *schema.Schema
	NetFlow *netflow.Decoder
	SFlow   *sflow.Decoder
	// Enricher may be nil.
	Enricher Enricher
	// Sinks receive every batch; the outlet neither starts nor stops them. A sink that is
	// not an Acknowledger (see acknowledgeSink for the adapters of the usual sinks) is taken as
	// delivering everything it accepts. A sink that is a UnitSink (the store output) gets
	// units instead of batches.
	Sinks []output.Sink
	// BatchSize is the bytes of flows per batch (collector.batch-size).
	BatchSize int
	Registry  prometheus.Registerer
	Logger    *slog.Logger
	Clock     clock.Clock
}

// Outlet consumes datagram records.
type Outlet struct {
	cfg   Configuration
	topic datagram.TopicConfiguration
	deps  Dependencies
	log   *slog.Logger
	clock clock.Clock
	m     *metrics
	state *state.Topic
	pool  *output.BatchPool

	client *kgo.Client
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// mu serialises everything that touches the decoders and the batch: the consuming
	// loop, the state topic's records, commits and rebalances.
	mu         sync.Mutex
	fm         *schema.FlowMessage
	emitFn     func(*schema.FlowMessage, uint64)
	sflowEmit  func(*schema.FlowMessage)
	batch      *output.Batch
	sendFailed bool
	// The datagram being decoded and the flows it gave so far.
	curTag   uint64
	curIndex uint32
	// held counts the data sets of each datagram (by tag) waiting in the pending buffer;
	// later is the index of the next flow of such a datagram.
	held   map[uint64]int
	later  map[uint64]uint32
	parts  map[int32]*partition
	latest time.Time // receive time of the newest datagram decoded
	// The handling time of the current record, and the latest receive time taken as is.
	recvNow, ahead time.Time
	lastCommit     time.Time
	// stateGen counts what may make room in the pending buffer (state learned or applied,
	// held sets released): a paused partition resumes soon after it changes.
	stateGen uint64
	// gaveUp are the exporters of the datagrams decoded after waiting template-wait: their
	// datagrams do not wait again until state of theirs is learned or applied.
	gaveUp map[netip.AddrPort]struct{}
	// pending adds up what a record's datagrams would hold in the pending buffers (holdBack).
	pending netflow.PendingBatch
	// The datagram waiting the longest, for Health: since when (unix ns, 0: none), its
	// partition and offset.
	waitingSince               atomic.Int64
	waitingPart, waitingOffset atomic.Int64
	health                     *health.State

	// batchSinks get batches, unitSinks units (UnitSink); plans are the units' ranges read
	// from the commit metadata of the partitions assigned, until their first record.
	batchSinks []output.Sink
	unitSinks  []UnitSink
	// replay is the first unit sink that counts a replayed unit's flows (replayToken): a
	// unit's token suffix in the commit metadata is one, for one sink.
	replay  ReplaySink
	plans   map[int32]plan
	topicID [16]byte // the datagrams topic's, for recordPlans

	// lastDropped is the drop count of each counting sink at its previous acknowledgement.
	lastDropped, droppedAtStart map[output.Sink]int64
	ready                       atomic.Bool
	datagrams, flows            atomic.Int64

	decodeLog *lograte.Limiter
	sinkLog   *lograte.Limiter
}

// partition is what the outlet knows of a partition it consumes.
type partition struct {
	next      int64 // offset after the last record handled
	committed int64 // offset committed (or where consuming started)
	// With unit sinks: the open unit, the closed units waiting to be inserted (in offset
	// order), and the planned end of the unit starting at committed (0 if none).
	open    unit
	closed  []*unit
	planned int64
	again   string // the planned unit's token suffix for the replay sink (replayToken)
	// inserted is the end of the last unit inserted: committed again at each commit until a
	// commit lands, so that a commit that failed after an insert (a rebalance starting) is
	// made good by the next one, the revoke's included, and the next owner does not decode
	// the unit again.
	inserted int64
	// paused: the consumer stopped fetching the partition at next, a datagram whose data sets
	// do not fit in the pending buffer (holdBack), at pausedAt and at state generation
	// pausedGen. waitOffset is the datagram that waits, since waitSince (zero: none).
	paused     bool
	pausedAt   time.Time
	pausedGen  uint64
	waitOffset int64
	waitSince  time.Time
}

// A paused partition resumes (its waiting datagram is fetched and checked again) after
// resumeAfter, or after resumeOnState once the decoder state changed.
const (
	resumeAfter   = time.Second
	resumeOnState = 100 * time.Millisecond
)

// Tags pack a datagram's partition and offset: 16 bits of partition, 48 of offset.
const offsetBits = 48

func tagOf(p int32, offset int64) uint64 { return uint64(p)<<offsetBits | uint64(offset) }

func splitTag(tag uint64) (int32, int64) {
	return int32(tag >> offsetBits), int64(tag & (1<<offsetBits - 1))
}

// New returns an outlet; nothing is contacted before Start.
func New(topic datagram.TopicConfiguration, cfg Configuration, deps Dependencies) (*Outlet, error) {
	if err := topic.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Schema == nil || deps.NetFlow == nil || deps.SFlow == nil {
		return nil, errors.New("outlet: a schema and both decoders are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.BatchSize <= 0 {
		deps.BatchSize = 64 << 10
	}
	o := &Outlet{
		cfg: cfg, topic: topic, deps: deps, log: deps.Logger.With("component", "outlet"), clock: clock.Or(deps.Clock),
		pool:        output.NewBatchPool(deps.BatchSize+deps.BatchSize/4, 64),
		fm:          deps.Schema.NewFlowMessage(),
		held:        map[uint64]int{},
		later:       map[uint64]uint32{},
		parts:       map[int32]*partition{},
		gaveUp:      map[netip.AddrPort]struct{}{},
		lastDropped: map[output.Sink]int64{}, droppedAtStart: map[output.Sink]int64{},
		decodeLog: lograte.New(3, 30*time.Second),
		sinkLog:   lograte.New(3, 30*time.Second),
	}
	for _, s := range deps.Sinks {
		if us, ok := s.(UnitSink); ok {
			o.unitSinks = append(o.unitSinks, us)
			if rs, ok := s.(ReplaySink); ok && o.replay == nil {
				o.replay = rs
			}
		} else {
			o.batchSinks = append(o.batchSinks, s)
		}
	}
	o.plans = map[int32]plan{}
	o.health = health.NewState(o.clock)
	o.emitFn = o.emit
	o.sflowEmit = func(fm *schema.FlowMessage) { o.emit(fm, o.curTag) }
	m, err := newMetrics(deps.Registry, o)
	if err != nil {
		return nil, err
	}
	o.m = m
	st, err := state.New(deps.Registry, deps.Logger, topic.Configuration, cfg.State)
	if err != nil {
		return nil, err
	}
	o.state = st
	client, err := kgo.NewClient(append(topic.Options(),
		kgo.ConsumerGroup(cfg.Group),
		// Eager rebalances: every member gives its partitions back and consumes the new
		// assignment from the committed offsets, the simplest ground for at-least-once.
		kgo.Balancers(kgo.RoundRobinBalancer()),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/3)),
		kgo.ConsumeTopics(topic.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxBytes(cfg.MaxFetchBytes),
		kgo.OnPartitionsAssigned(o.assigned),
		kgo.OnPartitionsRevoked(o.revoked),
		kgo.OnPartitionsLost(o.lost),
	)...)
	if err != nil {
		st.Stop()
		return nil, fmt.Errorf("outlet: %w", err)
	}
	o.client = client
	deps.NetFlow.SetObserver(observer{o})
	return o, nil
}

// Start reads the state topic to its end, then joins the group and consumes, in the
// background: a broker down at start delays decoding, it does not fail the process.
func (o *Outlet) Start() error {
	for _, sink := range o.batchSinks {
		if c, ok := sink.(interface{ Counts() (int64, int64, int64) }); ok {
			_, _, o.droppedAtStart[sink] = c.Counts()
		}
	}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	o.done = make(chan struct{})
	go o.run()
	return nil
}

func (o *Outlet) run() {
	defer close(o.done)
	// A poll blocks rebalances until allowed: leaving the group at Close needs it.
	defer o.client.AllowRebalance()
	if err := o.state.Start(o.ctx, o.applyState); err != nil {
		if o.ctx.Err() == nil {
			o.log.Error("outlet: cannot read the decoder state topic", "error", err)
		}
		return
	}
	o.m.ready.Set(1)
	o.ready.Store(true)
	o.mu.Lock()
	o.lastCommit = o.clock.Now()
	o.mu.Unlock()
	for {
		// The poll returns at least every commit interval, so that the last datagrams of a
		// burst are committed without waiting for the next one.
		pctx, cancel := context.WithTimeout(o.ctx, o.cfg.CommitInterval)
		fetches := o.client.PollRecords(pctx, o.cfg.MaxPollRecords)
		cancel()
		if o.ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			o.m.errors.WithLabelValues("fetch").Inc()
			if ok, suppressed := o.sinkLog.Allow(time.Now()); ok {
				o.log.Warn("outlet: fetch error", "topic", t, "partition", p, "error", err, "suppressed", suppressed)
			}
		})
		o.mu.Lock()
		fetches.EachRecord(o.handle)
		now := o.clock.Now()
		if now.Sub(o.lastCommit) >= o.cfg.CommitInterval || o.unitBytesLocked() >= o.cfg.MaxUnitBytes {
			o.commitLocked(o.ctx)
		}
		o.resumeLocked(now)
		o.mu.Unlock()
		o.client.AllowRebalance()
	}
}

// unitBytesLocked returns the bytes of flows held in units, open or waiting (o.mu held).
func (o *Outlet) unitBytesLocked() int {
	n := 0
	for _, ps := range o.parts {
		n += len(ps.open.data)
		for _, u := range ps.closed {
			n += len(u.data)
		}
	}
	return n
}

// handle decodes the datagrams of one record (o.mu held).
func (o *Outlet) handle(rec *kgo.Record) {
	p := o.parts[rec.Partition]
	if p == nil {
		// The first record since the partition was assigned is where consuming starts:
		// the group's committed offset.
		p = &partition{committed: rec.Offset, open: unit{first: rec.Offset}}
		if pl, ok := o.plans[rec.Partition]; ok && pl.first == rec.Offset {
			p.planned, p.again = pl.end, pl.again
		}
		delete(o.plans, rec.Partition)
		o.parts[rec.Partition] = p
	}
	if p.paused {
		return // fetched before the pause: fetched again when the partition resumes
	}
	if p.planned > p.open.first && rec.Offset >= p.planned {
		// The unit recorded before a crash or a rewind ends here: cut it the same.
		p.closeOpen(p.planned, true)
		o.log.Info("outlet: unit cut at the range recorded before the partition was read again",
			"partition", rec.Partition, "first", p.closed[len(p.closed)-1].first, "end", p.planned)
	}
	now := o.clock.Now()
	o.ahead, o.recvNow = now.Add(maxAhead), now
	if o.holdBack(rec, p) {
		return
	}
	p.next = rec.Offset + 1
	// A record holds one datagram (version 1) or several (a batch record). Their flows share
	// the record's tag: their index in the record numbers them all.
	tag := tagOf(rec.Partition, rec.Offset)
	o.curTag, o.curIndex = tag, 0
	r := datagram.NewReader(rec.Value)
	n := 0
	for r.Next() {
		n++
		o.decode(rec, r.Datagram(), tag)
	}
	if bad := r.Invalid(); bad > 0 {
		n += bad
		o.m.invalid.Add(float64(bad))
		o.logDecode("invalid datagram record", rec, r.Err())
	}
	o.m.datagrams.Add(float64(n))
	o.datagrams.Add(int64(n))
	if o.held[tag] > 0 {
		o.later[tag] = o.curIndex
	}
}

// decode decodes one datagram of the record rec (o.mu held).
func (o *Outlet) decode(rec *kgo.Record, dg datagram.Datagram, tag uint64) {
	if o.clampReceived(&dg) {
		o.m.clockAhead.WithLabelValues("datagram").Inc()
		o.logDecode("receive time ahead of this outlet's clock: its flows get the outlet's time", rec,
			fmt.Errorf("datagram of %s received at %s", dg.Exporter, dg.Received.UTC().Format(time.RFC3339Nano)))
		dg.Received = o.recvNow
	}
	if dg.Received.After(o.latest) {
		o.latest = dg.Received
	}
	var err error
	switch dg.Protocol {
	case datagram.NetFlow:
		err = o.deps.NetFlow.DecodeTagged(netflow.Packet{Payload: dg.Payload, Exporter: dg.Exporter, TimeReceived: dg.Received, Tag: tag}, o.fm, o.emitFn)
	case datagram.SFlow:
		err = o.deps.SFlow.Decode(sflow.Packet{Payload: dg.Payload, Exporter: dg.Exporter, TimeReceived: dg.Received}, o.fm, o.sflowEmit)
	default:
		err = fmt.Errorf("unknown protocol %s", dg.Protocol)
	}
	if err != nil {
		o.m.decodeErrors.WithLabelValues(dg.Protocol.String()).Inc()
		o.logDecode("cannot decode datagram", rec, err)
	}
}

// maxAhead is how far ahead of the outlet's clock a receive time may be. A datagram or a state
// record from further in the future (an inlet whose clock is wrong, or a record written by
// someone else) would otherwise expire every held data set (the outlet expires them by the
// newest receive time) or make an exporter's real templates look stale until that date.
const maxAhead = time.Minute

// clampReceived tells whether dg's receive time is beyond maxAhead of the record's handling
// time, in which case the caller uses the outlet's time (o.mu held).
func (o *Outlet) clampReceived(dg *datagram.Datagram) bool {
	return dg.Received.After(o.ahead)
}

// holdBack tells whether the record rec must wait because the data sets of its NetFlow
// datagrams have no template yet and do not fit, together, in their sessions' pending
// buffers: the partition is then paused at it, and its offset set back to it, so that
// neither the decoding nor the commits pass it (o.mu held). The same record waiting
// template-wait is decoded: its sets that do not fit are dropped and counted, as in mode
// all, and the exporter's datagrams stop waiting until some state of that exporter is
// learned or applied.
func (o *Outlet) holdBack(rec *kgo.Record, p *partition) bool {
	o.pending.Reset()
	r := datagram.NewReader(rec.Value)
	for r.Next() {
		if dg := r.Datagram(); dg.Protocol == datagram.NetFlow {
			if o.clampReceived(&dg) {
				dg.Received = o.recvNow
			}
			o.deps.NetFlow.PendingAdd(&o.pending, netflow.Packet{Payload: dg.Payload, Exporter: dg.Exporter, TimeReceived: dg.Received})
		}
	}
	exporter, fits := o.deps.NetFlow.PendingFits(&o.pending, o.gaveUp)
	if fits {
		p.waitSince = time.Time{}
		return false
	}
	now := o.recvNow
	switch {
	case p.waitSince.IsZero() || p.waitOffset != rec.Offset:
		p.waitOffset, p.waitSince = rec.Offset, now
	case now.Sub(p.waitSince) >= o.cfg.TemplateWait:
		o.m.waitTimeouts.Inc()
		if len(o.gaveUp) >= 1<<12 {
			clear(o.gaveUp) // bounded: spoofed sources could grow it
		}
		o.gaveUp[exporter] = struct{}{}
		msg := fmt.Sprintf("a datagram of %s waited %s for a template (partition %d, offset %d): its data sets that do not fit in the pending buffer are dropped",
			exporter, o.cfg.TemplateWait, rec.Partition, rec.Offset)
		o.health.Event(msg)
		if ok, suppressed := o.decodeLog.Allow(time.Now()); ok {
			o.log.Warn("outlet: "+msg, "suppressed", suppressed)
		}
		p.waitSince = time.Time{}
		return false
	}
	p.paused, p.pausedAt, p.pausedGen = true, now, o.stateGen
	p.next = rec.Offset
	o.m.pauses.Inc()
	o.m.paused.Inc()
	o.client.PauseFetchPartitions(map[string][]int32{o.topic.Topic: {rec.Partition}})
	o.client.SetOffsets(map[string]map[int32]kgo.EpochOffset{o.topic.Topic: {rec.Partition: {Epoch: -1, Offset: rec.Offset}}})
	return true
}

// resumeLocked resumes the paused partitions whose time came, and notes the longest wait
// for Health (o.mu held).
func (o *Outlet) resumeLocked(now time.Time) {
	var resume []int32
	var oldest time.Time
	var oldestPart int32
	var oldestOffset int64
	for id, p := range o.parts {
		if !p.waitSince.IsZero() && (oldest.IsZero() || p.waitSince.Before(oldest)) {
			oldest, oldestPart, oldestOffset = p.waitSince, id, p.waitOffset
		}
		if p.paused && (now.Sub(p.pausedAt) >= resumeAfter || (p.pausedGen != o.stateGen && now.Sub(p.pausedAt) >= resumeOnState)) {
			p.paused = false
			resume = append(resume, id)
		}
	}
	if oldest.IsZero() {
		o.waitingSince.Store(0)
	} else {
		o.waitingPart.Store(int64(oldestPart))
		o.waitingOffset.Store(oldestOffset)
		o.waitingSince.Store(oldest.UnixNano())
	}
	if len(resume) > 0 {
		o.m.paused.Sub(float64(len(resume)))
		o.client.ResumeFetchPartitions(map[string][]int32{o.topic.Topic: resume})
	}
}

func (o *Outlet) logDecode(msg string, rec *kgo.Record, err error) {
	if ok, suppressed := o.decodeLog.Allow(time.Now()); ok {
		o.log.Warn("outlet: "+msg, "partition", rec.Partition, "offset", rec.Offset, "error", err, "suppressed", suppressed)
	}
}

// emit takes a flow of the datagram tagged tag: it gets its identity (partition, offset,
// index in the datagram), is enriched and goes into the batch (o.mu held).
func (o *Outlet) emit(fm *schema.FlowMessage, tag uint64) {
	var idx uint32
	if tag == o.curTag {
		idx = o.curIndex
		o.curIndex++
	} else {
		idx = o.later[tag]
		o.later[tag] = idx + 1
	}
	p, off := splitTag(tag)
	fm.AppendUint(schema.ColumnDatagramPartition, uint64(p))
	fm.AppendUint(schema.ColumnDatagramOffset, uint64(off))
	fm.AppendUint(schema.ColumnDatagramIndex, uint64(idx))
	if o.deps.Enricher != nil {
		o.deps.Enricher.Enrich(fm)
	}
	recv := fm.TimeReceived
	msg := fm.Finalize()
	o.m.flows.Inc()
	o.flows.Add(1)
	if len(o.unitSinks) > 0 {
		// The flows of a partition no longer consumed here are decoded again by its new
		// consumer.
		if ps := o.parts[p]; ps != nil {
			u := unitFor(ps, off)
			u.data = append(u.data, msg...)
			u.add(1, recv, recv)
		}
		if len(o.batchSinks) == 0 {
			return
		}
	}
	if o.batch != nil && len(o.batch.Data)+len(msg) > cap(o.batch.Data) {
		o.sendBatch()
	}
	if o.batch == nil {
		o.batch = o.pool.Get()
	}
	o.batch.Append(msg)
}

// sendBatch hands the current batch to every sink (o.mu held).
func (o *Outlet) sendBatch() {
	b := o.batch
	if b == nil {
		return
	}
	o.batch = nil
	if b.Flows == 0 || len(o.batchSinks) == 0 {
		b.Release()
		return
	}
	b.Retain(len(o.batchSinks) - 1)
	for _, s := range o.batchSinks {
		if !s.Send(b) {
			o.sendFailed = true
		}
	}
}

// applyState applies a record of the state topic; the pending data sets it completes are
// decoded into the batch.
func (o *Outlet) applyState(r netflow.StateRecord) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := o.clock.Now(); r.Received.After(now.Add(maxAhead)) {
		o.m.clockAhead.WithLabelValues("state").Inc()
		if ok, suppressed := o.decodeLog.Allow(time.Now()); ok {
			o.log.Warn("outlet: a state record's receive time is ahead of this outlet's clock: applied with the outlet's time",
				"exporter", r.Exporter, "received", r.Received.UTC().Format(time.RFC3339Nano), "suppressed", suppressed)
		}
		r.Received = now
	}
	o.stateGen++
	delete(o.gaveUp, r.Exporter)
	return o.deps.NetFlow.ApplyState(r, o.fm, o.emitFn)
}

// commitLocked sends the batch, waits for the sinks' acknowledgements and commits the offsets
// of the datagrams whose flows they hold (o.mu held). When a sink fails, nothing is
// committed and the partitions are consumed again from their committed offsets.
func (o *Outlet) commitLocked(ctx context.Context) {
	o.lastCommit = o.clock.Now()
	o.deps.NetFlow.ExpirePending(o.latest)
	o.sendBatch()
	err := o.acknowledge(ctx)
	if err == nil && o.sendFailed {
		err = errors.New("a sink dropped a batch")
	}
	o.sendFailed = false
	if err == nil {
		// The state learned from these datagrams must reach the other outlets before the
		// datagrams are committed: nothing would teach it to them again.
		if serr := o.state.Flush(ctx); serr != nil {
			err = fmt.Errorf("decoder state topic: %w", serr)
		}
	}
	if err != nil {
		o.m.errors.WithLabelValues("acknowledge").Inc()
		if ok, suppressed := o.sinkLog.Allow(time.Now()); ok {
			o.log.Warn("outlet: the sinks did not acknowledge every flow: consuming again from the committed offsets",
				"error", err, "suppressed", suppressed)
		}
		o.rewindLocked()
		return
	}
	upTo := map[int32]int64{}
	if len(o.unitSinks) > 0 {
		upTo, err = o.closeUnitsLocked(ctx)
		if err != nil {
			o.m.errors.WithLabelValues("acknowledge").Inc()
			if ok, suppressed := o.sinkLog.Allow(time.Now()); ok {
				o.log.Warn("outlet: a unit was not stored: consuming again from the committed offsets",
					"error", err, "suppressed", suppressed)
			}
			o.rewindLocked()
			return
		}
	} else {
		// A partition's datagrams are acknowledged up to the first one still waiting for
		// a template.
		for p, ps := range o.parts {
			upTo[p] = ps.next
		}
	}
	for tag, n := range o.held {
		if n <= 0 {
			continue
		}
		p, off := splitTag(tag)
		if cur, ok := upTo[p]; ok && off < cur && len(o.unitSinks) == 0 {
			upTo[p] = off
		}
	}
	offsets := map[int32]kgo.EpochOffset{}
	for p, off := range upTo {
		if off > o.parts[p].committed {
			offsets[p] = kgo.EpochOffset{Epoch: -1, Offset: off}
		}
	}
	if len(offsets) == 0 {
		return
	}
	var cerr error
	o.client.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{o.topic.Topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if e := kerrOf(p.ErrorCode); e != nil {
						cerr = e
						continue
					}
					if ps := o.parts[p.Partition]; ps != nil {
						ps.committed = offsets[p.Partition].Offset
					}
				}
			}
		})
	if cerr != nil {
		o.m.errors.WithLabelValues("commit").Inc()
		if ok, suppressed := o.sinkLog.Allow(time.Now()); ok {
			o.log.Warn("outlet: offset commit failed (the datagrams will be decoded again)", "error", cerr, "suppressed", suppressed)
		}
		return
	}
	o.m.commits.Inc()
	o.log.Debug("outlet: offsets committed", "offsets", offsets)
}

// acknowledge asks every sink to acknowledge what it was sent.
func (o *Outlet) acknowledge(ctx context.Context) error {
	var errs []error
	for _, s := range o.batchSinks {
		if err := o.acknowledgeSink(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// rewindLocked makes the consumer read every partition again from its committed offset.
func (o *Outlet) rewindLocked() {
	// Every held data set is past its partition's committed offset (commits stop at them):
	// read again, its datagram holds it again.
	o.dropHeldLocked(func(int32) bool { return true })
	offsets := map[int32]kgo.EpochOffset{}
	for p, ps := range o.parts {
		offsets[p] = kgo.EpochOffset{Epoch: -1, Offset: ps.committed}
		ps.next = ps.committed
		// The units are made again from the committed offset, cut at the planned end
		// (planned) if one was recorded there.
		ps.open, ps.closed = unit{first: ps.committed, data: ps.open.data[:0]}, nil
	}
	if len(offsets) > 0 {
		o.client.SetOffsets(map[string]map[int32]kgo.EpochOffset{o.topic.Topic: offsets})
	}
}

// revoked commits what the sinks acknowledge before the partitions go to another outlet.
func (o *Outlet) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	o.log.Debug("outlet: partitions revoked", "partitions", revoked)
	if len(revoked[o.topic.Topic]) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commitLocked(ctx)
	o.forgetLocked(revoked)
}

// lost forgets partitions that went elsewhere without a chance to commit.
func (o *Outlet) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	o.log.Debug("outlet: partitions lost", "partitions", lost)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgetLocked(lost)
}

func (o *Outlet) forgetLocked(m map[string][]int32) {
	gone := m[o.topic.Topic]
	// The datagrams of the data sets held for these partitions are read again, here or by
	// another outlet, from the committed offsets.
	o.dropHeldLocked(func(p int32) bool { return slices.Contains(gone, p) })
	var resume []int32
	for _, p := range m[o.topic.Topic] {
		if ps := o.parts[p]; ps != nil && ps.paused {
			// Pauses outlive rebalances in the consumer: this one must not, should the
			// partition come back.
			resume = append(resume, p)
		}
		delete(o.parts, p)
	}
	if len(resume) > 0 {
		o.m.paused.Sub(float64(len(resume)))
		o.client.ResumeFetchPartitions(map[string][]int32{o.topic.Topic: resume})
	}
}

// dropHeldLocked forgets the data sets held for the datagrams of the partitions in
// (o.mu held): their partitions are read again from the committed offsets, which decodes them
// again, so neither their flows nor their count of dropped sets may stay.
func (o *Outlet) dropHeldLocked(in func(int32) bool) {
	n := o.deps.NetFlow.DropPending(func(tag uint64) bool { p, _ := splitTag(tag); return in(p) })
	o.m.held.Sub(float64(n))
	for tag := range o.held {
		if p, _ := splitTag(tag); in(p) {
			delete(o.held, tag)
			delete(o.later, tag)
		}
	}
}

// Counts returns the datagrams handled (a batch record holds several) and the flows handed to
// the sinks so far (datagrams read again after a failed acknowledgement are counted again).
func (o *Outlet) Counts() (datagrams, flows int64) { return o.datagrams.Load(), o.flows.Load() }

// Held returns the number of datagrams with data sets waiting for their template.
func (o *Outlet) Held() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.held)
}

// Name names the outlet in /healthz.
func (o *Outlet) Name() string { return "outlet" }

// Health reports the outlet degraded while a partition has waited at a datagram longer than
// outlet.template-wait (its consumer lags), and for health.Hold after a datagram was decoded
// past that wait, dropping data sets, or after a unit was inserted again with only some of
// its flows in the store (replayToken).
func (o *Outlet) Health() health.Report {
	if since := o.waitingSince.Load(); since != 0 && o.clock.Now().Sub(time.Unix(0, since)) > o.cfg.TemplateWait {
		o.health.Set("wait", fmt.Sprintf("partition %d waits at offset %d for a template since %s (outlet.template-wait %s)",
			o.waitingPart.Load(), o.waitingOffset.Load(), time.Unix(0, since).UTC().Format(time.RFC3339), o.cfg.TemplateWait))
	} else {
		o.health.Clear("wait")
	}
	r := o.health.Report()
	r.Counters = map[string]uint64{"datagrams": uint64(o.datagrams.Load()), "flows": uint64(o.flows.Load())}
	return r
}

// Ready tells whether the state topic was read and the outlet consumes.
func (o *Outlet) Ready() bool { return o.ready.Load() }

// Stop stops consuming, sends the last batch, commits what the sinks acknowledge and leaves
// the group. Stop the sinks after it.
func (o *Outlet) Stop() error {
	if o.cancel != nil {
		o.cancel()
		<-o.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.mu.Lock()
	o.commitLocked(ctx)
	o.mu.Unlock()
	// Leaving the group revokes the partitions (revoked commits again: nothing new).
	o.client.Close()
	return o.state.Stop()
}

// observer hears the netflow decoder: learned state goes to the state topic, held data
// sets delay the commit of their datagrams. Its methods run inside decoder calls, that is
// with o.mu held.
type observer struct{ o *Outlet }

func (ob observer) StateLearned(r netflow.StateRecord) {
	ob.o.state.Publish(r)
	ob.o.stateGen++
	delete(ob.o.gaveUp, r.Exporter)
}

func (ob observer) PendingHeld(tag uint64) {
	ob.o.held[tag]++
	ob.o.m.held.Inc()
}

func (ob observer) PendingReleased(tag uint64, decoded bool) {
	o := ob.o
	o.stateGen++
	o.m.held.Dec()
	if o.held[tag]--; o.held[tag] <= 0 {
		delete(o.held, tag)
		delete(o.later, tag)
	}
	if !decoded {
		o.m.pendingDropped.Inc()
	}
}
