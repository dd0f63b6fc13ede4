//go:build integration

package kafkatest

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/internal/testutil"
)

// TestBrokerRoundTrip proves the broker that scripts/kafka.sh starts really serves: a topic is
// created, records are produced with zstd and consumed back in order, and the metadata says
// the topic has the partitions asked for.
func TestBrokerRoundTrip(t *testing.T) {
	topic := Topic(t, "kafkatest", 3)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()

	adm := kadm.NewClient(Client(t))
	md, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	if got := len(md[topic].Partitions); got != 3 {
		t.Fatalf("topic %s has %d partitions, want 3", topic, got)
	}

	const n = 1000
	prod := Client(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.DefaultProduceTopic(topic))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		// One key per partition-stable group so order within a key can be checked.
		recs[i] = &kgo.Record{Key: []byte{byte(i % 3)}, Value: fmt.Appendf(nil, "flow-%04d", i)}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	cons := Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := make(map[string]int, n)
	last := map[byte]int{0: -1, 1: -1, 2: -1}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			var i int
			if _, err := fmt.Sscanf(string(r.Value), "flow-%04d", &i); err != nil {
				t.Fatalf("bad record %q", r.Value)
			}
			if k := r.Key[0]; i <= last[k] {
				t.Fatalf("record %d after %d for key %d: order lost", i, last[k], k)
			} else {
				last[k] = i
			}
			seen[string(r.Value)]++
		})
	}
	for v, c := range seen {
		if c != 1 {
			t.Fatalf("record %s consumed %d times", v, c)
		}
	}
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	var total int64
	offs.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != n {
		t.Fatalf("end offsets sum to %d, want %d", total, n)
	}
}
