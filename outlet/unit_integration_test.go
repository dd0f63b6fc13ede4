//go:build integration && chdb

package outlet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/internal/kafkatest"
	"flowzero/internal/testutil"
	"flowzero/store"
)

// crashingStore passes units to the store and records their tokens. From the crashAt-th
// unit on it behaves like a process that died: that unit is stored but the outlet gets an
// error instead of the acknowledgement (it does not commit), and later units are not stored.
type crashingStore struct {
	unitsOnly
	store   *store.Sink
	crashAt int

	mu      sync.Mutex
	tokens  []string
	crashed string
}

var errCrashed = errors.New("the outlet crashed (test)")

func (c *crashingStore) InsertUnit(ctx context.Context, token string, data []byte, flows int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed != "" {
		return errCrashed
	}
	if err := c.store.InsertUnit(ctx, token, data, flows); err != nil {
		return err
	}
	c.tokens = append(c.tokens, token)
	if len(c.tokens) == c.crashAt {
		c.crashed = token
		return errCrashed
	}
	return nil
}

func (c *crashingStore) state() (tokens []string, crashed string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tokens), c.crashed
}

// TestUnitsStoredOnce: an outlet stores a unit into the embedded engine and "crashes" before
// committing its offsets; another outlet of the group consumes the partitions again from the
// committed offsets, cuts its first units where the commit metadata says (the same tokens)
// and stores them again: the engine keeps one row per flow identity (DatagramPartition,
// DatagramOffset, DatagramIndex), and the aggregated tables hold exactly the flows' sums.
func TestUnitsStoredOnce(t *testing.T) {
	topic, cfg := testTopic(t, "units", 2)
	s := identitySchema(t)

	scfg := store.DefaultConfiguration()
	scfg.Embedded.Path = filepath.Join(t.TempDir(), "chdb")
	scfg.Embedded.MaxThreads = 2
	scfg.Deduplicate = true
	scfg.TTL = 0 // the captures' flows are dated by the test clock
	for i := range scfg.Resolutions {
		scfg.Resolutions[i].TTL = 0
	}
	st, err := store.NewSink(prometheus.NewRegistry(), scfg, store.Dependencies{Schema: s, Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	if _, ok := st.DDL().PreAggregated(); !ok {
		t.Fatal("the store does not pre-aggregate: the test covers the sink's own aggregated inserts")
	}

	dgs, perPass := netflowCapture(t, s)
	newOutlet := func(sink *crashingStore) *Outlet {
		return startOutlet(t, topic, cfg, s, sink, prometheus.NewRegistry())
	}
	producer := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic.Topic))
	at := testutil.Now()
	n := 0
	produce := func(passes int) {
		if err := producer.ProduceSync(context.Background(), netflowRecords(dgs, passes, 2, &n, &at)...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The first outlet stores two units, then crashes on the third, which it stored.
	first := &crashingStore{store: st, crashAt: 3}
	a := newOutlet(first)
	produce(20)
	testutil.WaitUntil(t, "the first outlet to store two units", func() bool {
		tokens, _ := first.state()
		return len(tokens) >= 2
	})
	produce(20)
	testutil.WaitUntil(t, "the first outlet to crash", func() bool {
		_, crashed := first.state()
		return crashed != ""
	})
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	tokensA, crashed := first.state()
	// More datagrams before the next outlet starts: without the recorded range it would cut
	// its first unit of the crashed partition further, with another token.
	produce(10)

	// The second consumes the partitions again and finishes.
	second := &crashingStore{store: st, crashAt: -1}
	b := newOutlet(second)
	adm := kadm.NewClient(kafkatest.Client(t))
	kafkatest.WaitCommitted(t, adm, topic.Topic, cfg.Group)
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	tokensB, _ := second.state()
	t.Logf("first outlet's units %v (crashed after storing %s); second outlet's %v", tokensA, crashed, tokensB)
	if !slices.Contains(tokensB, crashed) {
		t.Errorf("the second outlet did not cut the crashed unit %s again", crashed)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}

	q := func(sql string) string {
		t.Helper()
		out, err := st.Conn().Query(sql, "TSV")
		if err != nil {
			t.Fatal(err)
		}
		return string(out[:len(out)-1])
	}
	want := 50 * perPass
	ids := "DatagramPartition, DatagramOffset, DatagramIndex"
	if got := q("SELECT count(), uniqExact(" + ids + ") FROM flowzero.flows"); got != fmt.Sprintf("%d\t%d", want, want) {
		t.Errorf("flows: rows and distinct identities %q, want %d of each", got, want)
	}
	if got := q("SELECT count() FROM (SELECT " + ids + " FROM flowzero.flows GROUP BY " + ids + " HAVING count() > 1)"); got != "0" {
		t.Errorf("%s flows stored more than once", got)
	}
	flows := q("SELECT sum(Bytes), sum(Packets) FROM flowzero.flows")
	for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
		if got := q("SELECT sum(Bytes), sum(Packets) FROM flowzero." + table); got != flows {
			t.Errorf("%s: sums %q, want the flows' %q", table, got, flows)
		}
	}
	t.Logf("%d flows sent; sum(Bytes), sum(Packets) of the flows table: %s", want, flows)
}
