// Package inlet is the receiving half of a split collector (mode: inlet): the collector's UDP
// listeners, workers, allow-list and kernel drop counters hand each datagram of an allowed
// exporter to the inlet (collector.Forwarder), which writes it undecoded, as a datagram record
// (flowzero/datagram), to the datagrams topic that the outlets consume.
//
// Each worker packs the datagrams of one read of its socket (up to 16, recvmmsg), or of
// batch-wait, into one batch record (one per exporter with key exporter): it copies each
// payload behind its entry's header into a recycled Kafka record and hands the record to
// franz-go's producer without waiting: no decoding, no allocation. One record per read
// rather than per datagram spares the producer, the broker and the outlet most of their work
// per record (docs/design/split.md).
// While Kafka is slow or down, the producer keeps up to max-buffered-bytes of records and
// retries; a datagram that does not fit is dropped at once and counted (buffer-full), so the
// sockets are always read. Every datagram handed to the producer is counted exactly once:
// delivered, or dropped (buffer-full, too-large, delivery-failed).
//
// The inlet reports itself in /healthz (health.Reporter): degraded for health.Hold after a
// drop, while the topic cannot be created or checked, while its max.message.bytes is below
// max-message-bytes, and while buffered records go unacknowledged for flush-timeout.
package inlet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"flowzero/collector"
	"flowzero/datagram"
	"flowzero/internal/health"
	"flowzero/internal/kafkaconn"
	"flowzero/internal/lograte"
)

// Inlet produces datagram records.
type Inlet struct {
	cfg     Configuration
	topic   datagram.TopicConfiguration
	log     *slog.Logger
	m       *metrics
	client  *kgo.Client
	keyed   bool
	promise func(*kgo.Record, error) // i.delivered bound once: producing allocates no closure

	// free recycles records and their buffers once franz-go is done with them; a
	// sync.Pool hands back the most recently freed (cache-warm) buffers first.
	free sync.Pool

	dropLog *lograte.Limiter
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	ready   atomic.Bool
	health  *health.State

	sent, delivered, dropped atomic.Int64
	// lastDelivery is when a record was last acknowledged (Unix nanoseconds).
	lastDelivery atomic.Int64
}

// Health events of drops, by reason: constant strings, so that a drop allocates nothing.
const (
	eventBufferFull     = "datagrams dropped (buffer-full): Kafka does not take them as fast as they come, inlet.max-buffered-bytes is full"
	eventTooLarge       = "datagrams dropped (too-large): the broker refused a record batch over the topic's max.message.bytes (inlet.max-message-bytes)"
	eventDeliveryFailed = "datagrams dropped (delivery-failed): Kafka refused their records"
)

// recordSize is the buffer a recycled record starts with: the header and a datagram of a
// usual MTU.
const recordSize = 2048

// New returns an inlet; nothing is contacted before Start.
func New(r prometheus.Registerer, log *slog.Logger, topic datagram.TopicConfiguration, cfg Configuration) (*Inlet, error) {
	if err := topic.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	i := &Inlet{
		cfg: cfg, topic: topic, log: log.With("component", "inlet"),
		keyed:   cfg.Key == "exporter",
		dropLog: lograte.New(3, 30*time.Second),
		health:  health.NewState(nil),
	}
	m, err := newMetrics(r)
	if err != nil {
		return nil, err
	}
	i.m = m
	compression, _ := kafkaconn.Compression(cfg.Compression)
	opts := append(topic.Options(),
		kgo.DefaultProduceTopic(topic.Topic),
		compression,
		kgo.MaxBufferedBytes(cfg.MaxBufferedBytes),
		// The bytes bound the buffer; the record count must not drop datagrams first.
		kgo.MaxBufferedRecords(1<<24),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(int32(cfg.MaxMessageBytes)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1<<30),
		kgo.UnknownTopicRetries(-1),
	)
	if !i.keyed {
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("inlet: %w", err)
	}
	i.client = client
	i.promise = i.done
	return i, nil
}

// Topic is the datagrams topic.
func (i *Inlet) Topic() string { return i.topic.Topic }

// Start creates the topic when it is missing, in the background: a broker down at start must
// not stop the inlet from receiving datagrams (they are buffered meanwhile). It then checks
// the topic's max.message.bytes against max-message-bytes, at once and every minute, and
// watches the delivery (monitor).
func (i *Inlet) Start() error {
	i.ctx, i.cancel = context.WithCancel(context.Background())
	i.lastDelivery.Store(time.Now().UnixNano())
	i.wg.Add(2)
	go func() {
		defer i.wg.Done()
		for attempt := 0; ; attempt++ {
			err := i.ensureTopic(i.ctx)
			if err == nil {
				i.health.Clear("topic")
				break
			}
			if i.ctx.Err() != nil {
				return
			}
			i.m.errors.WithLabelValues("create-topic").Inc()
			i.health.Set("topic", fmt.Sprintf("cannot create or check the datagrams topic %s: %v", i.topic.Topic, err))
			if attempt%30 == 0 {
				i.log.Warn("cannot create or check the datagrams topic, retrying", "topic", i.topic.Topic, "error", err)
			}
			select {
			case <-i.ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		i.checkLimit(i.ctx)
		i.ready.Store(true)
		for {
			select {
			case <-i.ctx.Done():
				return
			case <-time.After(time.Minute):
			}
			i.checkLimit(i.ctx)
		}
	}()
	go i.monitor()
	return nil
}

// checkLimit reads the topic's max.message.bytes (the broker's message.max.bytes when the
// topic's is not described) and reports in /healthz while it is below max-message-bytes:
// the broker would refuse the producer's larger batches whole.
func (i *Inlet) checkLimit(ctx context.Context) {
	limit, source, err := i.topicLimit(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			i.m.errors.WithLabelValues("check-limit").Inc()
			i.log.Warn("cannot read the datagrams topic's max.message.bytes to check inlet.max-message-bytes against it",
				"topic", i.topic.Topic, "error", err)
		}
	case limit < int64(i.cfg.MaxMessageBytes):
		reason := fmt.Sprintf("the topic %s takes record batches up to %d bytes (%s), below inlet.max-message-bytes %d: "+
			"larger batches are refused and their datagrams dropped (too-large); set inlet.max-message-bytes to at most %d",
			i.topic.Topic, limit, source, i.cfg.MaxMessageBytes, limit)
		i.health.Set("limit", reason)
		i.log.Error("inlet.max-message-bytes is above the topic's limit", "topic", i.topic.Topic, "limit", limit,
			"source", source, "max-message-bytes", i.cfg.MaxMessageBytes)
	default:
		i.health.Clear("limit")
	}
}

// topicLimit returns the largest record batch the topic takes and where that limit is set:
// the topic's max.message.bytes when the topic sets it, else the least message.max.bytes of
// the brokers, which the topic inherits.
func (i *Inlet) topicLimit(ctx context.Context) (int64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(i.client)
	rcs, err := adm.DescribeTopicConfigs(ctx, i.topic.Topic)
	if err != nil {
		return 0, "", err
	}
	rc, err := rcs.On(i.topic.Topic, nil)
	if err == nil && rc.Err != nil {
		err = rc.Err
	}
	if err != nil {
		return 0, "", err
	}
	if v, src, ok := configValue(rc.Configs, "max.message.bytes"); ok && src == kmsg.ConfigSourceDynamicTopicConfig {
		return v, "max.message.bytes of the topic", nil
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return 0, "", err
	}
	rcs, err = adm.DescribeBrokerConfigs(ctx, brokers.NodeIDs()...)
	if err != nil {
		return 0, "", err
	}
	limit, source := int64(-1), ""
	for _, rc := range rcs {
		if v, _, ok := configValue(rc.Configs, "message.max.bytes"); ok && rc.Err == nil && (limit < 0 || v < limit) {
			limit, source = v, "message.max.bytes of broker "+rc.Name
		}
	}
	if limit < 0 {
		return 0, "", errors.New("neither the topic's max.message.bytes nor a broker's message.max.bytes is described")
	}
	return limit, source, nil
}

// configValue returns the integer value of the configuration key and where it is set.
func configValue(configs []kadm.Config, key string) (int64, kmsg.ConfigSource, bool) {
	for _, c := range configs {
		if c.Key == key && c.Value != nil {
			v, err := strconv.ParseInt(*c.Value, 10, 64)
			return v, c.Source, err == nil
		}
	}
	return 0, 0, false
}

// monitor reports in /healthz while records stay buffered with none acknowledged for
// flush-timeout (what a stop then would drop), until Stop.
func (i *Inlet) monitor() {
	defer i.wg.Done()
	t := time.NewTicker(min(time.Second, max(i.cfg.FlushTimeout/2, 10*time.Millisecond)))
	defer t.Stop()
	var idleAt time.Time // when the buffer was last seen empty
	for {
		select {
		case <-i.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		buffered := i.client.BufferedProduceRecords()
		if buffered == 0 {
			idleAt = now
		}
		last := time.Unix(0, i.lastDelivery.Load())
		if idleAt.After(last) {
			last = idleAt
		}
		if wait := now.Sub(last); buffered > 0 && wait >= i.cfg.FlushTimeout {
			i.health.Set("delivery", fmt.Sprintf("no record acknowledged for %s (inlet.flush-timeout %s), %d records buffered: brokers unreachable or refusing?",
				wait.Round(time.Second), i.cfg.FlushTimeout, buffered))
		} else {
			i.health.Clear("delivery")
		}
	}
}

// Name names the inlet in /healthz.
func (i *Inlet) Name() string { return "inlet" }

// Health implements health.Reporter.
func (i *Inlet) Health() health.Report {
	r := i.health.Report()
	sent, delivered, dropped := i.Counts()
	r.Counters = map[string]uint64{
		"datagrams-sent": uint64(sent), "datagrams-delivered": uint64(delivered), "datagrams-dropped": uint64(dropped),
		"records-buffered": uint64(i.client.BufferedProduceRecords()),
	}
	return r
}

func (i *Inlet) ensureTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(i.client)
	// Listed first: creating a topic that exists is refused with an error a broker logs.
	if td, err := adm.ListTopics(ctx, i.topic.Topic); err == nil && td.Has(i.topic.Topic) && td[i.topic.Topic].Err == nil {
		return nil
	}
	resp, err := adm.CreateTopic(ctx, i.topic.Partitions, i.topic.ReplicationFactor, nil, i.topic.Topic)
	if err != nil {
		return err
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return resp.Err
	}
	if resp.Err == nil {
		i.log.Info("datagrams topic created", "topic", i.topic.Topic, "partitions", i.topic.Partitions)
	}
	return nil
}

// Forward implements collector.Forwarder: it produces the datagram alone in a record of
// version 1, without waiting. The collector's workers use NewBatch instead.
func (i *Inlet) Forward(payload []byte, exporter netip.AddrPort, received time.Time, protocol string) {
	rec := i.record(exporter.Addr(), received)
	rec.Value = datagram.Append(rec.Value, datagram.Datagram{
		Received: received, Exporter: exporter, Protocol: datagram.ProtocolOf(protocol), Payload: payload})
	i.sent.Add(1)
	i.m.sent.Inc()
	i.produce(rec)
}

// record returns a recycled record, keyed by the exporter's address when records are.
func (i *Inlet) record(exporter netip.Addr, received time.Time) *kgo.Record {
	rec, _ := i.free.Get().(*kgo.Record)
	if rec == nil {
		rec = &kgo.Record{Value: make([]byte, 0, recordSize)}
	}
	if i.keyed {
		a := exporter.Unmap()
		if a.Is4() {
			a4 := a.As4()
			rec.Key = append(rec.Key, a4[:]...)
		} else {
			a16 := a.As16()
			rec.Key = append(rec.Key, a16[:]...)
		}
	}
	rec.Timestamp = received
	return rec
}

func (i *Inlet) produce(rec *kgo.Record) {
	i.m.records.Inc()
	i.client.TryProduce(context.Background(), rec, i.promise)
}

// NewBatch implements collector.BatchForwarder: a worker's datagrams are packed into batch
// records (one per exporter with key exporter) produced at the worker's Send.
func (i *Inlet) NewBatch() collector.ForwardBatch { return &batch{i: i} }

// batch is one worker's records not produced yet.
type batch struct {
	i    *Inlet
	open []openRecord
}

type openRecord struct {
	rec   *kgo.Record
	addr  netip.Addr // the exporter's, with key exporter
	since time.Time  // receive time of its first datagram
}

// maxOpen bounds the records a worker holds open at once with key exporter.
const maxOpen = 64

// Add packs a datagram into the worker's open record (its exporter's with key exporter),
// producing that record first when the datagram would make it larger than batch-bytes.
func (b *batch) Add(payload []byte, exporter netip.AddrPort, received time.Time, protocol string) {
	i := b.i
	d := datagram.Datagram{Received: received, Exporter: exporter, Protocol: datagram.ProtocolOf(protocol), Payload: payload}
	addr := exporter.Addr().Unmap()
	k := -1
	for j := range b.open {
		if !i.keyed || b.open[j].addr == addr {
			k = j
			break
		}
	}
	if k >= 0 {
		v := b.open[k].rec.Value
		if len(v)+datagram.EntryLen(d) > i.cfg.BatchBytes || datagram.BatchLen(v) == datagram.MaxBatchEntries {
			b.produce(k)
			k = -1
		}
	}
	if k < 0 {
		if len(b.open) == maxOpen {
			b.Send(time.Time{}, true)
		}
		rec := i.record(addr, received)
		rec.Value = datagram.AppendBatch(rec.Value)
		b.open = append(b.open, openRecord{rec: rec, addr: addr, since: received})
		k = len(b.open) - 1
	}
	o := &b.open[k]
	o.rec.Value = datagram.AppendEntry(o.rec.Value, d)
	i.sent.Add(1)
	i.m.sent.Inc()
}

// Due is when the oldest open record must be produced (zero when none is open, or when
// batch-wait is 0: Send after each read produces them all).
func (b *batch) Due() time.Time {
	if b.i.cfg.BatchWait == 0 {
		return time.Time{}
	}
	var t time.Time
	for _, o := range b.open {
		if t.IsZero() || o.since.Before(t) {
			t = o.since
		}
	}
	if t.IsZero() {
		return t
	}
	return t.Add(b.i.cfg.BatchWait)
}

// Send produces the open records that have waited batch-wait at now, or all of them.
func (b *batch) Send(now time.Time, all bool) {
	wait := b.i.cfg.BatchWait
	for k := len(b.open) - 1; k >= 0; k-- {
		if all || wait == 0 || now.Sub(b.open[k].since) >= wait {
			b.produce(k)
		}
	}
}

// produce hands the open record k to the producer.
func (b *batch) produce(k int) {
	rec := b.open[k].rec
	last := len(b.open) - 1
	b.open[k] = b.open[last]
	b.open[last] = openRecord{}
	b.open = b.open[:last]
	b.i.produce(rec)
}

// done is the producer's promise for every record.
func (i *Inlet) done(rec *kgo.Record, err error) {
	n := datagram.BatchLen(rec.Value)
	switch {
	case err == nil:
		i.delivered.Add(int64(n))
		i.m.delivered.Add(float64(n))
		i.m.bytes.Add(float64(len(rec.Value)))
		i.lastDelivery.Store(time.Now().UnixNano())
	case errors.Is(err, kgo.ErrMaxBuffered):
		i.drop(n, i.m.droppedFull, "buffer-full", eventBufferFull, err)
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		i.drop(n, i.m.droppedTooLarge, "too-large", eventTooLarge, err)
	default:
		i.drop(n, i.m.droppedFailed, "delivery-failed", eventDeliveryFailed, err)
	}
	// franz-go is done with the record: recycle it, buffers included.
	key, value := rec.Key[:0], rec.Value[:0]
	if cap(value) > i.cfg.BatchBytes+maxDatagramEntry {
		value = make([]byte, 0, recordSize) // a buffer grown past batch-bytes is not kept
	}
	*rec = kgo.Record{Key: key, Value: value}
	i.free.Put(rec)
}

// maxDatagramEntry is the largest entry of a batch record: a UDP payload of 65,535 bytes, the
// IPv6 header and the entry's length.
const maxDatagramEntry = 65535 + 28 + 4

func (i *Inlet) drop(n int, c prometheus.Counter, reason, event string, err error) {
	i.dropped.Add(int64(n))
	c.Add(float64(n))
	i.health.Event(event)
	if ok, suppressed := i.dropLog.Allow(time.Now()); ok {
		i.log.Warn("datagrams dropped: Kafka cannot take them", "reason", reason, "error", err,
			"suppressed", suppressed, "dropped-total", i.dropped.Load())
	}
}

// Counts returns the datagrams handed to the producer, delivered, and dropped so far.
func (i *Inlet) Counts() (sent, delivered, dropped int64) {
	return i.sent.Load(), i.delivered.Load(), i.dropped.Load()
}

// Stop waits up to flush-timeout for the buffered datagrams to be delivered, then closes the
// client: those still buffered are counted as dropped. The collector's workers must have
// stopped forwarding.
func (i *Inlet) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), i.cfg.FlushTimeout)
	defer cancel()
	if i.cancel != nil {
		i.cancel()
	}
	i.wg.Wait()
	if err := i.client.Flush(ctx); err != nil {
		i.log.Warn("datagrams not delivered before flush-timeout are counted as dropped", "error", err)
	}
	i.client.Close()
	return nil
}
