package app

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"flowzero/collector"
	"flowzero/internal/pcapfile"
	"flowzero/output/file"
	"flowzero/output/jsonl"
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

// replayGroups replays each capture group into the running app and waits until the
// collector has emitted want flows in total.
func replayGroups(t testing.TB, a *App, groups [][]string, want int) {
	t.Helper()
	addrs := a.Collector().ListenAddrs()
	for _, g := range groups {
		to := addrs[0]
		if sniffGroup(t, g) == "sflow" {
			to = addrs[1]
		}
		if _, err := Replay(context.Background(), g, ReplayOptions{To: to}); err != nil {
			t.Fatal(err)
		}
		// Groups one after the other: a template session must see its files in order and
		// before the next group's exporter sockets come and go.
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := uint64(0)
		for _, e := range a.Collector().Exporters() {
			got += e.Flows
		}
		if got >= uint64(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector emitted %d flows, want %d", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	a, err := New(cfg, quietLogger())
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
	return sniffProtocol(dgs[0].Payload)
}
