//go:build integration

package app

import (
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
	"flowzero/internal/health"
	"flowzero/internal/kafkatest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
)

// coldBacklog is a backlog written while no outlet runs: partition 0 holds xData data
// datagrams of exporter X (NetFlow v9, perData flows each), partition 1 yBacklog datagrams of
// exporter Y (NetFlow v5, one flow each) and then, with template, X's template datagram
// (templateFlows flows).
type coldBacklog struct {
	xData, yBacklog, perData, templateFlows int
}

func writeColdBacklog(t *testing.T, st splitTopics, cfg Configuration, xData, yBacklog int, template bool) coldBacklog {
	t.Helper()
	dec := replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}
	tmplPath, dataPath := testdata.Path(t, "netflow", "template.pcap"), testdata.Path(t, "netflow", "data.pcap")
	tmpl, err := pcapfile.ReadUDP(tmplPath)
	if err != nil {
		t.Fatal(err)
	}
	data, err := pcapfile.ReadUDP(dataPath)
	if err != nil {
		t.Fatal(err)
	}
	withData, err := replay.Decode(dec, []string{tmplPath, dataPath}, replay.DecodeOptions{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := replay.Decode(dec, []string{tmplPath}, replay.DecodeOptions{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := coldBacklog{xData: xData, yBacklog: yBacklog, perData: withData.Flows - alone.Flows}
	if template {
		b.templateFlows = alone.Flows
	}
	if b.perData <= 0 || len(tmpl) != 1 || len(data) != 1 {
		t.Fatalf("offline: %d template and %d data datagrams, %d flows per data datagram", len(tmpl), len(data), b.perData)
	}
	// Y's datagrams are cut to one flow each: cheap to decode, many records.
	v5, err := pcapfile.ReadUDP(testdata.Path(t, "netflow", "nfv5.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	small := append([]byte(nil), v5[0].Payload[:24+48]...)
	binary.BigEndian.PutUint16(small[2:], 1)
	x, y := data[0].Src, netip.MustParseAddrPort("192.0.2.222:2055")
	if x == y {
		t.Fatal("exporters X and Y share an address")
	}
	at := testutil.Now()
	record := func(p int32, from netip.AddrPort, payload []byte) *kgo.Record {
		at = at.Add(time.Millisecond)
		return &kgo.Record{Topic: st.datagrams, Partition: p,
			Value: datagram.Append(nil, datagram.Datagram{Received: at, Exporter: from, Protocol: datagram.NetFlow, Payload: payload})}
	}
	var recs []*kgo.Record
	for range yBacklog {
		recs = append(recs, record(1, y, small))
	}
	if template {
		recs = append(recs, record(1, x, tmpl[0].Payload))
	}
	for range xData {
		recs = append(recs, record(0, x, data[0].Payload))
	}
	prod := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	for i := 0; i < len(recs); i += 2000 {
		if err := prod.ProduceSync(context.Background(), recs[i:min(i+2000, len(recs))]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestSplitColdOutletBacklog (issue 27): one fresh outlet (empty state topic) reads a backlog
// where partition 0 holds thousands of data datagrams of exporter X and partition 1 holds a
// long backlog of exporter Y's datagrams and only then X's template. The outlet reaches X's
// data long before its template, far more of it than the pending buffer holds
// (netflow.pending-sets): it must stop partition 0 at the first datagram that does not fit,
// keep reading partition 1, and come back once the template is learned. Every flow sent is
// stored, once.
func TestSplitColdOutletBacklog(t *testing.T) {
	st := newSplitTopics(t, 2)
	cfg := st.config(t, ModeOutlet)
	cfg.Outlet.MaxFetchBytes = 64 << 10 // partition 1's backlog takes many fetches
	b := writeColdBacklog(t, st, cfg, 3000, 30000, true)
	want := b.yBacklog + b.xData*b.perData + b.templateFlows

	out := startApp(t, cfg)
	kafkatest.WaitCommitted(t, kadm.NewClient(kafkatest.Client(t)), st.datagrams, st.group)
	if err := out.Stop(); err != nil {
		t.Fatal(err)
	}
	ids, stored, twice := storedFlowIDs(t, []string{cfg.Outputs.File.Directory})
	m := outletMetrics(t, out)
	t.Logf("partition 0: %d data datagrams of X; partition 1: %d datagrams of Y, then X's template: %d flows sent, %d stored (%d distinct, %d twice); metrics %v",
		b.xData, b.yBacklog, want, stored, len(ids), twice, m)
	if stored != want || len(ids) != want || twice != 0 {
		t.Errorf("stored %d flows (%d distinct, %d twice), want %d: %d lost", stored, len(ids), twice, want, want-len(ids))
	}
	if m["pending-full"] != 0 || m["flowzero_outlet_pending_dropped_total"] != 0 || m["flowzero_outlet_wait_timeouts_total"] != 0 {
		t.Errorf("data sets dropped: %v", m)
	}
	if m["flowzero_outlet_pauses_total"] == 0 {
		t.Errorf("partition 0 never waited for its template: the backlog did not put X's data before its template (%v)", m)
	}
}

// TestSplitTemplateNeverComes: the same backlog without X's template. Partition 0 waits
// outlet.template-wait at the first datagram that does not fit in the pending buffer, then
// its data sets are dropped and counted as in mode all, X's next datagrams do not wait
// again, every datagram is decoded, and /healthz shows the outlet degraded.
func TestSplitTemplateNeverComes(t *testing.T) {
	st := newSplitTopics(t, 2)
	cfg := st.config(t, ModeOutlet)
	cfg.Outlet.MaxFetchBytes = 64 << 10
	cfg.Outlet.TemplateWait = 500 * time.Millisecond
	b := writeColdBacklog(t, st, cfg, 300, 3000, false)

	out := startApp(t, cfg)
	// The 32 data sets held in the pending buffer keep their datagrams uncommitted until
	// netflow.pending-max-age: wait for every datagram decoded instead.
	testutil.WaitUntil(t, "every datagram decoded", func() bool {
		d, _ := out.Outlet().Counts()
		return d == int64(b.xData+b.yBacklog)
	})
	rep := out.Collector().HealthReport().Components["outlet"]
	if err := out.Stop(); err != nil {
		t.Fatal(err)
	}
	ids, stored, twice := storedFlowIDs(t, []string{cfg.Outputs.File.Directory})
	m := outletMetrics(t, out)
	t.Logf("partition 0: %d data datagrams of X, no template; partition 1: %d datagrams of Y: %d flows stored (%d twice); metrics %v; health %+v",
		b.xData, b.yBacklog, stored, twice, m, rep)
	if stored != b.yBacklog || len(ids) != b.yBacklog || twice != 0 {
		t.Errorf("stored %d flows (%d distinct, %d twice), want Y's %d", stored, len(ids), twice, b.yBacklog)
	}
	// pending-sets (32) stay held (until pending-max-age), the rest are counted pending-full.
	held := float64(cfg.NetFlow.PendingSets)
	if m["flowzero_outlet_wait_timeouts_total"] != 1 || m["pending-full"] != float64(b.xData)-held {
		t.Errorf("want one wait timeout and %v pending-full: %v", float64(b.xData)-held, m)
	}
	if rep.Status != health.Degraded || !strings.Contains(rep.Reason, "waited") {
		t.Errorf("/healthz for the outlet: %+v, want degraded by the wait", rep)
	}
}

// outletMetrics returns the outlet's pause counters and the NetFlow decoder's pending-full
// errors.
func outletMetrics(t *testing.T, a *App) map[string]float64 {
	t.Helper()
	mfs, err := a.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "flowzero_outlet_pauses_total", "flowzero_outlet_wait_timeouts_total", "flowzero_outlet_pending_dropped_total":
			for _, c := range mf.GetMetric() {
				m[mf.GetName()] += c.GetCounter().GetValue()
			}
		case "flowzero_netflow_errors_total":
			for _, c := range mf.GetMetric() {
				for _, l := range c.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == "pending-full" {
						m["pending-full"] += c.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return m
}
