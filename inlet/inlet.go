// Package inlet is the receiving half of a split collector (mode: inlet): the collector's UDP
// listeners, workers, allow-list and kernel drop counters hand each datagram of an allowed
// exporter to the inlet (collector.Forwarder), which writes it undecoded, as a datagram record
// (flowzero/datagram), to the datagrams topic that the outlets consume.
//
// Per datagram the inlet copies the payload behind the record's header into a recycled Kafka
// record and hands it to franz-go's producer without waiting: no decoding, no allocation.
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
		kgo.ProducerBatchMaxBytes(1<<20),
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

// Forward implements collector.Forwarder: it produces the datagram's record without waiting.
func (i *Inlet) Forward(payload []byte, exporter netip.AddrPort, received time.Time, protocol string) {
	rec, _ := i.free.Get().(*kgo.Record)
	if rec == nil {
		rec = &kgo.Record{Value: make([]byte, 0, recordSize)}
	}
	rec.Value = datagram.Append(rec.Value, datagram.Datagram{
		Received: received, Exporter: exporter, Protocol: datagram.ProtocolOf(protocol), Payload: payload})
	if i.keyed {
		a := exporter.Addr().Unmap()
		if a.Is4() {
			a4 := a.As4()
			rec.Key = append(rec.Key, a4[:]...)
		} else {
			a16 := a.As16()
			rec.Key = append(rec.Key, a16[:]...)
		}
	}
	rec.Timestamp = received
	i.sent.Add(1)
	i.m.sent.Inc()
	i.client.TryProduce(context.Background(), rec, i.promise)
}

// done is the producer's promise for every record.
func (i *Inlet) done(rec *kgo.Record, err error) {
	switch {
	case err == nil:
		i.delivered.Add(1)
		i.m.delivered.Inc()
		i.m.bytes.Add(float64(len(rec.Value)))
	case errors.Is(err, kgo.ErrMaxBuffered):
		i.drop(i.m.droppedFull, "buffer-full", err)
	default:
		i.drop(i.m.droppedFailed, "delivery-failed", err)
	}
	// franz-go is done with the record: recycle it, buffers included.
	key, value := rec.Key[:0], rec.Value[:0]
	if cap(value) > 4*recordSize {
		value = make([]byte, 0, recordSize) // a jumbo datagram's buffer is not kept
	}
	*rec = kgo.Record{Key: key, Value: value}
	i.free.Put(rec)
}

func (i *Inlet) drop(c prometheus.Counter, reason string, err error) {
	i.dropped.Add(1)
	c.Inc()
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
