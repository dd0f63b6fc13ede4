package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/decoder/netflow"
	"flowzero/internal/config"
	"flowzero/internal/kafkaconn"
	"flowzero/internal/lograte"
)

// Configuration of the state topic.
type Configuration struct {
	// Topic is the compacted topic holding the decoders' state.
	Topic string `yaml:"topic"`
	// ReplicationFactor of the topic when it has to be created (one partition, compacted).
	ReplicationFactor int16 `yaml:"replication-factor"`
}

// DefaultConfiguration returns the defaults.
func DefaultConfiguration() Configuration {
	return Configuration{Topic: "flowzero-decoder-state", ReplicationFactor: 1}
}

// Validate checks the configuration, naming the bad key.
func (c Configuration) Validate() error {
	if c.Topic == "" {
		return config.Errorf("topic", "must not be empty")
	}
	if c.ReplicationFactor < 1 {
		return config.Errorf("replication-factor", "must be at least 1")
	}
	return nil
}

// loadIdle is how long Start waits for more records of the state topic before it gives up
// reaching the end offsets it listed.
const loadIdle = 30 * time.Second

// Topic publishes the state a decoder learns and applies the state every decoder published.
type Topic struct {
	cfg    Configuration
	log    *slog.Logger
	client *kgo.Client
	m      *metrics

	applyErrLog *lograte.Limiter
	loadIdle    time.Duration
	cancel      context.CancelFunc
	done        chan struct{}
}

type metrics struct {
	published, publishErrors, applied, applyErrors, loadTimeouts prometheus.Counter
	loaded                                                       prometheus.Gauge
}

// New returns the state topic's client; nothing is contacted before Start.
func New(r prometheus.Registerer, log *slog.Logger, conn kafkaconn.Configuration, cfg Configuration) (*Topic, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	opts := append(conn.Options(),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1<<30),
		kgo.UnknownTopicRetries(-1),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedBytes(64<<20),
	)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("state topic: %w", err)
	}
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_state_published_total",
			Help: "Decoder state records (templates, withdrawals, sampling rates, system init times) published to the state topic."}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_state_publish_errors_total",
			Help: "Decoder state records that could not be published (the other outlets learn them from a later datagram)."}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_state_applied_total",
			Help: "Records of the state topic applied to the decoder."}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_state_apply_errors_total",
			Help: "Records of the state topic that did not parse or apply (logged, rate-limited)."}),
		loadTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_state_load_timeouts_total",
			Help: "Starts that stopped waiting for the end of the state topic because nothing came (logged)."}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flowzero_state_loaded_records",
			Help: "Records of the state topic applied at start, before the first datagram was consumed."}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.published, m.publishErrors, m.applied, m.applyErrors, m.loadTimeouts, m.loaded} {
			if err := r.Register(c); err != nil {
				client.Close()
				return nil, err
			}
		}
	}
	return &Topic{cfg: cfg, log: log.With("component", "state"), client: client, m: m,
		applyErrLog: lograte.New(3, 30*time.Second), loadIdle: loadIdle}, nil
}

// Start creates the topic when it is missing, applies every record it holds, in order, then
// follows it in the background, applying what the other outlets publish. apply is called from
// one goroutine at a time. Start returns once the records present at its call are applied, or
// with ctx's error.
func (t *Topic) Start(ctx context.Context, apply func(netflow.StateRecord) error) error {
	if err := t.ensureTopic(ctx); err != nil {
		return err
	}
	adm := kadm.NewClient(t.client)
	ends, err := adm.ListEndOffsets(ctx, t.cfg.Topic)
	if err != nil {
		return fmt.Errorf("state topic %s: end offsets: %w", t.cfg.Topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, t.cfg.Topic)
	if err != nil {
		return fmt.Errorf("state topic %s: start offsets: %w", t.cfg.Topic, err)
	}
	// A partition whose records were all deleted has nothing to read.
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset <= 0 {
			return
		}
		if s, ok := starts.Lookup(t.cfg.Topic, o.Partition); ok && s.Err == nil && s.Offset >= o.Offset {
			return
		}
		want[o.Partition] = o.Offset
	})
	loaded, err := t.load(ctx, want, apply)
	if err != nil {
		return err
	}
	t.m.loaded.Set(float64(loaded))
	t.log.Info("decoder state loaded", "topic", t.cfg.Topic, "records", loaded)
	fctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	go func() {
		defer close(t.done)
		for {
			fetches := t.client.PollFetches(fctx)
			if fctx.Err() != nil || fetches.IsClientClosed() {
				return
			}
			fetches.EachRecord(func(rec *kgo.Record) {
				if !rec.Attrs.IsControl() {
					t.apply(rec, apply)
				}
			})
		}
	}()
	return nil
}

// load applies the records of the partitions of want up to their end offsets and returns how
// many it applied. The client keeps control records (a transaction's commit marker may be
// the last offset) so that the end is seen; should nothing come for loadIdle while an end is
// not reached (a tail that no fetch returns), it stops waiting, logs and counts it: the
// records that come later are applied as they come.
func (t *Topic) load(ctx context.Context, want map[int32]int64, apply func(netflow.StateRecord) error) (int, error) {
	loaded := 0
	for len(want) > 0 {
		pctx, cancel := context.WithTimeout(ctx, t.loadIdle)
		fetches := t.client.PollFetches(pctx)
		idle := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return loaded, fmt.Errorf("state topic %s: reading it to its end: %w", t.cfg.Topic, err)
		}
		got := 0
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.log.Warn("state topic: fetch error", "topic", topic, "partition", p, "error", err)
			}
		})
		fetches.EachRecord(func(rec *kgo.Record) {
			got++
			if !rec.Attrs.IsControl() {
				t.apply(rec, apply)
				loaded++
			}
			if end, ok := want[rec.Partition]; ok && rec.Offset+1 >= end {
				delete(want, rec.Partition)
			}
		})
		if idle && got == 0 {
			t.m.loadTimeouts.Inc()
			t.log.Warn("state topic: nothing came for a while before the end offsets were reached; consuming with the state read so far",
				"topic", t.cfg.Topic, "waited", t.loadIdle, "ends", want, "records", loaded)
			break
		}
	}
	return loaded, nil
}

func (t *Topic) apply(rec *kgo.Record, apply func(netflow.StateRecord) error) {
	r, err := Parse(rec.Key, rec.Value)
	if err == nil {
		err = apply(r)
	}
	if err != nil {
		t.m.applyErrors.Inc()
		if ok, suppressed := t.applyErrLog.Allow(time.Now()); ok {
			t.log.Warn("state topic: record not applied", "partition", rec.Partition, "offset", rec.Offset,
				"error", err, "suppressed", suppressed)
		}
		return
	}
	t.m.applied.Inc()
}

// ensureTopic creates the compacted topic of one partition when it does not exist.
func (t *Topic) ensureTopic(ctx context.Context) error {
	adm := kadm.NewClient(t.client)
	compact := "compact"
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := adm.CreateTopic(cctx, 1, t.cfg.ReplicationFactor, map[string]*string{"cleanup.policy": &compact}, t.cfg.Topic)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			t.log.Info("state topic created", "topic", t.cfg.Topic)
			return nil
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		t.log.Warn("cannot create or check the state topic, retrying", "topic", t.cfg.Topic, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("state topic %s: %w", t.cfg.Topic, err)
		case <-time.After(time.Second):
		}
	}
}

// Publish sends a state record without blocking (it is called under a decoder session's
// lock); a record that cannot be buffered is counted and logged, and the other outlets learn
// the state from a later datagram of the exporter.
func (t *Topic) Publish(r netflow.StateRecord) {
	key := AppendKey(make([]byte, 0, keyLen), r)
	value := AppendValue(make([]byte, 0, valueHeader+len(r.Record)), r)
	t.client.TryProduce(context.Background(), &kgo.Record{Key: key, Value: value}, func(_ *kgo.Record, err error) {
		if err != nil {
			t.m.publishErrors.Inc()
			if ok, suppressed := t.applyErrLog.Allow(time.Now()); ok {
				t.log.Warn("state topic: record not published", "error", err, "suppressed", suppressed)
			}
			return
		}
		t.m.published.Inc()
	})
}

// Flush waits until the records published so far are acknowledged (or ctx ends).
func (t *Topic) Flush(ctx context.Context) error { return t.client.Flush(ctx) }

// Stop flushes what is published (10 s at most), stops following and closes the client.
func (t *Topic) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := t.client.Flush(ctx)
	cancel()
	if t.cancel != nil {
		t.cancel()
		<-t.done
	}
	t.client.Close()
	return err
}
