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
// delivered, or dropped (buffer-full, delivery-failed).
package inlet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/collector"
	"flowzero/datagram"
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

	sent, delivered, dropped atomic.Int64
}

// MaxRecordBytes is the producer's largest record batch, and so its largest record
// (batch-bytes stays 1 KiB below for the batch's and the record's own headers).
const MaxRecordBytes = 1 << 20

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
		kgo.ProducerBatchMaxBytes(MaxRecordBytes),
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
// not stop the inlet from receiving datagrams (they are buffered meanwhile).
func (i *Inlet) Start() error {
	i.ctx, i.cancel = context.WithCancel(context.Background())
	i.wg.Add(1)
	go func() {
		defer i.wg.Done()
		for attempt := 0; ; attempt++ {
			err := i.ensureTopic(i.ctx)
			if err == nil {
				i.ready.Store(true)
				return
			}
			i.m.errors.WithLabelValues("create-topic").Inc()
			if attempt%30 == 0 {
				i.log.Warn("cannot create or check the datagrams topic, retrying", "topic", i.topic.Topic, "error", err)
			}
			select {
			case <-i.ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return nil
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
	case errors.Is(err, kgo.ErrMaxBuffered):
		i.drop(n, i.m.droppedFull, "buffer-full", err)
	default:
		i.drop(n, i.m.droppedFailed, "delivery-failed", err)
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

func (i *Inlet) drop(n int, c prometheus.Counter, reason string, err error) {
	i.dropped.Add(int64(n))
	c.Add(float64(n))
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
