// Package kafka is the collector's Kafka sink, on franz-go. Each Kafka record carries one
// batch of length-delimited flow messages (ClickHouse's Protobuf input format reads several
// messages per record), to the topic flows-<schema hash>, created if missing.
//
// While Kafka is slow or down, franz-go keeps records in memory up to MaxBufferedBytes and
// retries; the collector keeps reading UDP; a batch that does not fit is dropped at once and
// counted (TryProduce). When Kafka comes back, delivery resumes on its own. Every flow handed
// to Send is eventually counted exactly once: delivered, dropped (buffer-full) or dropped
// (delivery-failed).
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"flowzero/output"
)

// Sink produces batches to Kafka.
type Sink struct {
	cfg     Configuration
	topic   string
	log     *slog.Logger
	metrics *metrics
	client  *kgo.Client

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ready  atomic.Bool // topic known to exist

	// Counts for tests and the API, kept beside the Prometheus counters.
	sent, delivered, dropped atomic.Int64
}

// New returns a Kafka sink for the topic <TopicPrefix>-<schemaHash>. Nothing is contacted
// before Start.
func New(r prometheus.Registerer, log *slog.Logger, cfg Configuration, schemaHash string) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Sink{
		cfg:     cfg,
		topic:   cfg.TopicPrefix + "-" + schemaHash,
		log:     log.With("sink", "kafka"),
		metrics: newMetrics(r),
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(s.topic),
		kgo.MaxBufferedBytes(cfg.MaxBufferedBytes),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(4 << 20),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Retry forever while the broker is away; the bounded buffer is what limits us.
		kgo.RecordRetries(1 << 30),
		kgo.UnknownTopicRetries(-1),
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			return min(time.Duration(tries)*100*time.Millisecond, 2*time.Second)
		}),
	}
	switch cfg.Compression {
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "none":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	if cfg.Key == "random" {
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	}
	if cfg.TLS {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	switch cfg.SASL.Mechanism {
	case "plain":
		opts = append(opts, kgo.SASL(plain.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsMechanism()))
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsSha512Mechanism()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	s.client = client
	return s, nil
}

// Name implements output.Sink.
func (s *Sink) Name() string { return "kafka" }

// Topic returns the topic the sink produces to.
func (s *Sink) Topic() string { return s.topic }

// Start creates the topic if missing, in the background: a broker that is down at startup
// must not stop the collector from receiving flows (they are buffered meanwhile).
func (s *Sink) Start() error {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for attempt := 0; ; attempt++ {
			err := s.ensureTopic(s.ctx)
			if err == nil {
				s.ready.Store(true)
				return
			}
			s.metrics.errors.WithLabelValues("create-topic").Inc()
			if attempt == 0 || attempt%30 == 0 {
				s.log.Warn("cannot create or check the Kafka topic, retrying", "topic", s.topic, "error", err)
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return nil
}

func (s *Sink) ensureTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(s.client)
	resp, err := adm.CreateTopic(ctx, s.cfg.Partitions, s.cfg.ReplicationFactor, nil, s.topic)
	if err != nil {
		return err
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return resp.Err
	}
	if resp.Err == nil {
		s.log.Info("Kafka topic created", "topic", s.topic, "partitions", s.cfg.Partitions)
	}
	return nil
}

// Send hands a batch to the producer without blocking. It always returns true: drops are
// counted asynchronously (see Counts).
func (s *Sink) Send(b *output.Batch) bool {
	flows := int64(b.Flows)
	s.sent.Add(flows)
	s.metrics.flowsSent.Add(float64(flows))
	rec := &kgo.Record{Value: b.Data}
	if s.cfg.Key == "exporter" && len(b.Key) > 0 {
		rec.Key = b.Key
	}
	s.client.TryProduce(context.Background(), rec, func(r *kgo.Record, err error) {
		switch {
		case err == nil:
			s.delivered.Add(flows)
			s.metrics.flowsDelivered.Add(float64(flows))
			s.metrics.bytesDelivered.Add(float64(len(r.Value)))
		case errors.Is(err, kgo.ErrMaxBuffered):
			s.dropped.Add(flows)
			s.metrics.flowsDropped.WithLabelValues("buffer-full").Add(float64(flows))
		default:
			s.dropped.Add(flows)
			s.metrics.flowsDropped.WithLabelValues("delivery-failed").Add(float64(flows))
			s.metrics.errors.WithLabelValues("produce").Inc()
		}
		b.Release()
	})
	// A batch over the buffer limit is counted by the promise above, which franz-go calls
	// from its own goroutine: the result is not known here.
	return true
}

// Counts returns the flows handed to Send, delivered, and dropped so far.
func (s *Sink) Counts() (sent, delivered, dropped int64) {
	return s.sent.Load(), s.delivered.Load(), s.dropped.Load()
}

// Stop waits up to FlushTimeout for the topic to exist and for buffered records to be
// delivered, then closes the client; records still buffered then are failed by the client and
// counted as dropped.
func (s *Sink) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.FlushTimeout)
	defer cancel()
	topicDone := make(chan struct{})
	go func() { s.wg.Wait(); close(topicDone) }()
	select {
	case <-topicDone:
	case <-ctx.Done():
	}
	if s.cancel != nil {
		s.cancel()
	}
	<-topicDone
	if err := s.client.Flush(ctx); err != nil {
		s.log.Warn("Kafka flush did not complete; remaining flows are counted as dropped", "error", err)
	}
	s.client.Close()
	return nil
}

// KeyedByExporter tells the collector to batch flows per exporter, so that each record's key
// is its exporter's address.
func (s *Sink) KeyedByExporter() bool { return s.cfg.Key == "exporter" }
