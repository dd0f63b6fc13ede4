//go:build integration

package app

import (
	"fmt"
	"io"
	"testing"
	"time"

	"flowzero/internal/kafkatest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
)

// TestSplitBrokerOutage: the whole Kafka (a single broker of the test's own) stops for 30 s while an inlet receives datagrams and
// three outlets consume; it comes back. The inlet buffers meanwhile (sent = delivered +
// dropped, nothing dropped within max-buffered-bytes), and every flow of the delivered
// datagrams is stored, at least once.
func TestSplitBrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a broker for 30 s")
	}
	// Each outage test has a cluster of its own and mostly waits: they run beside each other.
	t.Parallel()
	broker := kafkatest.StartCluster(t, 1)
	capture := testdata.Path(t, "netflow", "data+templates.pcap")
	dgs, err := pcapfile.ReadUDP(capture)
	if err != nil {
		t.Fatal(err)
	}
	st := splitTopics{brokers: broker.Brokers, datagrams: "outage-datagrams", state: "outage-state", group: "outage-group"}
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
	icfg := st.config(t, ModeInlet)
	icfg.Datagrams.Partitions = 6
	in := startApp(t, icfg)
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
	broker.Stop(t)
	// The outage lasts 30 s, traffic going on: a duration of the scenario, not a wait for
	// something to happen.
	for range 30 {
		forward(10)
		time.Sleep(time.Second)
	}
	broker.Start(t)
	forward(100)
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	sent, delivered, dropped := in.Inlet().Counts()
	if sent != delivered+dropped || dropped != 0 {
		t.Fatalf("inlet: sent %d, delivered %d, dropped %d", sent, delivered, dropped)
	}
	want := int(delivered) * once.Flows
	testutil.WaitUntil(t, fmt.Sprintf("the outlets to decode %d flows", want), func() bool { return decoded() >= int64(want) })
	for _, o := range outlets {
		if err := o.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	ids, stored, twice := storedFlowIDs(t, dirs)
	t.Logf("30 s outage: %d datagrams sent, %d delivered, %d dropped; %d distinct flows stored of %d, %d rows, %d stored more than once",
		sent, delivered, dropped, len(ids), want, stored, twice)
	if len(ids) != want {
		t.Errorf("%d distinct flows stored, want %d", len(ids), want)
	}
}
