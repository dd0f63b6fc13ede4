package state

import (
	"bytes"
	"context"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/decoder/netflow"
	"flowzero/internal/kafkaconn"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

func TestCodecRoundTrip(t *testing.T) {
	for _, r := range []netflow.StateRecord{
		{Kind: netflow.StateTemplate, Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Version: 10, Domain: 7, ID: 300,
			Received: testutil.Now(), Record: []byte{1, 44, 0, 1, 0, 8, 0, 4}},
		{Kind: netflow.StateOptionsTemplate, Exporter: netip.MustParseAddrPort("[2001:db8::1]:9"), Version: 9, Domain: 1, ID: 257,
			Received: testutil.Now(), Withdrawn: true},
		{Kind: netflow.StateSamplingRate, Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Version: 9, ID: 3, Received: testutil.Now(), Value: 1000},
		{Kind: netflow.StateSystemInit, Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Version: 10, Domain: 2, Received: testutil.Now(), Value: 1700000000000},
	} {
		got, err := Parse(AppendKey(nil, r), AppendValue(nil, r))
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != r.Kind || got.Exporter != r.Exporter || got.Version != r.Version || got.Domain != r.Domain || got.ID != r.ID ||
			!got.Received.Equal(r.Received) || got.Withdrawn != r.Withdrawn || !bytes.Equal(got.Record, r.Record) || got.Value != r.Value {
			t.Errorf("got %+v, want %+v", got, r)
		}
	}
	r := netflow.StateRecord{Kind: netflow.StateTemplate, Exporter: netip.MustParseAddrPort("192.0.2.1:1"), Version: 9, ID: 256, Received: testutil.Now()}
	key, value := AppendKey(nil, r), AppendValue(nil, r)
	for _, tc := range []struct {
		name       string
		key, value []byte
	}{
		{"short key", key[:33], value},
		{"key version", append([]byte{2}, key[1:]...), value},
		{"kind", append([]byte{1, 9}, key[2:]...), value},
		{"short value", key, value[:17]},
		{"value version", key, append([]byte{0}, value[1:]...)},
		{"flags", key, append([]byte{1, 2}, value[2:]...)},
		{"withdrawal with record", key, append(append([]byte{1, 1}, value[2:]...), 1)},
	} {
		if _, err := Parse(tc.key, tc.value); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// FuzzParse: no record of the topic makes Parse or ApplyState panic.
func FuzzParse(f *testing.F) {
	r := netflow.StateRecord{Kind: netflow.StateTemplate, Exporter: netip.MustParseAddrPort("192.0.2.1:1"), Version: 10, ID: 300,
		Record: []byte{1, 44, 0, 2, 0, 8, 0, 4, 0, 12, 0, 4}}
	f.Add(AppendKey(nil, r), AppendValue(nil, r))
	r.Kind, r.Value, r.Record = netflow.StateSamplingRate, 100, nil
	f.Add(AppendKey(nil, r), AppendValue(nil, r))
	s, _ := schema.New(schema.DefaultConfiguration())
	d, _ := netflow.New(nil, netflow.DefaultConfiguration(), s)
	fm := s.NewFlowMessage()
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := Parse(key, value)
		if err != nil {
			return
		}
		_ = d.ApplyState(r, fm, func(*schema.FlowMessage, uint64) {})
	})
}

// outlet is one decoder wired to the state topic as an outlet wires it.
type outlet struct {
	mu    sync.Mutex
	d     *netflow.Decoder
	topic *Topic
	flows []string
}

type publisher struct{ t *Topic }

func (p publisher) StateLearned(r netflow.StateRecord) { p.t.Publish(r) }
func (publisher) PendingHeld(uint64)                   {}
func (publisher) PendingReleased(uint64, bool)         {}

func newOutlet(t *testing.T, s *schema.Schema, brokers []string, topic string) *outlet {
	d, err := netflow.New(nil, netflow.DefaultConfiguration(), s)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := New(prometheus.NewRegistry(), nil, kafkaconn.Configuration{Brokers: brokers}, Configuration{Topic: topic, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	d.SetObserver(publisher{tp})
	o := &outlet{d: d, topic: tp}
	fm := s.NewFlowMessage()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	if err := tp.Start(ctx, func(r netflow.StateRecord) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		return d.ApplyState(r, fm, func(fm *schema.FlowMessage, _ uint64) { o.flows = append(o.flows, string(fm.Finalize())) })
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Stop() })
	return o
}

func (o *outlet) decode(t *testing.T, s *schema.Schema, name string) {
	dgs, err := pcapfile.ReadUDP(testdata.Path(t, "netflow", name+".pcap"))
	if err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	for _, dg := range dgs {
		o.mu.Lock()
		_ = o.d.Decode(netflow.Packet{Payload: dg.Payload, Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), TimeReceived: dg.Time},
			fm, func(fm *schema.FlowMessage) { o.flows = append(o.flows, string(fm.Finalize())) })
		o.mu.Unlock()
	}
}

func (o *outlet) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.flows)
}

// TestSharedState (franz-go's in-process broker): outlet A decodes the templates and options
// of the classic NetFlow v9 capture; outlet B, which had received the data datagram first,
// decodes it once A's state arrives, into the flows a single decoder gives; outlet C, started
// afterwards, reads the topic before its first datagram and decodes the data at once.
func TestSharedState(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	s, _ := schema.New(schema.DefaultConfiguration())
	brokers := cluster.ListenAddrs()

	single := &outlet{}
	single.d, _ = netflow.New(nil, netflow.DefaultConfiguration(), s)
	for _, n := range []string{"options-template", "options-data", "template", "data"} {
		single.decode(t, s, n)
	}

	a := newOutlet(t, s, brokers, "state")
	b := newOutlet(t, s, brokers, "state")
	b.decode(t, s, "data")
	if b.count() != 0 {
		t.Fatalf("outlet B decoded %d flows without the templates", b.count())
	}
	for _, n := range []string{"options-template", "options-data", "template"} {
		a.decode(t, s, n)
	}
	testutil.WaitUntil(t, "outlet B to decode its pending data with A's templates", func() bool { return b.count() == 4 })
	c := newOutlet(t, s, brokers, "state")
	c.decode(t, s, "data")
	if c.count() != 4 {
		t.Fatalf("outlet C decoded %d flows after loading the state, want 4", c.count())
	}
	for name, o := range map[string]*outlet{"B": b, "C": c} {
		got, want := append([]string(nil), o.flows...), append([]string(nil), single.flows...)
		sort.Strings(got)
		sort.Strings(want)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("outlet %s flow %d differs from the single decoder's", name, i)
			}
		}
	}
}

// produceState writes n sampling-rate records to the topic with client cl.
func produceState(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		r := netflow.StateRecord{Kind: netflow.StateSamplingRate, Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Version: 9,
			ID: uint64(i), Received: testutil.Now(), Value: 1000}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: AppendKey(nil, r), Value: AppendValue(nil, r)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// stateCluster starts an in-process broker holding the topic "state" and a client of it
// with opts; both stop with the test.
func stateCluster(t *testing.T, opts ...kgo.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cluster, cl
}

// startCounting starts a Topic on topic and returns it with the number of records Start
// applied; Start must return within the test's wait.
func startCounting(t *testing.T, brokers []string, topic string) (*Topic, int) {
	t.Helper()
	tp, err := New(prometheus.NewRegistry(), nil, kafkaconn.Configuration{Brokers: brokers}, Configuration{Topic: topic, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Stop() })
	var mu sync.Mutex
	applied := 0
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	if err := tp.Start(ctx, func(netflow.StateRecord) error { mu.Lock(); applied++; mu.Unlock(); return nil }); err != nil {
		t.Fatalf("Start: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return tp, applied
}

// A state topic written by a transactional producer ends with a commit marker, which no
// record reaches: Start still returns once it read the topic's records.
func TestStartTransactionMarkerAtEnd(t *testing.T) {
	cluster, cl := stateCluster(t, kgo.TransactionalID("another-writer"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceState(t, cl, "state", 3)
	if err := cl.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	tp, applied := startCounting(t, cluster.ListenAddrs(), "state")
	if applied != 3 {
		t.Errorf("Start applied %d records, want 3", applied)
	}
	if n := promtest.ToFloat64(tp.m.loadTimeouts); n != 0 {
		t.Errorf("%v load timeouts: the marker should end the load", n)
	}
}

// A state topic whose records were all deleted (its start offset at its end) has nothing to
// wait for.
func TestStartRecordsDeleted(t *testing.T) {
	cluster, cl := stateCluster(t)
	produceState(t, cl, "state", 4)
	adm := kadm.NewClient(cl)
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "state", Partition: 0, At: 4})
	if resp, err := adm.DeleteRecords(context.Background(), offsets); err != nil || resp.Error() != nil {
		t.Fatalf("deleting the records: %v %v", err, resp.Error())
	}
	tp, applied := startCounting(t, cluster.ListenAddrs(), "state")
	if applied != 0 || promtest.ToFloat64(tp.m.loadTimeouts) != 0 {
		t.Errorf("Start applied %d records with %v load timeouts, want 0 and 0", applied, promtest.ToFloat64(tp.m.loadTimeouts))
	}
}

// An end offset that no record reaches (a tail removed by compaction) stops the load after
// loadIdle without records, counted; the records read are applied.
func TestLoadGivesUpWhenNothingComes(t *testing.T) {
	cluster, cl := stateCluster(t)
	produceState(t, cl, "state", 2)
	tp, err := New(prometheus.NewRegistry(), nil, kafkaconn.Configuration{Brokers: cluster.ListenAddrs()}, Configuration{Topic: "state", ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Stop()
	// The first fetch (connection, metadata, offsets) may take longer than a short wait on a
	// loaded machine: the wait is made short once the records came, from apply, which load
	// calls.
	tp.loadIdle = testutil.WaitTimeout
	applied := 0
	ctx, cancel := context.WithTimeout(context.Background(), 2*testutil.WaitTimeout)
	defer cancel()
	loaded, err := tp.load(ctx, map[int32]int64{0: 10}, func(netflow.StateRecord) error {
		if applied++; applied == 2 {
			tp.loadIdle = 300 * time.Millisecond
		}
		return nil
	})
	if err != nil || loaded != 2 || promtest.ToFloat64(tp.m.loadTimeouts) != 1 {
		t.Errorf("load: %d records, error %v, %v load timeouts; want 2, none, 1", loaded, err, promtest.ToFloat64(tp.m.loadTimeouts))
	}
}
