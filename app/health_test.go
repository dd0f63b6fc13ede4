package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowzero/collector"
	"flowzero/demo"
	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/testutil"
)

// getHealthz fetches the app's /healthz.
func getHealthz(t *testing.T, a *App) (int, health.Overall) {
	t.Helper()
	resp, err := http.Get("http://" + a.Collector().HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o health.Overall
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatalf("/healthz is not JSON: %v", err)
	}
	return resp.StatusCode, o
}

// metricsText fetches the app's /metrics.
func metricsText(t *testing.T, a *App) string {
	t.Helper()
	resp, err := http.Get("http://" + a.Collector().HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestHealthzFileOutputFails: an archive directory that becomes unusable while the collector
// runs (replaced by a regular file: as root, permissions would not stop a write) is seen by
// the operator: /healthz turns 503 with the file output degraded and why, the drops are
// counted in a series that existed at 0 from the start, and logged a bounded number of times.
func TestHealthzFileOutputFails(t *testing.T) {
	cfg := testConfig(t)
	cfg.Outputs.File.RotateSize = 4 << 10 // new files often: each needs the directory
	cfg.Outputs.File.Compression = "none"
	logs := &lockedbuf.Buffer{}
	a, err := New(cfg, Dependencies{Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if code, o := getHealthz(t, a); code != http.StatusOK || o.Status != health.OK || o.Components["file"].Status != health.OK {
		t.Fatalf("/healthz at start: %d %+v", code, o)
	}
	if m := metricsText(t, a); !strings.Contains(m, "flowzero_file_flows_dropped_total 0") || !strings.Contains(m, "flowzero_file_write_errors_total 0") {
		t.Error("the file output's drop and error series are not at 0 from the start")
	}
	dcfg := demo.DefaultConfiguration()
	dcfg.NetFlow = a.Collector().ListenAddrs()[0]
	dcfg.IPFIX, dcfg.SFlow = dcfg.NetFlow, netip.AddrPort{}
	dcfg.FlowsPerSecond = 2000
	dcfg.Clock = testutil.Clock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); demo.Run(ctx, dcfg) }()
	defer func() { cancel(); <-done }()
	testutil.WaitUntil(t, "flows archived", func() bool { return a.File().Health().Counters["flows-written"] > 0 })

	dir := cfg.Outputs.File.Directory
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory any more"), 0o644); err != nil {
		t.Fatal(err)
	}
	var o health.Overall
	testutil.WaitUntil(t, "/healthz to report the file output", func() bool {
		var code int
		code, o = getHealthz(t, a)
		return code == http.StatusServiceUnavailable && o.Components["file"].Status == health.Degraded
	})
	f := o.Components["file"]
	if o.Status != health.Degraded || !strings.Contains(f.Reason, "cannot open an archive file") || f.Counters["flows-dropped"] == 0 ||
		o.Components["collector"].Status != health.OK {
		t.Errorf("/healthz %+v", o)
	}
	testutil.WaitUntil(t, "the drops in the metrics", func() bool {
		return !strings.Contains(metricsText(t, a), "flowzero_file_flows_dropped_total 0\n")
	})
	if n := strings.Count(logs.String(), `msg="cannot open an archive file, flows dropped"`); n < 1 || n > 3 {
		t.Errorf("%d error lines, want 1 to 3", n)
	}
}

// TestMalformedFloodLogBounded: the first seconds of a flood of malformed datagrams (random
// bytes, and NetFlow/IPFIX/sFlow headers over random bytes) from 64 sources, to every
// listener through real sockets, log at most 10 "cannot decode datagram" lines (issue 24:
// 5,328 in the first second), while every datagram is counted.
func TestMalformedFloodLogBounded(t *testing.T) {
	cfg := testConfig(t)
	for i := range cfg.Collector.Listeners {
		cfg.Collector.Listeners[i].ReceiveBuffer = 8 << 20
	}
	logs := &lockedbuf.Buffer{}
	a, err := New(cfg, Dependencies{Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	rnd := rand.New(rand.NewPCG(24, 7))
	const sources, each = 64, 150
	sent := 0
	for s := range sources {
		src := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 24, byte(1 + s)}), 0))
		for _, to := range a.Collector().ListenAddrs() {
			conn, err := net.DialUDP("udp", src, net.UDPAddrFromAddrPort(to))
			if err != nil {
				t.Fatal(err)
			}
			for range each {
				conn.Write(malformed(rnd))
				sent++
			}
			conn.Close()
		}
	}
	testutil.WaitUntil(t, "every datagram read or counted as dropped by the kernel", func() bool {
		return collected(a).Datagrams+a.Collector().Health().Counters["kernel-drops"] >= uint64(sent)
	})
	var errs uint64
	for _, e := range a.Collector().Exporters() {
		errs += e.Errors
	}
	n := strings.Count(logs.String(), `msg="cannot decode datagram"`)
	t.Logf("%d datagrams from %d sources, %d decode errors, %d lines", sent, sources, errs, n)
	if errs < uint64(sent)/2 || n < 1 || n > 10 {
		t.Errorf("%d lines for %d malformed datagrams (%d errors), want 1 to 10", n, sent, errs)
	}
}

// malformed returns a random malformed datagram: random bytes, or a NetFlow v5, v9, IPFIX or
// sFlow v5 header announcing more than the random bytes after it hold.
func malformed(rnd *rand.Rand) []byte {
	b := make([]byte, 8+rnd.IntN(300))
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
	switch rnd.IntN(5) {
	case 0: // NetFlow v5, count larger than the records
		b[0], b[1], b[2], b[3] = 0, 5, 0, 30
	case 1: // NetFlow v9
		b[0], b[1] = 0, 9
	case 2: // IPFIX, message length past the end
		b[0], b[1], b[2], b[3] = 0, 10, 0xff, 0xff
	case 3: // sFlow v5, many samples
		copy(b, []byte{0, 0, 0, 5, 0, 0, 0, 1, 192, 0, 2, 1})
	}
	return b
}

// inletUnreachable is a configuration of mode inlet whose broker never answers, with a
// 1 MiB buffer: datagrams beyond it are dropped.
func inletUnreachable(t *testing.T) Configuration {
	cfg := DefaultConfiguration()
	cfg.Mode = ModeInlet
	cfg.Collector.Listeners = []collector.ListenerConfiguration{{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 1}}
	cfg.Collector.HTTP.Listen = "127.0.0.1:0"
	cfg.Outputs.File.Directory = t.TempDir()
	cfg.Datagrams.Brokers = []string{"127.0.0.1:1"}
	cfg.Inlet.MaxBufferedBytes = 1 << 20
	cfg.Inlet.FlushTimeout = 100 * time.Millisecond
	return cfg
}

// TestHealthzInletDrops: an inlet whose broker is unreachable drops datagrams (buffer-full)
// once max-buffered-bytes is full: /healthz answers 503, its inlet component degraded by the
// drops, with its datagram counters.
func TestHealthzInletDrops(t *testing.T) {
	a, err := New(inletUnreachable(t), testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(a.Collector().ListenAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload := make([]byte, 1400)
	payload[1] = 9 // NetFlow v9
	testutil.WaitUntil(t, "the inlet to drop datagrams", func() bool {
		for range 100 {
			conn.Write(payload)
		}
		_, _, dropped := a.Inlet().Counts()
		return dropped > 0
	})
	code, o := getHealthz(t, a)
	in := o.Components["inlet"]
	if code != http.StatusServiceUnavailable || o.Status != health.Degraded || in.Status != health.Degraded ||
		!strings.Contains(in.Reason, "datagrams dropped (buffer-full)") || in.Counters["datagrams-dropped"] == 0 {
		t.Fatalf("/healthz %d %+v, want 503 with the inlet degraded by its drops", code, o)
	}
}

// TestInletRefusesSummary: --summary in mode inlet, which decodes no flows, is refused,
// naming the flag, rather than accepted to print nothing.
func TestInletRefusesSummary(t *testing.T) {
	a, err := New(inletUnreachable(t), testDeps())
	if err != nil {
		t.Fatal(err)
	}
	var out lockedbuf.Buffer
	a.Summary, a.SummaryInterval = &out, 50*time.Millisecond
	if err := a.Start(); err == nil {
		a.Stop()
		t.Fatal("--summary accepted in mode inlet")
	} else if !strings.HasPrefix(err.Error(), "--summary: mode inlet decodes no flows") {
		t.Errorf("error %q", err)
	}
}

// TestHealthzRouting: a corrupt RIB snapshot at start (the RIB starts empty) and a BMP router
// whose session ends are both seen in /healthz, as the rib and bmp components.
func TestHealthzRouting(t *testing.T) {
	cfg := testConfig(t)
	cfg.Routing.RIB.Snapshot = filepath.Join(t.TempDir(), "rib.snapshot")
	if err := os.WriteFile(cfg.Routing.RIB.Snapshot, []byte("FZRIBSNP\x01 cut short"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Routing.BMP.Enabled = true
	cfg.Routing.BMP.Listen = "127.0.0.1:0"
	a := startApp(t, cfg)
	defer a.Stop()
	code, o := getHealthz(t, a)
	if rib := o.Components["rib"]; code != http.StatusServiceUnavailable || rib.Status != health.Degraded ||
		!strings.Contains(rib.Reason, "snapshot not loaded") || o.Components["bmp"].Status != health.OK {
		t.Errorf("/healthz after a corrupt snapshot: %d %+v", code, o)
	}
	// A router sends its initiation message (RFC 7854 §4.3: version 3, length 6, type 4, no
	// information TLV), then its connection drops.
	conn, err := net.Dial("tcp", a.routing.BMPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte{3, 0, 0, 0, 6, 4}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the BMP session up", func() bool { return a.routing.HealthReporters()[1].Health().Counters["sessions"] == 1 })
	conn.Close()
	testutil.WaitUntil(t, "/healthz to report the BMP session lost", func() bool {
		_, o = getHealthz(t, a)
		return o.Components["bmp"].Status == health.Degraded
	})
	if b := o.Components["bmp"]; !strings.Contains(b.Reason, "BMP session of router 127.0.0.1 lost") {
		t.Errorf("bmp in /healthz: %+v", b)
	}
}

// startApp makes and starts an App of cfg with the tests' dependencies.
func startApp(t *testing.T, cfg Configuration) *App {
	t.Helper()
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	return a
}
