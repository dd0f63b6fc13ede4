package flows

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/agent"
	"flowzero/capture/server"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

// TestAggregatorClose closes the table of one of two agents: its flows are exported (none
// lost), its table and metric series are gone, the other agent's flows stay in its table.
func TestAggregatorClose(t *testing.T) {
	agg, fc := newLongAggregator(t)
	frames, err := pcapfile.ReadFrames(filepath.Join(allCapturesRoot(t), "bmp", "bmp-reach.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	gone, kept := agg.ForAgent("gone"), agg.ForAgent("kept")
	gone.Connected(netip.MustParseAddr("192.0.2.1"))
	var packets uint64
	for _, fr := range frames {
		if fr.LinkType != layers.LinkTypeEthernet {
			continue
		}
		gone.Packet(0, uint16(fr.LinkType), fr.Time.UnixNano(), uint32(fr.Length), fr.Data)
		kept.Packet(0, uint16(fr.LinkType), fr.Time.UnixNano(), uint32(fr.Length), fr.Data)
		packets++
	}
	keptFlows := len(kept.(*flowTable).index)
	if packets == 0 || keptFlows == 0 || len(fc.flows(t)) != 0 {
		t.Fatalf("%d packets, %d flows, %d exported before Close", packets, keptFlows, len(fc.flows(t)))
	}

	gone.Close()
	var sum uint64
	for _, f := range fc.flows(t) {
		if f["ExporterName"] != "gone" {
			t.Fatalf("flow of another agent exported: %v", f)
		}
		sum += f["Packets"].(uint64)
	}
	if sum != packets {
		t.Fatalf("the forgotten agent's flows hold %d packets, want %d", sum, packets)
	}
	agg.mu.Lock()
	_, stillThere := agg.tables["gone"]
	agg.mu.Unlock()
	if stillThere {
		t.Fatal("the forgotten agent's table is kept")
	}
	if n := len(kept.(*flowTable).index); n != keptFlows {
		t.Fatalf("the other agent has %d flows left, want %d", n, keptFlows)
	}
	if n := promtest.CollectAndCount(agg.metrics.flows); n != 1 {
		t.Fatalf("%d flow series, want the other agent's only", n)
	}
	if agg.ForAgent("gone") == gone {
		t.Fatal("an agent coming back gets the forgotten table")
	}
}

// TestAggregatorCloseAfterReturn closes an agent's table after the agent came back with a new
// one (the server closes consumers without its locks): the new table and its metric series
// stay.
func TestAggregatorCloseAfterReturn(t *testing.T) {
	agg, _ := newLongAggregator(t)
	old := agg.ForAgent("back")
	back := agg.ForAgent("back")
	old.Close()
	agg.mu.Lock()
	current := agg.tables["back"]
	agg.mu.Unlock()
	if current != back {
		t.Fatal("closing the old table dropped the new one")
	}
	if n := promtest.CollectAndCount(agg.metrics.flows) + promtest.CollectAndCount(agg.metrics.skipped); n != 4 {
		t.Fatalf("%d metric series left, want the returning agent's 4", n)
	}
	back.Close()
	if n := promtest.CollectAndCount(agg.metrics.flows) + promtest.CollectAndCount(agg.metrics.skipped); n != 0 {
		t.Fatalf("%d metric series left once both tables are closed", n)
	}
}

// TestIdleCloseForgetsFlows has an agent replay and leave a server with output.idle-close:
// when the server forgets it, its flows reach the emitter without waiting for Stop.
func TestIdleCloseForgetsFlows(t *testing.T) {
	agg, fc := newLongAggregator(t)
	s := startFlowServer(t, agg, func(cfg *server.Configuration) {
		cfg.Output.PerAgent = true
		cfg.Output.IdleClose = 50 * time.Millisecond
		cfg.Output.FlushInterval = 20 * time.Millisecond
	})
	defer s.Stop()
	replayAgent(t, s, "idleagent", allCaptures(t)[:1])
	testutil.WaitUntil(t, "the agent's table forgotten and its flows exported", func() bool {
		agg.mu.Lock()
		_, present := agg.tables["idleagent"]
		agg.mu.Unlock()
		return !present && len(fc.flows(t)) > 0
	})
	var packets uint64
	for _, f := range fc.flows(t) {
		packets += f["Packets"].(uint64)
	}
	if st := s.Stats("idleagent"); packets == 0 || st.Packets != 0 {
		t.Fatalf("%d packets in flows; server stats %+v after forgetting", packets, st)
	}
}

// newLongAggregator returns an aggregator whose flows only leave at Stop or when a table is
// closed.
func newLongAggregator(t *testing.T) (*Aggregator, *flowCollector) {
	t.Helper()
	sch, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	fc := &flowCollector{s: sch}
	cfg := DefaultConfiguration()
	cfg.ActiveTimeout, cfg.IdleTimeout = 1000*time.Hour, 1000*time.Hour
	agg, err := New(prometheus.NewRegistry(), cfg, sch, fc.emit, nil)
	if err != nil {
		t.Fatal(err)
	}
	return agg, fc
}

// startFlowServer starts a capture server on loopback feeding agg; edit adjusts its
// configuration.
func startFlowServer(t *testing.T, agg *Aggregator, edit func(*server.Configuration)) *server.Server {
	t.Helper()
	cfg := server.DefaultConfiguration()
	cfg.Listen = "127.0.0.1:0"
	cfg.Output.Path = filepath.Join(t.TempDir(), "capture.pcapng")
	if edit != nil {
		edit(&cfg)
	}
	s, err := server.New(prometheus.NewRegistry(), cfg, server.Dependencies{Logger: quiet, Packets: agg, Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// replayAgent has an agent named name replay files to s and waits for it to finish.
func replayAgent(t *testing.T, s *server.Server, name string, files []string) {
	t.Helper()
	acfg := agent.DefaultConfiguration()
	acfg.Name, acfg.Server, acfg.Replay.Files = name, s.Addr().String(), files
	a, err := agent.New(nil, acfg, agent.Dependencies{Logger: quiet, Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	<-a.Done()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
}
