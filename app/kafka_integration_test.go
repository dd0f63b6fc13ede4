//go:build integration

package app

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"flowzero/demo"
	"flowzero/internal/health"
	"flowzero/internal/kafkatest"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/testutil"
	"flowzero/output/jsonl"
	"flowzero/schema"
)

func kafkaConfig(t *testing.T, prefix string) Configuration {
	cfg := testConfig(t)
	cfg.Outputs.File.Enabled = false
	cfg.Outputs.Kafka.Enabled = true
	cfg.Outputs.Kafka.Brokers = kafkatest.Brokers(t)
	cfg.Outputs.Kafka.TopicPrefix = fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	cfg.Outputs.Kafka.Partitions = 4
	cfg.Outputs.Kafka.Linger = 5 * time.Millisecond
	return cfg
}

// protoDescriptor compiles the .proto generated for s, as a consumer would.
func protoDescriptor(t *testing.T, s *schema.Schema) protoreflect.MessageDescriptor {
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"flows.proto": s.ProtoDefinition()})}}
	files, err := c.Compile(context.Background(), "flows.proto")
	if err != nil {
		t.Fatal(err)
	}
	return files[0].Messages().ByName("FlowMessage")
}

// consume reads every record of topic and returns the flow messages they hold, each checked
// against the generated .proto (no unknown field) and re-encoded from it.
func consume(t *testing.T, brokers []string, topic string, s *schema.Schema, want int) [][]byte {
	md := protoDescriptor(t, s)
	var msgs [][]byte
	readFlows(t, brokers, topic, want, func(flow []byte) {
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(flow, m); err != nil {
			t.Fatalf("generated .proto cannot decode a flow: %v", err)
		}
		if len(m.GetUnknown()) > 0 {
			t.Fatalf("flow has fields unknown to the generated .proto: % x", m.GetUnknown())
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, b)
	})
	return msgs
}

// readFlows reads every record of topic and calls each with each length-prefixed flow message
// they hold, until want flows came and nothing more arrives for 2 s (to catch duplicates), or
// nothing arrives at all for 20 s. It returns how many flows came.
func readFlows(t *testing.T, brokers []string, topic string, want int, each func(flow []byte)) int {
	cl := kafkatest.Client(t, kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	// The idle rule ends the loop; the deadline only bounds a broker that trickles. Decoding
	// each flow with dynamicpb under -race takes a good part of a millisecond on a loaded
	// machine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	count := 0
	start := time.Now()
	defer func() { t.Logf("consumed %d flows in %s", count, time.Since(start).Round(time.Millisecond)) }()
	idle := time.Now()
	for ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		pcancel()
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			data := r.Value
			for len(data) > 0 {
				l, k := binary.Uvarint(data)
				if k <= 0 || uint64(len(data)-k) < l {
					t.Fatalf("record with a malformed length prefix")
				}
				each(data[k : k+int(l)])
				data = data[k+int(l):]
				n++
			}
		})
		count += n
		if n > 0 {
			idle = time.Now()
		}
		if (count >= want && time.Since(idle) > 2*time.Second) || time.Since(idle) > 20*time.Second {
			break
		}
	}
	return count
}

// TestEndToEndKafka: every capture, replayed over real UDP into the collector, reaches a real
// Kafka broker exactly once and decodes, with the generated .proto, to the flows
// `flowzero decode` gives offline.
func TestEndToEndKafka(t *testing.T) {
	cfg := kafkaConfig(t, "e2e")
	groups := captureGroups(t)
	want, total := expectedFlows(t, cfg, groups)
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	replayGroups(t, a, groups, total)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	sent, delivered, dropped := a.Kafka().Counts()
	if sent != int64(total) || delivered != sent || dropped != 0 {
		t.Fatalf("kafka sink: sent %d delivered %d dropped %d, want %d delivered", sent, delivered, dropped, total)
	}
	msgs := consume(t, cfg.Outputs.Kafka.Brokers, a.Kafka().Topic(), a.Schema(), total)
	f, _ := jsonl.New(a.Schema(), nil)
	var lines []byte
	for _, m := range msgs {
		if lines, err = f.Append(lines, m); err != nil {
			t.Fatal(err)
		}
	}
	diffFlows(t, normalize(t, lines), want)
}

// TestKafkaOutage stops the broker (a Kafka of the test's own) while demo traffic flows, long
// enough for the producer's buffer to overflow, then restarts it: every flow sent is either
// delivered exactly once or counted as dropped, and the counts add up.
func TestKafkaOutage(t *testing.T) {
	// It mostly waits, on a cluster of its own: it runs beside the other outage tests.
	t.Parallel()
	cluster := kafkatest.StartCluster(t, 1)
	cfg := kafkaConfig(t, "outage")
	cfg.Outputs.Kafka.Brokers = cluster.Brokers
	cfg.Outputs.Kafka.MaxBufferedBytes = 1 << 20 // the least allowed, so the outage overflows it soon
	cfg.Outputs.Kafka.FlushTimeout = 60 * time.Second
	cfg.Collector.Listeners = cfg.Collector.Listeners[:1]
	logs := &lockedbuf.Buffer{}
	a, err := New(cfg, Dependencies{Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	// The error and drop series exist before any error, at 0.
	m := metricsText(t, a)
	for _, series := range []string{`flowzero_kafka_errors_total{op="produce"} 0`, `flowzero_kafka_flows_dropped_total{reason="buffer-full"} 0`} {
		if !strings.Contains(m, series) {
			t.Errorf("/metrics lacks %s at start", series)
		}
	}
	dcfg := demo.DefaultConfiguration()
	dcfg.NetFlow = a.Collector().ListenAddrs()[0]
	dcfg.IPFIX, dcfg.SFlow = dcfg.NetFlow, netip.AddrPort{}
	dcfg.FlowsPerSecond = 1000
	dcfg.Clock = testutil.Clock()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		st  demo.Stats
		err error
	}
	done := make(chan result, 1)
	go func() { st, err := demo.Run(ctx, dcfg); done <- result{st, err} }()

	deliveredNow := func() int64 { _, d, _ := a.Kafka().Counts(); return d }
	droppedNow := func() int64 { _, _, d := a.Kafka().Counts(); return d }
	testutil.WaitUntil(t, "flows delivered before the outage", func() bool { return deliveredNow() > 0 })
	if code, o := getHealthz(t, a); code != http.StatusOK || o.Components["kafka"].Status != health.OK {
		t.Errorf("/healthz before the outage: %d %+v", code, o)
	}
	cluster.Stop(t)
	t.Log("broker stopped")
	testutil.WaitUntil(t, "the producer's buffer to overflow during the outage", func() bool { return droppedNow() > 0 })
	// The outage is visible: /healthz says 503 and why, the log says how many flows were
	// dropped, and records left unacknowledged are reported.
	testutil.WaitUntil(t, "/healthz to report the outage", func() bool {
		code, o := getHealthz(t, a)
		k := o.Components["kafka"]
		return code == http.StatusServiceUnavailable && strings.Contains(k.Reason, "flows dropped (buffer-full)") &&
			strings.Contains(k.Reason, "no record acknowledged") && k.Counters["flows-dropped"] > 0
	})
	testutil.WaitUntil(t, "the drops to be logged", func() bool {
		return strings.Contains(logs.String(), `msg="Kafka sink dropped flows"`) &&
			strings.Contains(logs.String(), `msg="Kafka is not acknowledging records; flows are buffered, then dropped once max-buffered-bytes is full"`)
	})
	if m := metricsText(t, a); strings.Contains(m, `flowzero_kafka_flows_dropped_total{reason="buffer-full"} 0`+"\n") {
		t.Error("/metrics does not count the drops")
	}
	before := deliveredNow()
	cluster.Start(t)
	t.Log("broker restarted")
	testutil.WaitUntil(t, "deliveries to resume after the restart", func() bool { return deliveredNow() > before })
	testutil.WaitUntil(t, "/healthz to be ok again once nothing is dropped for health.Hold", func() bool {
		code, _ := getHealthz(t, a)
		return code == http.StatusOK
	})
	cancel()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	// The last datagrams reach the collector (a kernel drop on loopback fails below).
	testutil.Poll(testutil.WaitTimeout, func() bool { return collected(a).Flows >= uint64(res.st.Flows) })
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	emitted := uint64(0)
	for _, e := range a.Collector().Exporters() {
		emitted += e.Flows
	}
	sent, delivered, dropped := a.Kafka().Counts()
	t.Logf("demo sent %d flows; collector emitted %d; Kafka delivered %d, dropped %d", res.st.Flows, emitted, delivered, dropped)
	if uint64(res.st.Flows) != emitted {
		t.Fatalf("demo sent %d flows but the collector emitted %d (kernel drops on loopback?)", res.st.Flows, emitted)
	}
	if sent != int64(emitted) || delivered+dropped != sent {
		t.Fatalf("counts do not add up: emitted %d, sink sent %d = delivered %d + dropped %d?", emitted, sent, delivered, dropped)
	}
	if dropped == 0 || delivered == 0 {
		t.Fatalf("the outage should overflow the 1 MiB buffer and delivery should resume: delivered %d dropped %d", delivered, dropped)
	}
	// The records are counted, not decoded: TestEndToEndKafka checks what they hold.
	if n := readFlows(t, cfg.Outputs.Kafka.Brokers, a.Kafka().Topic(), int(delivered), func([]byte) {}); int64(n) != delivered {
		t.Fatalf("consumed %d flows, Kafka acknowledged %d: lost or duplicated", n, delivered)
	}
}

// TestKafkaRestartTopicExists: a collector restarted on the topic it created (or another
// collector created) uses it without a warning or an error counted, and delivers (issue
// 24: "cannot create or check the Kafka topic ... TOPIC_ALREADY_EXISTS" on every restart).
func TestKafkaRestartTopicExists(t *testing.T) {
	cfg := kafkaConfig(t, "restart")
	cfg.Collector.Listeners = cfg.Collector.Listeners[:1]
	for run := range 2 {
		logs := &lockedbuf.Buffer{}
		a, err := New(cfg, Dependencies{Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: testutil.Clock()})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		dcfg := demo.DefaultConfiguration()
		dcfg.NetFlow = a.Collector().ListenAddrs()[0]
		dcfg.IPFIX, dcfg.SFlow = dcfg.NetFlow, netip.AddrPort{}
		dcfg.FlowsPerSecond = 200
		dcfg.Clock = testutil.Clock()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); demo.Run(ctx, dcfg) }()
		testutil.WaitUntil(t, "flows delivered", func() bool { _, d, _ := a.Kafka().Counts(); return d > 0 })
		cancel()
		<-done
		if code, o := getHealthz(t, a); code != http.StatusOK {
			t.Errorf("run %d: /healthz %d %+v", run, code, o)
		}
		m := metricsText(t, a)
		if err := a.Stop(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "TOPIC_ALREADY_EXISTS") {
			t.Errorf("run %d warns:\n%s", run, logs.String())
		}
		if !strings.Contains(m, `flowzero_kafka_errors_total{op="create-topic"} 0`) {
			t.Errorf("run %d counted create-topic errors", run)
		}
		if created := strings.Contains(logs.String(), `msg="Kafka topic created"`); created != (run == 0) {
			t.Errorf("run %d: topic created %v", run, created)
		}
	}
}
