//go:build integration

package outlet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/internal/kafkatest"
	"flowzero/internal/testutil"
)

// insertedUnit is a unit a recordingSink was given.
type insertedUnit struct {
	outlet           string
	partition        int32
	first, last      int64
	flows            int
	minTime, maxTime uint64 // of its flows' TimeReceived (dedupTable only)
}

// recordingSink is a UnitSink that keeps the range of every unit it is given, for all the
// outlets of a test.
type recordingSink struct {
	unitsOnly
	name  string
	topic string
	all   *unitLog
}

type unitLog struct {
	mu    sync.Mutex
	units []insertedUnit
}

func (s *recordingSink) InsertUnit(_ context.Context, token string, _ []byte, flows int) error {
	var u insertedUnit
	if _, err := fmt.Sscanf(strings.TrimPrefix(token, s.topic+"-"), "%d-%d-%d", &u.partition, &u.first, &u.last); err != nil {
		return fmt.Errorf("token %q: %w", token, err)
	}
	u.outlet, u.flows = s.name, flows
	s.all.mu.Lock()
	s.all.units = append(s.all.units, u)
	s.all.mu.Unlock()
	return nil
}

// TestRebalanceInsertsOnce: outlets join and leave the group while datagrams flow (the
// second and third join, then the first stops: three graceful rebalances, each revoking every
// partition of the eager protocol). Before it gives its partitions up, an outlet inserts and
// commits the units it holds (revoked), so that across all outlets no datagram offset of any
// partition is in two different units, and the units' flows add up to the flows sent. A unit
// may be inserted again when its commit did not land before the next owner read the offsets
// (seen in about one run of three on 3 brokers): it must then be the same range, hence the
// same deduplication token, which a shared ClickHouse stores once.
func TestRebalanceInsertsOnce(t *testing.T) {
	const partitions = 4
	topic, cfg := testTopic(t, "rebalance", partitions)
	cfg.CommitInterval = 200 * time.Millisecond
	s := identitySchema(t)
	dgs, perPass := netflowCapture(t, s)
	log := &unitLog{}
	newOutlet := func(name string) *Outlet {
		return startOutlet(t, topic, cfg, s, &recordingSink{name: name, topic: topic.Topic, all: log}, prometheus.NewRegistry())
	}
	insertedBy := func(name string) int {
		log.mu.Lock()
		defer log.mu.Unlock()
		n := 0
		for _, u := range log.units {
			if u.outlet == name {
				n++
			}
		}
		return n
	}

	// Datagrams flow, spread over the partitions, until the rebalances are over.
	producer := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic.Topic))
	var passes atomic.Int64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		at := testutil.Now()
		n := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			recs := netflowRecords(dgs, 1, partitions, &n, &at)
			if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			passes.Add(1)
			time.Sleep(10 * time.Millisecond) // a rate, not a synchronisation
		}
	}()

	a := newOutlet("a")
	testutil.WaitUntil(t, "the first outlet to insert units", func() bool { return insertedBy("a") >= 4 })
	b := newOutlet("b")
	testutil.WaitUntil(t, "the second outlet to insert units", func() bool { return insertedBy("b") >= 2 })
	c := newOutlet("c")
	testutil.WaitUntil(t, "the third outlet to insert units", func() bool { return insertedBy("c") >= 2 })
	aUnits := insertedBy("a")
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	after := insertedBy("b") + insertedBy("c")
	testutil.WaitUntil(t, "the outlets left to insert units", func() bool { return insertedBy("b")+insertedBy("c") >= after+4 })
	close(stop)
	<-stopped

	adm := kadm.NewClient(kafkatest.Client(t))
	ends := kafkatest.WaitCommitted(t, adm, topic.Topic, cfg.Group)
	for _, o := range []*Outlet{b, c} {
		if err := o.Stop(); err != nil {
			t.Fatal(err)
		}
	}

	log.mu.Lock()
	units := slices.Clone(log.units)
	log.mu.Unlock()
	slices.SortFunc(units, func(x, y insertedUnit) int {
		if x.partition != y.partition {
			return int(x.partition - y.partition)
		}
		return int(x.first - y.first)
	})
	// Each partition's units follow each other without overlap (a unit without flows, such
	// as one of template datagrams only, is not inserted: a gap is no loss by itself; the
	// count of flows below tells).
	// A unit inserted again must be cut the same (same range, so same deduplication token:
	// a shared ClickHouse stores it once); any other overlap is a range stored twice.
	type span struct {
		partition   int32
		first, last int64
	}
	seen := map[span]bool{}
	flows, again, next := 0, 0, map[int32]int64{}
	for _, u := range units {
		sp := span{u.partition, u.first, u.last}
		switch {
		case seen[sp]:
			again++
			continue
		case u.first < next[u.partition]:
			t.Errorf("partition %d: unit [%d, %d] of outlet %s overlaps the units inserted before, up to %d",
				u.partition, u.first, u.last, u.outlet, next[u.partition]-1)
		}
		seen[sp] = true
		next[u.partition] = max(next[u.partition], u.last+1)
		flows += u.flows
	}
	ends.Each(func(o kadm.ListedOffset) {
		// A last unit without flows (datagrams all held, then dropped) is not inserted.
		if next[o.Partition] > o.Offset {
			t.Errorf("partition %d: units up to %d, beyond its end %d", o.Partition, next[o.Partition], o.Offset)
		}
	})
	want := int(passes.Load()) * perPass
	t.Logf("%d flows sent in %d passes; %d units inserted (first outlet %d before it left), %d flows in them; %d units inserted again with the same range and token",
		want, passes.Load(), len(units), aUnits, flows, again)
	if flows != want {
		t.Errorf("the units hold %d flows, want the %d sent (each once)", flows, want)
	}
}
