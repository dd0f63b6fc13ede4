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

	"flowzero/internal/clock"
	"flowzero/internal/health"
	"flowzero/internal/kafkaconn"
	"flowzero/internal/lograte"
	"flowzero/output"
)

// Sink produces batches to Kafka.
type Sink struct {
	cfg     Configuration
	topic   string
	log     *slog.Logger
	metrics *metrics
	client  *kgo.Client
	clock   clock.Clock
	health  *health.State

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the topic check and the monitor
	promises  sync.WaitGroup // records whose promise franz-go has not called yet
	topicDone chan struct{}  // closed when the topic check ends
	ready     atomic.Bool    // topic known to exist

	// counting guards stopped: promises count their flows under its read lock, and Stop,
	// under the write lock, counts the flows of the unanswered ones as dropped and sets
	// stopped, so that a promise answering later cannot count its flows a second time.
	counting sync.RWMutex
	stopped  bool

	// Counts for tests and the API, kept beside the Prometheus counters.
	sent, delivered, dropped atomic.Int64
	// unlogged counts the flows dropped since the last log line about drops, by reason.
	unlogged [dropReasons]atomic.Int64
	// lastDelivery is when a record was last acknowledged (Unix nanoseconds, on the clock).
	lastDelivery atomic.Int64
}

// Why flows are dropped, a label of flowzero_kafka_flows_dropped_total.
const (
	dropBufferFull = iota
	dropDeliveryFailed
	dropReasons
)

var dropReasonNames = [dropReasons]string{"buffer-full", "delivery-failed"}

// stallAfter is how long records may stay buffered without an acknowledgment before the
// sink reports that it cannot deliver.
const stallAfter = 10 * time.Second

// closeAnswerWait bounds how long Stop waits, after closing the client, for the promises of
// the records it failed: franz-go fails every buffered record on Close, and calls their
// promises soon after. A variable for tests.
var closeAnswerWait = 5 * time.Second

// dropLogEvery is the least time between two log lines about dropped flows; each gives the
// flows dropped since the previous one.
const dropLogEvery = 10 * time.Second

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
		clock:   clock.System{},
		health:  health.NewState(nil),
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
	opts = append(opts, kafkaconn.SecurityOptions(cfg.TLS, cfg.SASL)...)
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

// SetClock sets the clock the sink measures its delivery delays and dates its health
// report with (clock.System{} by default). Call it before Start.
func (s *Sink) SetClock(c clock.Clock) {
	s.clock = clock.Or(c)
	s.health.SetClock(s.clock)
}

// Start creates the topic if missing, in the background: a broker that is down at startup
// must not stop the collector from receiving flows (they are buffered meanwhile). It also
// starts the monitor that logs drops and reports delivery stalls.
func (s *Sink) Start() error {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.lastDelivery.Store(s.clock.Now().UnixNano())
	s.topicDone = make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(s.topicDone)
		for attempt := 0; ; attempt++ {
			err := s.ensureTopic(s.ctx)
			if err == nil {
				s.ready.Store(true)
				s.health.Clear("topic")
				return
			}
			if s.ctx.Err() != nil {
				return
			}
			s.metrics.errors.WithLabelValues("create-topic").Inc()
			s.health.Set("topic", fmt.Sprintf("cannot create or check the topic %s: %v", s.topic, err))
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
	s.wg.Add(1)
	go s.monitor()
	return nil
}

// ensureTopic checks that the topic exists, and creates it when it does not: checking
// first needs no right to create topics, and says nothing of a topic that already exists.
func (s *Sink) ensureTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(s.client)
	topics, err := adm.ListTopics(ctx, s.topic)
	if err != nil {
		return err
	}
	if d, ok := topics[s.topic]; ok && d.Err == nil {
		return nil
	} else if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return d.Err
	}
	// CreateTopic returns the topic's error as its error: TOPIC_ALREADY_EXISTS when
	// another collector created it since the check.
	_, err = adm.CreateTopic(ctx, s.cfg.Partitions, s.cfg.ReplicationFactor, nil, s.topic)
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return nil
	case err != nil:
		return err
	}
	s.log.Info("Kafka topic created", "topic", s.topic, "partitions", s.cfg.Partitions)
	return nil
}

// monitor logs the flows dropped (rate-limited, with their count since the previous line)
// and reports the delivery as stalled while records wait with no acknowledgment for
// stallAfter, every second until Stop.
func (s *Sink) monitor() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	dropLog := lograte.New(1, dropLogEvery)
	stalled := false
	var idleAt time.Time // when the buffer was last seen empty
	for {
		select {
		case <-s.ctx.Done():
			s.logDrops(nil, time.Time{})
			return
		case <-t.C:
		}
		now := s.clock.Now()
		s.logDrops(dropLog, now)
		buffered := s.client.BufferedProduceRecords()
		if buffered == 0 {
			idleAt = now
		}
		last := time.Unix(0, s.lastDelivery.Load())
		if idleAt.After(last) {
			last = idleAt
		}
		switch wait := now.Sub(last); {
		case buffered > 0 && wait >= stallAfter:
			reason := fmt.Sprintf("no record acknowledged for %s, %d records buffered (brokers unreachable or refusing?)",
				wait.Round(time.Second), buffered)
			s.health.Set("delivery", reason)
			if !stalled {
				stalled = true
				s.log.Warn("Kafka is not acknowledging records; flows are buffered, then dropped once max-buffered-bytes is full",
					"topic", s.topic, "waiting", wait.Round(time.Second), "buffered-records", buffered)
			}
		case stalled && (buffered == 0 || wait < stallAfter):
			stalled = false
			s.health.Clear("delivery")
			s.log.Info("Kafka acknowledges records again", "topic", s.topic)
		}
	}
}

// logDrops logs the flows dropped since the previous line, when lim allows (always when
// lim is nil, at Stop).
func (s *Sink) logDrops(lim *lograte.Limiter, now time.Time) {
	var n [dropReasons]int64
	total := int64(0)
	for i := range n {
		n[i] = s.unlogged[i].Load()
		total += n[i]
	}
	if total == 0 {
		return
	}
	if lim != nil {
		if ok, _ := lim.Allow(now); !ok {
			return
		}
	}
	for i := range n {
		s.unlogged[i].Add(-n[i])
	}
	s.log.Warn("Kafka sink dropped flows", "topic", s.topic,
		"buffer-full", n[dropBufferFull], "delivery-failed", n[dropDeliveryFailed],
		"dropped-total", s.dropped.Load(), "delivered-total", s.delivered.Load())
}

// Health implements health.Reporter: degraded while the topic cannot be checked, while
// records wait without acknowledgment, and for health.Hold after flows were dropped.
func (s *Sink) Health() health.Report {
	r := s.health.Report()
	sent, delivered, dropped := s.Counts()
	r.Counters = map[string]uint64{
		"flows-sent": uint64(sent), "flows-delivered": uint64(delivered), "flows-dropped": uint64(dropped),
		"records-buffered": uint64(s.client.BufferedProduceRecords()),
	}
	return r
}

// drop counts flows dropped for reason.
func (s *Sink) drop(reason int, flows int64) {
	s.dropped.Add(flows)
	s.metrics.flowsDropped[reason].Add(float64(flows))
	s.unlogged[reason].Add(flows)
	s.health.Event(fmt.Sprintf("flows dropped (%s), %d since start", dropReasonNames[reason], s.dropped.Load()))
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
	s.promises.Add(1)
	s.client.TryProduce(context.Background(), rec, func(r *kgo.Record, err error) {
		defer s.promises.Done()
		s.counting.RLock()
		defer s.counting.RUnlock()
		switch {
		case s.stopped:
			// Counted as dropped by Stop, which gave up waiting for this answer.
		case err == nil:
			s.delivered.Add(flows)
			s.metrics.flowsDelivered.Add(float64(flows))
			s.metrics.bytesDelivered.Add(float64(len(r.Value)))
			s.lastDelivery.Store(s.clock.Now().UnixNano())
		case errors.Is(err, kgo.ErrMaxBuffered):
			s.drop(dropBufferFull, flows)
		default:
			s.metrics.errors.WithLabelValues("produce").Inc()
			s.drop(dropDeliveryFailed, flows)
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
// counted as dropped, and the drops not logged yet are. Once it returns, every flow handed
// to Send is counted delivered or dropped.
func (s *Sink) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.FlushTimeout)
	defer cancel()
	if s.topicDone != nil {
		select {
		case <-s.topicDone:
		case <-ctx.Done():
		}
	}
	if err := s.client.Flush(ctx); err != nil {
		s.log.Warn("Kafka flush did not complete; remaining flows are counted as dropped", "error", err)
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.client.Close()
	// Close fails the records still buffered, but franz-go may call their promises after it
	// returns: they are counted before the last drops are logged.
	done := make(chan struct{})
	go func() { s.promises.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeAnswerWait):
	}
	s.counting.Lock()
	s.stopped = true
	if n := s.sent.Load() - s.delivered.Load() - s.dropped.Load(); n > 0 {
		s.metrics.errors.WithLabelValues("produce").Inc()
		s.drop(dropDeliveryFailed, n)
		s.log.Warn("Kafka records without an answer after close; their flows are counted as dropped",
			"flows", n, "waited", closeAnswerWait)
	}
	s.counting.Unlock()
	s.logDrops(nil, time.Time{})
	return nil
}

// KeyedByExporter tells the collector to batch flows per exporter, so that each record's key
// is its exporter's address.
func (s *Sink) KeyedByExporter() bool { return s.cfg.Key == "exporter" }
