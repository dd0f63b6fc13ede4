package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/capture/server"
	"flowzero/internal/health"
	"flowzero/internal/httpserver"
	"flowzero/internal/httpserver/httpservertest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
)

// TestRotateIntervalFlag checks -G: whole seconds as tcpdump takes them, or a Go duration.
func TestRotateIntervalFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"60": time.Minute, "0": 0, "3600": time.Hour, "1m": time.Minute, "90s": 90 * time.Second} {
		var d time.Duration
		if err := (secondsOrDuration{&d}).Set(in); err != nil || d != want {
			t.Errorf("-G %s: %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"abc", "1.5", "-5", "99999999999999", ""} {
		var d time.Duration
		if err := (secondsOrDuration{&d}).Set(bad); err == nil {
			t.Errorf("-G %q accepted as %v", bad, d)
		}
	}
	// Through the command: the flag parser names the flag, Validate the key.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"capture", "server", "-G", "abc"}, 2, `invalid value "abc" for flag -G: "abc": want whole seconds (3600) or a duration (1h)`},
		{[]string{"capture", "server", "-G", "500ms"}, 1, "output.rotate-interval: 500ms: want 0 or at least 1s"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q; want code %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}

func TestRotateSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"100": 100_000_000, "0": 0, "1": 1_000_000, "512k": 512 << 10, "64M": 64 << 20, "2g": 2 << 30} {
		var n int64
		if err := (tcpdumpSize{&n}).Set(in); err != nil || n != want {
			t.Errorf("-C %s: %d, %v; want %d", in, n, err, want)
		}
	}
	for _, bad := range []string{"abc", "1.5", "-5", "10x", "k", "", "99999999999999g"} {
		var n int64
		if err := (tcpdumpSize{&n}).Set(bad); err == nil {
			t.Errorf("-C %q accepted as %d", bad, n)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"capture", "server", "-C", "10x"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `invalid value "10x" for flag -C`) {
		t.Errorf("-C 10x: code %d, stderr %q", code, errb.String())
	}
}

// TestCaptureAgentServer runs the real subcommands in-process: a server on a free loopback
// port writing pcapng with tcpdump-style -G seconds, and an agent replaying a real capture to
// it; the file must hold that capture's packets, byte for byte.
func TestCaptureAgentServer(t *testing.T) {
	capFile := testdata.Path(t, "bmp", "bmp-reach.pcap")
	want, err := pcapfile.ReadFrames(capFile)
	if err != nil {
		t.Fatal(err)
	}
	stopServer, cancel := context.WithCancel(context.Background())
	defer cancel()
	saved := stopContext
	stopContext = func() (context.Context, context.CancelFunc) { return context.WithCancel(stopServer) }
	t.Cleanup(func() { stopContext = saved })

	dir := t.TempDir()
	logs, logWriter := io.Pipe()
	serverCode := make(chan int, 1)
	go func() {
		code := run([]string{"capture", "server", "-listen", "127.0.0.1:0", "-w", filepath.Join(dir, "cap-%Y%m%d.pcapng"), "-G", "60"},
			io.Discard, logWriter)
		logWriter.Close()
		serverCode <- code
	}()
	// The server logs where it listens; its log is read line by line until it ends.
	listening := regexp.MustCompile(`msg="capture server listening" address=(\S+)`)
	addrs, serverLog := make(chan string, 1), make(chan string, 1)
	go func() {
		var all strings.Builder
		for sc := bufio.NewScanner(logs); sc.Scan(); {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1]
			}
			all.WriteString(sc.Text() + "\n")
		}
		close(addrs)
		serverLog <- all.String()
	}()
	var addr string
	select {
	case a, ok := <-addrs:
		if !ok {
			t.Fatalf("the server exited with %d before listening: %s", <-serverCode, <-serverLog)
		}
		addr = a
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not say where it listens")
	}

	var agentOut, agentErr bytes.Buffer
	if code := run([]string{"capture", "agent", "-name", "t1", "-server", addr, "-replay", capFile}, &agentOut, &agentErr); code != 0 {
		t.Fatalf("agent exited with %d: %s", code, agentErr.String())
	}
	if summary := fmt.Sprintf("captured %d, sent %d, dropped by the agent 0,", len(want), len(want)); !strings.HasPrefix(agentOut.String(), summary) {
		t.Errorf("agent said %q, want %q...", agentOut.String(), summary)
	}
	cancel()
	select {
	case code := <-serverCode:
		if code != 0 {
			t.Fatalf("server exited with %d: %s", code, <-serverLog)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}

	files, _ := filepath.Glob(filepath.Join(dir, "cap-*.pcapng"))
	if len(files) != 1 {
		t.Fatalf("output files %v, want one", files)
	}
	got, err := pcapfile.ReadFrames(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s holds %d packets, want the %d of %s", files[0], len(got), len(want), capFile)
	}
	for i := range want {
		if !bytes.Equal(got[i].Data, want[i].Data) || !got[i].Time.Equal(want[i].Time) || got[i].Length != want[i].Length {
			t.Fatalf("packet %d differs from the capture's", i)
		}
	}
}

// stubReporter is a component whose state a test sets.
type stubReporter struct{ state *health.State }

func (stubReporter) Name() string            { return "capture-server" }
func (r stubReporter) Health() health.Report { return r.state.Report() }

// TestServeMetricsGuards: the capture commands' metrics endpoint is built by
// httpserver.New: a Host that is not loopback is refused and counted, and a slow body is cut
// at the read timeout. It serves /healthz beside /metrics, as the collector does: 200 while
// the component is ok, 503 with its reason while it is degraded.
func TestServeMetricsGuards(t *testing.T) {
	var logBuf bytes.Buffer
	reg := prometheus.NewRegistry()
	component := stubReporter{health.NewState(nil)}
	stop, err := serveMetrics("127.0.0.1:0", reg, component, slog.New(slog.NewTextHandler(&logBuf, nil)),
		httpserver.Timeouts{ReadHeader: time.Second, Read: 300 * time.Millisecond, Idle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	m := regexp.MustCompile(`address=(\S+)`).FindStringSubmatch(logBuf.String())
	if m == nil {
		t.Fatalf("no address logged: %s", logBuf.String())
	}
	addr := m[1]

	get := func(host string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("attacker.example:9101"); code != http.StatusForbidden {
		t.Errorf("Host attacker.example: status %d, want 403", code)
	}
	if code, body := get("localhost:9101"); code != 200 || !strings.Contains(body, `flowzero_metrics_http_rejected_total{reason="host"} 1`) {
		t.Errorf("Host localhost: status %d, want 200 and one refusal counted:\n%s", code, body)
	}
	healthz := func() (int, health.Overall) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var o health.Overall
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, o
	}
	if code, o := healthz(); code != 200 || o.Status != health.OK || o.Components["capture-server"].Status != health.OK {
		t.Errorf("/healthz of an ok component: %d %+v", code, o)
	}
	component.state.Event("3 packets dropped")
	if code, o := healthz(); code != http.StatusServiceUnavailable || o.Status != health.Degraded ||
		!strings.HasPrefix(o.Components["capture-server"].Reason, "3 packets dropped") {
		t.Errorf("/healthz of a degraded component: %d %+v", code, o)
	}

	// The handler reads no body: the server drains it after answering, until the read
	// timeout closes the connection.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, conn) // the answer, then EOF when the server closes
		close(closed)
	}()
	httpservertest.DribbleBody(t, conn, "/metrics", closed)
}

// TestCaptureAgentUnauthorized runs the agent command with a token the server refuses: it
// exits with an error that says so and names the flag that keeps it trying; with that flag it
// keeps trying until stopped.
func TestCaptureAgentUnauthorized(t *testing.T) {
	capFile := testdata.Path(t, "bmp", "bmp-reach.pcap")
	scfg := server.DefaultConfiguration()
	scfg.Listen = "127.0.0.1:0"
	scfg.Output.Path = filepath.Join(t.TempDir(), "out.pcapng")
	scfg.Tokens = []string{"right"}
	reg := prometheus.NewRegistry()
	srv, err := server.New(reg, scfg, server.Dependencies{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	refusals := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != "flowzero_capture_server_errors_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == "unauthorized" {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgFile, []byte("reconnect-min: 10ms\nreconnect-max: 50ms\ndrain-timeout: 100ms\nframe-size: 4096\nbuffer-size: 1048576\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"capture", "agent", "-config", cfgFile, "-name", "t1", "-server", srv.Addr().String(), "-token-file", tokenFile, "-replay", capFile}

	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "server refused the agent: unauthorized") || !strings.Contains(errb.String(), "-retry-unauthorized") {
		t.Fatalf("agent with a wrong token: code %d, stderr %q; want 1 and the refusal", code, errb.String())
	}
	if n := refusals(); n != 1 {
		t.Fatalf("the server refused %v connections, want 1", n)
	}

	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	saved := stopContext
	stopContext = func() (context.Context, context.CancelFunc) { return context.WithCancel(stop) }
	t.Cleanup(func() { stopContext = saved })
	code := make(chan int, 1)
	// Replayed in a loop, so that the agent does not end by itself.
	go func() {
		code <- run(append(args, "-retry-unauthorized", "-loop", "1000000000"), io.Discard, io.Discard)
	}()
	testutil.WaitUntil(t, "the agent to try again", func() bool { return refusals() >= 4 })
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("agent stopped with %d", c)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("the agent did not stop")
	}
}
