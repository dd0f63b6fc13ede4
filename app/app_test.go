package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"flowzero/collector"
	"flowzero/internal/clock"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output/file"
	"flowzero/output/jsonl"
	"flowzero/replay"
	"flowzero/schema"
)

// testConfig listens on loopback with free ports and archives to a temporary directory.
func testConfig(t testing.TB) Configuration {
	cfg := DefaultConfiguration()
	cfg.Collector.Listeners = []collector.ListenerConfiguration{
		{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 2},
	}
	cfg.Collector.Listeners = append(cfg.Collector.Listeners,
		collector.ListenerConfiguration{Protocol: "sflow", Address: "127.0.0.1:0", Workers: 1})
	cfg.Collector.HTTP.Listen = "127.0.0.1:0"
	cfg.Collector.BatchInterval = 20 * time.Millisecond
	cfg.Outputs.File.Directory = t.TempDir()
	cfg.Outputs.File.Compression = "zstd"
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testDeps are the app's dependencies in tests: a quiet logger and the test clock.
func testDeps() Dependencies { return Dependencies{Logger: quietLogger(), Clock: testutil.Clock()} }

// replayGroups replays each capture group into the running app and waits until the
// collector has emitted want flows in total.
func replayGroups(t testing.TB, a *App, groups [][]string, want int) {
	t.Helper()
	addrs := a.Collector().ListenAddrs()
	sent := 0
	for _, g := range groups {
		to := addrs[0]
		if sniffGroup(t, g) == "sflow" {
			to = addrs[1]
		}
		st, err := replay.Send(context.Background(), g, replay.SendOptions{To: to})
		if err != nil {
			t.Fatal(err)
		}
		// Groups one after the other: a group's template sessions are done with before the
		// next group's exporter sockets come (a port the kernel gives again would otherwise
		// carry one group's templates into the next).
		sent += st.Datagrams
		testutil.WaitUntil(t, fmt.Sprintf("the collector to handle the %d datagrams sent", sent), func() bool {
			return collected(a).Datagrams >= uint64(sent)
		})
	}
	testutil.WaitUntil(t, fmt.Sprintf("the collector to emit %d flows", want), func() bool {
		return collected(a).Flows >= uint64(want)
	})
}

// collected sums the collector's exporters' counts.
func collected(a *App) (sum collector.ExporterStatus) {
	for _, e := range a.Collector().Exporters() {
		sum.Datagrams += e.Datagrams
		sum.Flows += e.Flows
	}
	return sum
}

// TestEndToEndFile replays every capture over real UDP into the collector with the file sink
// and checks that the archive holds exactly the flows `flowzero decode` gives offline.
func TestEndToEndFile(t *testing.T) {
	cfg := testConfig(t)
	groups := captureGroups(t)
	want, total := expectedFlows(t, cfg, groups)
	if total < 100 {
		t.Fatalf("only %d flows expected from the captures: decoder regression?", total)
	}
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	replayGroups(t, a, groups, total)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	f, _ := jsonl.New(a.Schema(), nil)
	var lines []byte
	for _, msg := range archivedMessages(t, cfg) {
		var err error
		if lines, err = f.Append(lines, msg); err != nil {
			t.Fatal(err)
		}
	}
	diffFlows(t, normalize(t, lines), want)
}

// archivedMessages returns every flow message of the file output's archives (copies), failing
// the test if there is none or one does not read.
func archivedMessages(t testing.TB, cfg Configuration) [][]byte {
	files, err := file.ListArchives(cfg.Outputs.File.Directory, cfg.Outputs.File.Prefix)
	if err != nil || len(files) == 0 {
		t.Fatalf("archives: %v %v", files, err)
	}
	var msgs [][]byte
	for _, p := range files {
		r, err := file.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			msgs = append(msgs, bytes.Clone(msg))
		}
		r.Close()
	}
	return msgs
}

func sniffGroup(t testing.TB, g []string) string {
	dgs, err := pcapfile.ReadUDP(g[0])
	if err != nil || len(dgs) == 0 {
		t.Fatalf("%s: %v", g[0], err)
	}
	return replay.Protocol(dgs[0].Payload)
}

// TestClock: the app's clock reaches the collector: the flows' receive time and the
// exporters' first datagram are dated by it, here ten years ahead of the machine's.
func TestClock(t *testing.T) {
	cfg := testConfig(t)
	clk := clock.Offset(time.Until(testutil.Now().Add(10 * 365 * 24 * time.Hour)))
	a, err := New(cfg, Dependencies{Logger: quietLogger(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	before := clk.Now().Truncate(time.Second)
	replayGroups(t, a, [][]string{{testdata.Path(t, "netflow", "nfv5.pcap")}}, 29)
	exps := a.Collector().Exporters()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	after := clk.Now()
	if len(exps) != 1 || exps[0].FirstSeen.Before(before) || exps[0].FirstSeen.After(after) {
		t.Errorf("exporters %+v, want one first seen between %s and %s", exps, before, after)
	}
	n := 0
	for _, msg := range archivedMessages(t, cfg) {
		a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) {
			if c.Key != schema.ColumnTimeReceived {
				return
			}
			if got := time.Unix(int64(v.(uint64)), 0); got.Before(before) || got.After(after) {
				t.Errorf("flow received at %s, want between %s and %s", got, before, after)
			}
			n++
		})
	}
	if n != 29 {
		t.Errorf("%d flows with a receive time, want 29", n)
	}
}

// TestExportersAPI: /api/v0/exporters merges the state both decoders keep for an exporter
// (the adapters app gives the collector): NetFlow sessions and sFlow agents of 127.0.0.1.
func TestExportersAPI(t *testing.T) {
	cfg := testConfig(t)
	cfg.Outputs.File.Enabled = false
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	nf := func(n string) string { return testdata.Path(t, "netflow", n+".pcap") }
	replayGroups(t, a, [][]string{
		{nf("options-template"), nf("options-data"), nf("template"), nf("data")},
		{testdata.Path(t, "sflow", "data-1140.pcap")},
	}, 4+5)
	resp, err := http.Get("http://" + a.Collector().HTTPAddr() + "/api/v0/exporters")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var api struct {
		Exporters []struct {
			Address string
			Flows   uint64
			Decoder map[string]json.RawMessage
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&api); err != nil {
		t.Fatal(err)
	}
	if len(api.Exporters) != 1 || api.Exporters[0].Address != "127.0.0.1" || api.Exporters[0].Flows != 9 {
		t.Fatalf("exporters %+v, want 127.0.0.1 with 9 flows", api.Exporters)
	}
	d := api.Exporters[0].Decoder
	if len(d) != 2 || len(d["netflow"]) < 3 || len(d["sflow"]) < 3 {
		t.Fatalf("decoder details %s, want netflow and sflow state", d)
	}
	other := netip.MustParseAddr("192.0.2.1")
	if d := exporterDetails(other, map[string]detailsSource{"netflow": a.netflow, "sflow": a.sflow, "none": nil}); d != nil {
		t.Errorf("details %v for an exporter no decoder knows", d)
	}
}
