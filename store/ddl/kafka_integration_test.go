//go:build integration && chdb

package ddl

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/internal/kafkatest"
	"flowzero/internal/testutil"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
)

// TestKafkaToEmbeddedEngine runs the Kafka path for real: the flows decoded from the shared
// captures (every column enabled) are produced to flows-<hash> on the broker scripts/kafka.sh
// starts, consumed by the engine's Kafka table and moved by its materialized view into the
// flows table, each exactly once and with every value intact; malformed records among them
// land in flows_kafka_errors without stopping the flows after them.
func TestKafkaToEmbeddedEngine(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	s := storetest.AllColumnsSchema(t)
	msgs := storetest.CaptureMessages(t, s)
	var rnd [4]byte
	rand.Read(rnd[:])
	cfg := testConfig()
	cfg.Kafka.Enabled = true
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.TopicPrefix = "flows-it" + hex.EncodeToString(rnd[:])
	cfg.Kafka.GroupName = "it-" + hex.EncodeToString(rnd[:])
	cfg.Kafka.MaxBlockSize = 50 // several blocks, so several inserts through the view
	// Flows kept forever (testConfig): a malformed record reaching the flows table would be
	// a row of default values, from 1970, which a TTL would remove at once.
	protoDir := t.TempDir()
	if _, err := WriteProto(protoDir, s); err != nil {
		t.Fatal(err)
	}
	ddl := New(cfg, s, protoDir, nil) // flows_1m grouped by its view: the Kafka path

	// The topic exists before the engine subscribes, as the collector creates it.
	topic := ddl.Topic()
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, resp.Err)
	}

	c := storetest.OpenEngine(t, t.TempDir())
	m := &Migrator{DDL: ddl, Exec: engine.Embedded{Conn: c}, Logger: storetest.QuietLogger()}
	defer func() {
		// chDB cannot reopen a data directory holding a Kafka table.
		if err := m.DropKafka(context.Background()); err != nil {
			t.Error(err)
		}
		c.Close()
	}()
	if _, err := m.Migrate(ctx, false); err != nil {
		t.Fatal(err)
	}

	// Records of up to 10 length-delimited messages, as the collector batches them, with a
	// malformed record first, one in the middle and one last.
	malformed := []*kgo.Record{
		{Value: []byte{0x05, 0xff, 0xff, 0xff}}, // a message of 5 bytes cut after 3
		{Value: []byte{0x02, 0x0f, 0x00}},       // field 1 with wire type 7, which does not exist
		{Value: []byte("\x10not a flow at all")},
	}
	recs := []*kgo.Record{malformed[0]}
	const perRecord = 10
	for i := 0; i < len(msgs); i += perRecord {
		var value []byte
		for _, msg := range msgs[i:min(i+perRecord, len(msgs))] {
			value = append(value, msg...)
		}
		recs = append(recs, &kgo.Record{Value: value})
		if i/perRecord == len(msgs)/perRecord/2 {
			recs = append(recs, malformed[1])
		}
	}
	recs = append(recs, malformed[2])
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	count := func() string {
		return storetest.Query(t, c, "SELECT (SELECT count() FROM flowzero.flows), (SELECT count() FROM flowzero.flows_kafka_errors)")
	}
	want := fmt.Sprintf("%d\t%d", len(msgs), len(malformed))
	testutil.WaitUntil(t, "flows, errors from Kafka = "+want, func() bool { return count() == want })
	// The engine commits a block's offsets once the views have written it: once the
	// group's offsets reach the end of every partition, nothing is left to arrive, twice
	// or otherwise.
	adm := kadm.NewClient(cl)
	testutil.WaitUntil(t, "the engine's offsets committed to the end of "+topic, func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsets(ctx, cfg.Kafka.GroupName)
		if err != nil {
			return false // the group may not be known yet
		}
		done := true
		ends.Each(func(e kadm.ListedOffset) {
			c, ok := committed.Lookup(e.Topic, e.Partition)
			// A partition that received nothing has no commit.
			done = done && (ok && c.Err == nil && c.At == e.Offset || !ok && e.Offset == 0)
		})
		return done
	})
	if got := count(); got != want {
		t.Fatalf("with every offset committed: flows, errors = %q, want %q", got, want)
	}
	storetest.CheckStoredFlows(t, c, s, msgs)
	// The flows reach the aggregated tables through the flows table's views.
	checkAggregates(t, c, ddl)

	// Each rejected record is kept whole (they are short), with where it was and why.
	rows := storetest.Query(t, c, "SELECT Topic, Partition, Offset, hex(RawMessage), RawLength, notEmpty(Error) FROM flowzero.flows_kafka_errors ORDER BY Partition, Offset")
	slices.SortFunc(malformed, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	var wantRows []string
	for _, r := range malformed {
		wantRows = append(wantRows, fmt.Sprintf("%s\t%d\t%d\t%X\t%d\t1", r.Topic, r.Partition, r.Offset, r.Value, len(r.Value)))
	}
	if want := strings.Join(wantRows, "\n"); rows != want {
		t.Errorf("flows_kafka_errors:\n%s\nwant:\n%s\nerrors: %s", rows, want,
			storetest.Query(t, c, "SELECT groupArray(Error) FROM flowzero.flows_kafka_errors"))
	}
}
