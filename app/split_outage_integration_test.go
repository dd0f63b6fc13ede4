//go:build integration

package app

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"flowzero/internal/kafkatest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
)

// TestSplitBrokerStopped: a cluster of three brokers of the test's own, every topic with
// replication factor 3 and min.insync.replicas 2 (datagrams, decoder state, consumer
// offsets); the broker leading the most datagram partitions stops for 30 s while an inlet
// receives datagrams and three outlets consume, then comes back. The two others keep the
// topics writable: the inlet drops nothing (sent = delivered + dropped, dropped = 0), and
// every flow of the delivered datagrams is stored, none twice.
func TestSplitBrokerStopped(t *testing.T) { splitOutage(t, 3) }

// TestSplitBrokerOutage: the whole Kafka (a single broker of the test's own) stops for 30 s while an inlet receives datagrams and
// three outlets consume; it comes back. The inlet buffers meanwhile (sent = delivered +
// dropped, nothing dropped within max-buffered-bytes), and every flow of the delivered
// datagrams is stored, at least once.
func TestSplitBrokerOutage(t *testing.T) { splitOutage(t, 1) }

// splitOutage runs an inlet and three outlets on a cluster of brokers of the test's own,
// stops one broker (all of Kafka with one) for 30 s while traffic flows, and checks what
// reached the outlets.
func splitOutage(t *testing.T, brokers int) {
	if testing.Short() {
		t.Skip("stops a broker for 30 s")
	}
	// Each outage test has a cluster of its own and mostly waits: they run beside each other.
	t.Parallel()
	cluster := kafkatest.StartCluster(t, brokers)
	capture := testdata.Path(t, "netflow", "data+templates.pcap")
	dgs, err := pcapfile.ReadUDP(capture)
	if err != nil {
		t.Fatal(err)
	}
	cl := cluster.Client(t)
	st := splitTopics{brokers: cluster.Brokers, datagrams: kafkatest.ReplicatedTopic(t, cl, fmt.Sprintf("outage%d-datagrams", brokers), 6), rf: int16(min(brokers, 3))}
	st.state, st.group = st.datagrams+"-state", st.datagrams+"-group"
	if rf := kafkatest.ReplicationFactor(t, cl); rf != st.rf {
		t.Fatalf("the cluster replicates %d times, want %d", rf, st.rf)
	}
	cfg := st.config(t, ModeOutlet)
	once, err := replay.Decode(replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}, []string{capture}, replay.DecodeOptions{}, io.Discard)
	if err != nil || once.Flows == 0 {
		t.Fatalf("offline: %d flows, %v", once.Flows, err)
	}
	var outlets []*App
	var dirs []string
	for range 3 {
		cfg := st.config(t, ModeOutlet)
		cfg.Outlet.SessionTimeout = 45 * time.Second // longer than the outage
		dirs = append(dirs, cfg.Outputs.File.Directory)
		outlets = append(outlets, startApp(t, cfg))
	}
	in := startApp(t, st.config(t, ModeInlet))
	at := testutil.Now()
	forward := func(passes int) {
		for range passes {
			for _, dg := range dgs {
				at = at.Add(time.Millisecond)
				in.Inlet().Forward(dg.Payload, dg.Src, at, "netflow")
			}
		}
	}
	decoded := func() int64 {
		f := int64(0)
		for _, o := range outlets {
			_, ff := o.Outlet().Counts()
			f += ff
		}
		return f
	}
	forward(100)
	testutil.WaitUntil(t, "the outlets to decode the first datagrams", func() bool { return decoded() >= int64(100*once.Flows) })

	// With several brokers, the one leading the most datagram partitions stops; the consumer
	// group's coordinator and the state topic's leader are logged to say what else moved.
	// With one, the whole Kafka stops.
	var victim int32
	if brokers > 1 {
		leaders := kafkatest.Leaders(t, cl, st.datagrams)
		for id, n := range leaders {
			if victim == 0 || n > leaders[victim] || (n == leaders[victim] && id < victim) {
				victim = id
			}
		}
		adm := kadm.NewClient(cl)
		coordinator := int32(-1)
		if gs, err := adm.DescribeGroups(context.Background(), st.group); err == nil {
			if g, ok := gs[st.group]; ok {
				coordinator = g.Coordinator.NodeID
			}
		}
		t.Logf("datagram partitions led per broker %v; stopping broker %d (group coordinator: %d, state topic leader: %v)",
			leaders, victim, coordinator, kafkatest.Leaders(t, cl, st.state))
		cluster.StopBroker(t, victim)
	} else {
		cluster.Stop(t)
	}
	// The outage lasts 30 s, traffic going on: a duration of the scenario, not a wait for
	// something to happen.
	for range 30 {
		forward(10)
		time.Sleep(time.Second)
	}
	duringOutage := decoded()
	if brokers > 1 {
		cluster.StartBroker(t, victim)
	} else {
		cluster.Start(t)
	}
	forward(100)
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	sent, delivered, dropped := in.Inlet().Counts()
	if sent != delivered+dropped || dropped != 0 || sent != 500*int64(len(dgs)) {
		t.Fatalf("inlet: sent %d, delivered %d, dropped %d", sent, delivered, dropped)
	}
	want := int(delivered) / len(dgs) * once.Flows
	testutil.WaitUntil(t, fmt.Sprintf("the outlets to decode %d flows", want), func() bool { return decoded() >= int64(want) })
	for _, o := range outlets {
		if err := o.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	ids, stored, twice := storedFlowIDs(t, dirs)
	t.Logf("broker %d of %d stopped 30 s: %d datagrams sent, %d delivered, %d dropped; %d flows decoded when it came back; %d distinct flows stored of %d, %d rows, %d stored more than once",
		victim, brokers, sent, delivered, dropped, duringOutage, len(ids), want, stored, twice)
	if len(ids) != want {
		t.Errorf("%d distinct flows stored, want %d", len(ids), want)
	}
	if brokers == 1 {
		return // the datagrams whose commit failed during the outage are decoded again: at least once
	}
	if stored != want || twice != 0 {
		t.Errorf("%d rows, %d flows twice, want %d each once", stored, twice, want)
	}
	// The outlets kept decoding while the broker was down: the datagrams of the outage were
	// not merely buffered until it came back.
	if duringOutage < int64(300*once.Flows) {
		t.Errorf("%d flows decoded by the end of the outage, want at least the %d sent before its end", duringOutage, 300*once.Flows)
	}
}
