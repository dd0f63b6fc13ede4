package app

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/capture/agent"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// TestCaptureFlows runs the capture server inside the collector: an agent replays captures,
// the server writes pcapng and turns the packets into flows, which reach the file sink with
// the same schema as exported flows.
func TestCaptureFlows(t *testing.T) {
	cfg := testConfig(t)
	cfg.Capture.Enabled = true
	cfg.Capture.Server.Listen = "127.0.0.1:0"
	cfg.Capture.Server.Output.Path = filepath.Join(t.TempDir(), "capture.pcapng")
	cfg.Capture.Flows.Enable = true
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	acfg := agent.DefaultConfiguration()
	acfg.Name, acfg.Server = "lab1", a.capture.Addr().String()
	acfg.Replay.Files = testdata.Glob(t, filepath.Join("decap", "*.pcap"))
	ag, err := agent.New(prometheus.NewRegistry(), acfg, agent.Dependencies{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	<-ag.Done()
	if err := ag.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	st := a.aggregator.Stats("lab1")
	if st.Flows == 0 || st.Packets == 0 {
		t.Fatalf("aggregator stats %+v: no flow from the captured packets", st)
	}
	n := 0
	for _, msg := range archivedMessages(t, cfg) {
		var exporter netip.Addr
		var packets uint64
		a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) {
			switch c.Key {
			case schema.ColumnExporterAddress:
				exporter = v.(netip.Addr)
			case schema.ColumnPackets:
				packets = v.(uint64)
			}
		})
		if exporter != netip.MustParseAddr("127.0.0.1") || packets == 0 {
			t.Fatalf("flow from capture: exporter %v, %d packets", exporter, packets)
		}
		n++
	}
	if uint64(n) != st.Flows {
		t.Fatalf("%d flows archived, the aggregator exported %d", n, st.Flows)
	}
}
