//go:build integration

package outlet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/health"
	"flowzero/internal/kafkatest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// testTopic makes a datagrams topic of its own and the outlet configuration of a group
// consuming it (commits every 100 ms), removed with the test.
func testTopic(t *testing.T, prefix string, partitions int32) (datagram.TopicConfiguration, Configuration) {
	t.Helper()
	topic := datagram.DefaultTopicConfiguration()
	topic.Brokers = kafkatest.Brokers(t)
	topic.Topic = kafkatest.Topic(t, prefix, partitions)
	cfg := DefaultConfiguration()
	cfg.Group = topic.Topic + "-group"
	cfg.State.Topic = topic.Topic + "-state"
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.SessionTimeout = 6 * time.Second
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		adm := kadm.NewClient(kafkatest.Client(t))
		_, _ = adm.DeleteTopics(ctx, cfg.State.Topic)
		_, _ = adm.DeleteGroup(ctx, cfg.Group)
	})
	return topic, cfg
}

// identitySchema is the schema with the flows' identity columns, by which a unit's flows are
// counted.
func identitySchema(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.New(schema.Configuration{Enabled: []string{"DatagramPartition", "DatagramOffset", "DatagramIndex"}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startOutlet starts an outlet of the group cfg on topic with one sink; its metrics go to reg.
func startOutlet(t *testing.T, topic datagram.TopicConfiguration, cfg Configuration, s *schema.Schema, sink output.Sink, reg prometheus.Registerer) *Outlet {
	t.Helper()
	nf, err := netflow.New(nil, netflow.DefaultConfiguration(), s)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := sflow.New(nil, sflow.DefaultConfiguration(), s)
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(topic, cfg, Dependencies{Schema: s, NetFlow: nf, SFlow: sf, Sinks: []output.Sink{sink},
		Registry: reg, Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	return o
}

// netflowCapture returns the datagrams of a NetFlow capture (templates first) and the flows
// one pass of it decodes to.
func netflowCapture(t *testing.T, s *schema.Schema) ([]pcapfile.Datagram, int) {
	t.Helper()
	dgs, err := pcapfile.ReadUDP(testdata.Path(t, "netflow", "data+templates.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	nf, err := netflow.New(nil, netflow.DefaultConfiguration(), s)
	if err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	perPass := 0
	for _, dg := range dgs {
		if err := nf.Decode(netflow.Packet{Payload: dg.Payload, Exporter: dg.Src, TimeReceived: testutil.Now()}, fm, func(fm *schema.FlowMessage) {
			perPass++
			fm.Finalize()
		}); err != nil {
			t.Fatal(err)
		}
	}
	return dgs, perPass
}

// recordStep is less than a second, yet makes a unit's flows differ in TimeReceived (whole
// seconds), so that the replay's time bound is exercised.
const recordStep = 250 * time.Millisecond

// netflowRecords returns passes of the capture as datagram records, spread over the
// partitions in turn from the n-th; at is the reception time of the last one, advanced by
// recordStep per datagram.
func netflowRecords(dgs []pcapfile.Datagram, passes int, partitions int32, n *int, at *time.Time) []*kgo.Record {
	var recs []*kgo.Record
	for range passes {
		for _, dg := range dgs {
			*at = at.Add(recordStep)
			recs = append(recs, &kgo.Record{Partition: int32(*n) % partitions,
				Value: datagram.Append(nil, datagram.Datagram{Received: *at, Exporter: netip.AddrPortFrom(dg.Src.Addr(), dg.Src.Port()), Protocol: datagram.NetFlow, Payload: dg.Payload})})
			*n++
		}
	}
	return recs
}

// unitsOnly is the output.Sink side of the tests' unit sinks: named store, as the store
// output, and given units only.
type unitsOnly struct{}

func (unitsOnly) Name() string { return "store" }
func (unitsOnly) Send(b *output.Batch) bool {
	b.Release()
	return false
}
func (unitsOnly) Start() error { return nil }
func (unitsOnly) Stop() error  { return nil }

// insertFate is what happens to an insert of a dedupTable.
type insertFate int

const (
	completes    insertFate = iota
	killedBefore            // the process dies before the insert: nothing written
	killedInside            // between the token and the rows: the token is in the log
	killedAfter             // after the rows, before the outlet hears of it
	killedPartly            // after the token and half the rows (a unit of two blocks)
)

var errKilled = errors.New("the process was killed during the insert (test)")

// dedupTable is a unit sink that stores units as a table of the embedded engine that is not
// replicated does: a block's token goes to the table's deduplication log before its rows are
// committed, and a block whose token is in the log stores nothing. It counts the flows it
// holds of a range (a ReplaySink). Its inserts meet the fates of script in turn; after that,
// they complete, or fail when down (a process that is gone).
type dedupTable struct {
	unitsOnly
	topic string
	s     *schema.Schema

	mu     sync.Mutex
	script []insertFate
	down   bool
	log    map[string]bool
	blocks []insertedUnit // committed
	tokens []string       // of every insert, in order
	lost   int            // flows of the blocks killedPartly did not store
}

func (d *dedupTable) InsertUnit(_ context.Context, token string, data []byte, flows int) error {
	b := insertedUnit{flows: flows, minTime: math.MaxUint64}
	if _, err := fmt.Sscanf(strings.TrimPrefix(token, d.topic+"-"), "%d-%d-%d", &b.partition, &b.first, &b.last); err != nil {
		return fmt.Errorf("token %q: %w", token, err)
	}
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if err := d.s.DecodeMessage(data[k:k+int(n)], func(c *schema.Column, v any) {
			if c.Key == schema.ColumnTimeReceived {
				b.minTime, b.maxTime = min(b.minTime, v.(uint64)), max(b.maxTime, v.(uint64))
			}
		}); err != nil {
			return err
		}
		data = data[k+int(n):]
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tokens = append(d.tokens, token)
	fate := completes
	switch {
	case len(d.script) > 0:
		fate, d.script = d.script[0], d.script[1:]
	case d.down:
		return errKilled
	}
	if fate == killedBefore {
		return errKilled
	}
	stored := d.log[token]
	d.log[token] = true
	if fate == killedInside {
		return errKilled
	}
	if fate == killedPartly {
		half := b
		half.flows = flows / 2
		d.blocks = append(d.blocks, half)
		d.lost += flows - half.flows
		return errKilled
	}
	if !stored {
		d.blocks = append(d.blocks, b)
	}
	if fate == killedAfter {
		return errKilled
	}
	return nil
}

// UnitRows counts as the store's query does, and fails when the time bound leaves out flows
// of a block in the range: the outlet's bound must hold every flow of the unit.
func (d *dedupTable) UnitRows(_ context.Context, partition int32, first, end int64, minTime, maxTime uint64) (int, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, b := range d.blocks {
		if b.partition == partition && b.first >= first && b.last < end {
			if b.minTime < minTime || b.maxTime > maxTime {
				return 0, false, fmt.Errorf("the bound [%d, %d] leaves out flows of block [%d, %d] at [%d, %d]",
					minTime, maxTime, b.first, b.last, b.minTime, b.maxTime)
			}
			n += b.flows
		}
	}
	return n, true, nil
}

func (d *dedupTable) state() (tokens []string, blocks []insertedUnit, lost int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.tokens), slices.Clone(d.blocks), d.lost
}

// storedOnce checks that blocks hold flows flows, each datagram's once.
func storedOnce(t *testing.T, blocks []insertedUnit, flows int) {
	t.Helper()
	slices.SortFunc(blocks, func(x, y insertedUnit) int {
		if x.partition != y.partition {
			return int(x.partition - y.partition)
		}
		return int(x.first - y.first)
	})
	n, next := 0, map[int32]int64{}
	for _, b := range blocks {
		if b.first < next[b.partition] {
			t.Errorf("partition %d: [%d, %d] stored again, or overlapping what was stored up to %d",
				b.partition, b.first, b.last, next[b.partition]-1)
		}
		next[b.partition] = b.last + 1
		n += b.flows
	}
	if n != flows {
		t.Errorf("%d flows stored, want the %d sent", n, flows)
	}
}

// TestReplayedUnitToken: an insert killed at some point of a table's deduplication log
// (dedupTable), then the unit cut again at its recorded range and inserted by the same outlet
// (a rewind) or by the next one (a restart, the range and the token suffix read from the
// commit metadata). Every flow is stored once: a replayed unit none of whose flows are there
// gets a new token, recorded before its insert, and a unit whose flows are there is inserted
// with the token that stored them, which stores nothing (TestSplitKillOutletStore saw the
// original token used then: killed before its insert, then inserted with a new token and
// killed after, a unit was stored twice).
func TestReplayedUnitToken(t *testing.T) {
	for _, c := range []struct {
		name    string
		script  []insertFate
		restart bool
		// the tokens of the first unit's inserts: "" is the unit's own, a letter a suffix
		// (the same letter, the same suffix); the last one's for the inserts after them
		suffixes []string
		// the units replayed, by what the table held, for the outlet that stored the unit
		none, some, all float64
	}{
		{name: "killed before, then after", script: []insertFate{killedBefore, killedAfter},
			suffixes: []string{"", "a", "a"}, none: 1, all: 1},
		{name: "killed inside, twice", script: []insertFate{killedInside, killedInside},
			suffixes: []string{"", "a", "b"}, none: 2},
		{name: "killed after", script: []insertFate{killedAfter},
			suffixes: []string{"", ""}, all: 1},
		// The block stored kept the token, which stores nothing more: the rest is lost,
		// and shown.
		{name: "killed between two blocks", script: []insertFate{killedPartly},
			suffixes: []string{"", ""}, some: 1},
		{name: "killed before, then after, restart", script: []insertFate{killedBefore, killedAfter}, restart: true,
			suffixes: []string{"", "a", "a"}, all: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic, cfg := testTopic(t, "replay", 1)
			s := identitySchema(t)
			dgs, perPass := netflowCapture(t, s)
			producer := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic.Topic))
			n, at := 0, testutil.Now()
			const passes = 5
			if err := producer.ProduceSync(context.Background(), netflowRecords(dgs, passes, 1, &n, &at)...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			table := &dedupTable{topic: topic.Topic, s: s, script: c.script, down: c.restart, log: map[string]bool{}}
			reg := prometheus.NewRegistry()
			o := startOutlet(t, topic, cfg, s, table, reg)
			if c.restart {
				// The outlet stops for good after its script: its replays fail until it is
				// stopped, without a commit; the next outlet of the group replays the unit.
				testutil.WaitUntil(t, "the outlet's inserts to fail after its script", func() bool {
					tokens, _, _ := table.state()
					return len(tokens) > len(c.script)+1
				})
				if err := o.Stop(); err != nil {
					t.Fatal(err)
				}
				table.mu.Lock()
				table.down = false
				table.mu.Unlock()
				reg = prometheus.NewRegistry()
				o = startOutlet(t, topic, cfg, s, table, reg)
			}
			kafkatest.WaitCommitted(t, kadm.NewClient(kafkatest.Client(t)), topic.Topic, cfg.Group)
			if err := o.Stop(); err != nil {
				t.Fatal(err)
			}
			tokens, blocks, lost := table.state()
			t.Logf("tokens: %v", tokens)
			storedOnce(t, blocks, passes*perPass-lost)
			// A unit replayed with some of its flows stored is an error the outlet shows.
			if r := o.Health(); (c.some > 0) != (r.Status == health.Degraded && strings.Contains(r.Reason, "the others may be missing")) {
				t.Errorf("/healthz of the outlet: %s %q, want degraded: %v", r.Status, r.Reason, c.some > 0)
			}

			// The first unit's inserts, all of the same range: after the last new suffix, all
			// with it (in a restart, the first outlet's failing ones and the next one's).
			first, _, _ := strings.Cut(tokens[0], "/")
			var units []string
			for _, tok := range tokens {
				if base, _, _ := strings.Cut(tok, "/"); base == first {
					units = append(units, tok)
				}
			}
			if len(units) < len(c.suffixes) {
				t.Fatalf("the first unit's inserts %v, want at least %d", units, len(c.suffixes))
			}
			letters := map[string]string{}
			for i, tok := range units {
				want := c.suffixes[min(i, len(c.suffixes)-1)]
				_, got, _ := strings.Cut(tok, "/")
				switch {
				case want == "" && got != "":
					t.Errorf("insert %d of the first unit: token %s, want the unit's own", i+1, tok)
				case want == "":
				case !strings.HasPrefix(got, "again-"):
					t.Errorf("insert %d of the first unit: token %s, want a suffix again-", i+1, tok)
				case letters[want] == "":
					if slices.Contains(slices.Collect(maps.Values(letters)), got) {
						t.Errorf("insert %d of the first unit: token %s, want a new suffix", i+1, tok)
					}
					letters[want] = got
				case letters[want] != got:
					t.Errorf("insert %d of the first unit: token %s, want the suffix %s", i+1, tok, letters[want])
				}
			}
			// The metrics of the outlet that stored the unit.
			for held, want := range map[string]float64{"none": c.none, "some": c.some, "all": c.all} {
				if got := promtest.ToFloat64(o.m.replayed.WithLabelValues(held)); got != want {
					t.Errorf("units replayed holding %s: %v, want %v", held, got, want)
				}
			}
		})
	}
}
