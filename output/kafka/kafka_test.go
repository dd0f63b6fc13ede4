package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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
