//go:build integration && chdb

package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/internal/kafkatest"
	"flowzero/schema"
)

// TestKafkaToEmbeddedEngine runs the Kafka path for real: flows produced to flows-<hash> on
// the broker scripts/kafka.sh starts are consumed by the engine's Kafka table and moved by
// its materialized view into the flows table, each exactly once; a malformed record in the
// middle is skipped without stopping the flows after it.
func TestKafkaToEmbeddedEngine(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	var rnd [4]byte
	rand.Read(rnd[:])
	cfg := testConfig(t, t.TempDir())
	cfg.Kafka.Enabled = true
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.TopicPrefix = "flows-it" + hex.EncodeToString(rnd[:])
	cfg.Kafka.GroupName = "it-" + hex.EncodeToString(rnd[:])
	cfg.Kafka.MaxBlockSize = 100
	s := mustSchema(t, schema.DefaultConfiguration())
	ddl := NewDDL(cfg, s, "")

	// The topic exists before the engine subscribes, as the collector creates it.
	topic := ddl.Topic()
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: nil}).FirstErr(); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}

	protoDir := t.TempDir()
	if _, err := WriteProto(protoDir, s); err != nil {
		t.Fatal(err)
	}
	ddl = NewDDL(cfg, s, protoDir)
	c := openEngine(t, cfg)
	m := &Migrator{DDL: ddl, Exec: Embedded{Conn: c}, Logger: quietLogger()}
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

	// 400 flows in 40 records of 10 length-delimited messages each, plus one malformed
	// record after the first half.
	fm := s.NewFlowMessage()
	const records, perRecord = 40, 10
	var recs []*kgo.Record
	for r := 0; r < records; r++ {
		var value []byte
		for i := 0; i < perRecord; i++ {
			f := testFlows[(r*perRecord+i)%len(testFlows)]
			f.srcPort = uint64(r*perRecord + i)
			value = append(value, f.encode(fm)...)
		}
		recs = append(recs, &kgo.Record{Value: value})
		if r == records/2 {
			recs = append(recs, &kgo.Record{Value: []byte{0x05, 0xff, 0xff, 0xff}})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	want := fmt.Sprintf("%d\t%d", records*perRecord, records*perRecord)
	var got string
	for {
		got = query(t, c, "SELECT count(), uniqExact(SrcPort) FROM flowzero.flows")
		if got == want {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("flows from Kafka: count, distinct = %q, want %q", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Nothing arrives twice, even after the consumer had time to poll again.
	time.Sleep(2 * time.Second)
	if got = query(t, c, "SELECT count(), uniqExact(SrcPort) FROM flowzero.flows"); got != want {
		t.Fatalf("after settling: %q, want %q", got, want)
	}
	// Exact values survive the trip: per exporter sums.
	sums := query(t, c, "SELECT ExporterAddress, count(), sum(Bytes), sum(Packets), groupUniqArray(ExporterName) FROM flowzero.flows GROUP BY 1 ORDER BY 1")
	wantSums := "::ffff:192.0.2.1\t300\t6580000\t5400\t['edge1']\n2001:db8::1\t100\t900000\t600\t['edge2']"
	if sums != wantSums {
		t.Errorf("per exporter:\n%s\nwant:\n%s", sums, wantSums)
	}
	// And reach the aggregated tables through the flows table's views.
	if agg := query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1h"); agg != "7480000" {
		t.Errorf("flows_1h bytes = %s", agg)
	}
	if strings.Contains(got, "\n") {
		t.Fatal(got)
	}
}
