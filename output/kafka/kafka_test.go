package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/testutil"
	"flowzero/output"
)

// TestSinkKfake runs the sink against franz-go's in-process fake broker; the real broker is
// exercised by the collector's end-to-end test.
func TestSinkKfake(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cfg := DefaultConfiguration()
	cfg.Brokers = cluster.ListenAddrs()
	cfg.Partitions = 2
	cfg.Linger = 0
	cfg.FlushTimeout = 10 * time.Second
	s, err := New(prometheus.NewRegistry(), nil, cfg, "abc123")
	if err != nil {
		t.Fatal(err)
	}
	if s.Topic() != "flows-abc123" {
		t.Fatalf("topic %q", s.Topic())
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	pool := output.NewBatchPool(256, 4)
	const batches = 20
	for i := range batches {
		b := pool.Get()
		b.Append([]byte(fmt.Sprintf("\x06flow%02d", i)))
		b.Append([]byte(fmt.Sprintf("\x06more%02d", i)))
		b.Key = append(b.Key, "192.0.2.1"...)
		s.Send(b)
	}
	s.Stop()
	sent, delivered, dropped := s.Counts()
	if sent != 2*batches || delivered != sent || dropped != 0 {
		t.Fatalf("sent %d delivered %d dropped %d", sent, delivered, dropped)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics("flows-abc123"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < batches && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != "192.0.2.1" {
				t.Errorf("key %q", r.Key)
			}
			seen[string(r.Value)] = true
		})
	}
	for i := range batches {
		if want := fmt.Sprintf("\x06flow%02d\x06more%02d", i, i); !seen[want] {
			t.Fatalf("record %q missing (got %d records)", want, len(seen))
		}
	}
}

func TestSinkBufferFullCounted(t *testing.T) {
	// No broker at all: everything beyond the buffer is dropped and counted, the rest is
	// failed at Stop once the flush timeout expires; the counts add up.
	cfg := DefaultConfiguration()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.MaxBufferedBytes = 1 << 20
	cfg.FlushTimeout = 200 * time.Millisecond
	s, err := New(nil, nil, cfg, "x")
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	pool := output.NewBatchPool(64<<10, 4)
	for range 64 {
		b := pool.Get()
		b.Data = b.Data[:32<<10]
		b.Flows = 100
		s.Send(b)
	}
	s.Stop()
	var sent, delivered, dropped int64
	if !testutil.Poll(testutil.WaitTimeout, func() bool {
		sent, delivered, dropped = s.Counts()
		return sent == 6400 && delivered == 0 && dropped == sent
	}) {
		t.Fatalf("sent %d delivered %d dropped %d: counts do not add up", sent, delivered, dropped)
	}
}

func TestConfigErrors(t *testing.T) {
	c := DefaultConfiguration()
	c.Key = "hash"
	if err := c.Validate(); err == nil || err.Error() != `key: must be exporter or random, not "hash"` {
		t.Fatalf("got %v", err)
	}
}

// TestConfigFlushTimeoutPositive: a flush-timeout of 0 or below would make Stop give up on
// every buffered record at once; it is refused, naming the key.
func TestConfigFlushTimeoutPositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		c := DefaultConfiguration()
		c.FlushTimeout = d
		if err := c.Validate(); err == nil || err.Error() != "flush-timeout: must be positive, not "+d.String() {
			t.Errorf("flush-timeout %s: got %v", d, err)
		}
	}
}

// TestSinkStopCountsEveryFlow: once Stop returns, every flow sent is counted delivered or
// dropped, even when the flush timeout is spent and the promises of the records failed by
// Close have not all answered within closeAnswerWait; a promise answering later does not
// count its flows again.
func TestSinkStopCountsEveryFlow(t *testing.T) {
	defer func(d time.Duration) { closeAnswerWait = d }(closeAnswerWait)
	closeAnswerWait = 0
	cfg := DefaultConfiguration()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.FlushTimeout = time.Millisecond
	s, err := New(prometheus.NewRegistry(), nil, cfg, "x")
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	pool := output.NewBatchPool(1024, 4)
	for range 100 {
		b := pool.Get()
		b.Data = b.Data[:100]
		b.Flows = 10
		s.Send(b)
	}
	s.Stop()
	sent, delivered, dropped := s.Counts()
	if sent != 1000 || delivered != 0 || dropped != sent {
		t.Fatalf("after Stop: sent %d, delivered %d, dropped %d", sent, delivered, dropped)
	}
	s.promises.Wait() // the late promises
	if _, _, again := s.Counts(); again != dropped {
		t.Fatalf("dropped %d at Stop, %d once every promise answered", dropped, again)
	}
	if v := promtest.ToFloat64(s.metrics.flowsDropped[dropDeliveryFailed]); v != 1000 {
		t.Errorf("delivery-failed drops metric %v, want 1000", v)
	}
}

// TestConfigSASLPlainNeedsTLS: SASL PLAIN would send the password in clear without TLS;
// SCRAM never sends it and is allowed either way.
func TestConfigSASLPlainNeedsTLS(t *testing.T) {
	for _, tc := range []struct {
		mechanism string
		tls       bool
		err       string
	}{
		{"plain", false, "sasl.mechanism: plain sends the password in clear: set tls: true, or use scram-sha-256 or scram-sha-512"},
		{"plain", true, ""},
		{"scram-sha-256", false, ""},
		{"scram-sha-512", false, ""},
	} {
		c := DefaultConfiguration()
		c.TLS = tc.tls
		c.SASL = SASLConfiguration{Mechanism: tc.mechanism, Username: "flowzero", Password: "secret"}
		err := c.Validate()
		if got := fmt.Sprint(err); (tc.err == "" && err != nil) || (tc.err != "" && got != tc.err) {
			t.Errorf("%s with tls %v: got %v, want %q", tc.mechanism, tc.tls, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

// TestSinkTopicAlreadyExists: a topic that exists (another collector, or this one before a
// restart) is used without a word: no warning, no create-topic error counted, healthy.
func TestSinkTopicAlreadyExists(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	adm := kadm.NewClient(kafkatestClient(t, cluster.ListenAddrs()))
	if _, err := adm.CreateTopic(context.Background(), 2, 1, nil, "flows-abc123"); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.Brokers = cluster.ListenAddrs()
	logs := &lockedbuf.Buffer{}
	reg := prometheus.NewRegistry()
	s, err := New(reg, slog.New(slog.NewTextHandler(logs, nil)), cfg, "abc123")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the topic to be found", s.ready.Load)
	s.Stop()
	if strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "TOPIC_ALREADY_EXISTS") {
		t.Errorf("warning about an existing topic:\n%s", logs.String())
	}
	if n := promtest.ToFloat64(s.metrics.errors.WithLabelValues("create-topic")); n != 0 {
		t.Errorf("create-topic errors %v, want 0", n)
	}
	if h := s.Health(); h.Status != health.OK {
		t.Errorf("health %+v", h)
	}
}

func kafkatestClient(t *testing.T, brokers []string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSinkMetricsFromStart: every error and drop series exists from the start at 0, so that
// an alert on its increase works from the first error.
func TestSinkMetricsFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, nil, DefaultConfiguration(), "x"); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP flowzero_kafka_errors_total Kafka errors, by operation (create-topic: the topic could not be checked or created; produce: a record failed for another reason than a full buffer).
# TYPE flowzero_kafka_errors_total counter
flowzero_kafka_errors_total{op="create-topic"} 0
flowzero_kafka_errors_total{op="produce"} 0
# HELP flowzero_kafka_flows_dropped_total Flows dropped, by reason (buffer-full, delivery-failed).
# TYPE flowzero_kafka_flows_dropped_total counter
flowzero_kafka_flows_dropped_total{reason="buffer-full"} 0
flowzero_kafka_flows_dropped_total{reason="delivery-failed"} 0
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "flowzero_kafka_errors_total", "flowzero_kafka_flows_dropped_total"); err != nil {
		t.Error(err)
	}
}

// TestSinkUnreachableReported: with no broker, the sink says so: its health is degraded
// (the topic cannot be checked; after stallAfter, records wait unacknowledged; flows
// dropped once the buffer is full), and the drops are logged with their count, a bounded
// number of times.
func TestSinkUnreachableReported(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.MaxBufferedBytes = 1 << 20
	cfg.FlushTimeout = 200 * time.Millisecond
	logs := &lockedbuf.Buffer{}
	s, err := New(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(logs, nil)), cfg, "x")
	if err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewManualClock()
	s.SetClock(clk)
	if h := s.Health(); h.Status != health.OK {
		t.Fatalf("health before start %+v", h)
	}
	s.Start()
	pool := output.NewBatchPool(64<<10, 4)
	for range 64 {
		b := pool.Get()
		b.Data = b.Data[:32<<10]
		b.Flows = 100
		s.Send(b)
	}
	testutil.WaitUntil(t, "the health to report the topic and the drops", func() bool {
		h := s.Health()
		return h.Status == health.Degraded && strings.Contains(h.Reason, "cannot create or check the topic flows-x") &&
			strings.Contains(h.Reason, "flows dropped (buffer-full)")
	})
	clk.Advance(stallAfter + time.Second)
	testutil.WaitUntil(t, "the stall to be reported", func() bool {
		return strings.Contains(s.Health().Reason, "no record acknowledged for")
	})
	testutil.WaitUntil(t, "the drops to be logged", func() bool {
		return strings.Contains(logs.String(), `msg="Kafka sink dropped flows"`)
	})
	s.Stop()
	h := s.Health()
	if h.Counters["flows-sent"] != 6400 || h.Counters["flows-dropped"] != 6400 {
		t.Errorf("counters %v", h.Counters)
	}
	// Two lines at most: the first drops, and at Stop the flows failed by the flush timeout.
	if n := strings.Count(logs.String(), `msg="Kafka sink dropped flows"`); n < 1 || n > 2 {
		t.Errorf("%d drop lines:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "Kafka is not acknowledging records") {
		t.Errorf("no warning about the stall:\n%s", logs.String())
	}
	// The drops of every line add up to the total.
	total := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, `msg="Kafka sink dropped flows"`) {
			continue
		}
		for _, f := range strings.Fields(line) {
			var n int
			if _, err := fmt.Sscanf(f, "buffer-full=%d", &n); err == nil {
				total += n
			} else if _, err := fmt.Sscanf(f, "delivery-failed=%d", &n); err == nil {
				total += n
			}
		}
	}
	if total != 6400 {
		t.Errorf("logged drops add up to %d, want 6400:\n%s", total, logs.String())
	}
}
