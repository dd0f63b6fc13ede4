package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// reusePortSocket binds a UDP socket with SO_REUSEPORT to addr, as a second collector (or
// any program of the same user) would, and returns it with its inode. On port 0 it takes
// SO_REUSEPORT once bound, as openSockets does: a port that another socket of the process
// holds would give the tests a socket they did not expect on it.
func reusePortSocket(t *testing.T, addr string) (*net.UDPConn, uint64) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		if port == "0" {
			return nil
		}
		var serr error
		c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn := pc.(*net.UDPConn)
	if port == "0" {
		if err := rawControl(conn, setReusePort); err != nil {
			t.Fatal(err)
		}
	}
	ino, err := socketInode(conn)
	if err != nil {
		t.Fatal(err)
	}
	return conn, ino
}

// TestEphemeralPortNotShared: a listener on port 0 gets a port that no other socket holds,
// though the kernel gives a socket with SO_REUSEPORT binding port 0 a port that another such
// socket of the same user holds now and then (the port-sharing check then refused to start
// tests' collectors); the listener's sockets all take that port.
func TestEphemeralPortNotShared(t *testing.T) {
	held := map[int]bool{}
	for range 1000 {
		c, _ := reusePortSocket(t, "127.0.0.1:0")
		defer c.Close()
		held[c.LocalAddr().(*net.UDPAddr).Port] = true
	}
	for range 300 {
		conns, _, err := openSockets("127.0.0.1:0", 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		a, b := conns[0].LocalAddr().(*net.UDPAddr).Port, conns[1].LocalAddr().(*net.UDPAddr).Port
		for _, c := range conns {
			c.Close()
		}
		if held[a] || a != b {
			t.Fatalf("listener on port 0 bound to ports %d and %d; held by other sockets: %v, %v", a, b, held[a], held[b])
		}
	}
}

// healthz fetches /healthz and decodes it.
func healthz(t *testing.T, c *Collector) (int, health.Overall) {
	t.Helper()
	resp, err := http.Get("http://" + c.HTTPAddr() + "/healthz")
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

// TestCollectorRefusesSharedPort: a socket of another program on a listener's port (with
// SO_REUSEPORT, so that the kernel would split the datagrams) stops the collector from
// starting, with an error that names the listener, the socket's inode and its process.
func TestCollectorRefusesSharedPort(t *testing.T) {
	other, ino := reusePortSocket(t, "127.0.0.1:0")
	defer other.Close()
	port := other.LocalAddr().(*net.UDPAddr).Port
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("0.0.0.0:%d", port), fmt.Sprintf(":%d", port)} {
		_, deps := testDeps(t)
		cfg := testConfig()
		cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: addr, Workers: 2}}
		c, err := New(cfg, deps)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Start()
		if err == nil {
			c.Stop()
			t.Fatalf("%s: started beside another socket on port %d", addr, port)
		}
		for _, want := range []string{fmt.Sprintf("socket inode %d bound to 127.0.0.1:%d", ino, port),
			fmt.Sprintf("pid %d (", os.Getpid()), "this process", "collector.port-sharing: warn"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q lacks %q", addr, err, want)
			}
		}
	}
	// Another address on the same port takes none of the listener's datagrams.
	cfg := testConfig()
	cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: fmt.Sprintf("127.0.0.2:%d", port), Workers: 1}}
	_, deps := testDeps(t)
	c, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("127.0.0.2 beside 127.0.0.1 on one port: %v", err)
	}
	c.Stop()
}

// TestCollectorWarnsSharedPort: with port-sharing: warn the collector starts beside the
// other socket, logs it as an error, counts it and reports itself degraded (503) until the
// socket goes; a socket that comes while it runs is found within a second or so.
func TestCollectorWarnsSharedPort(t *testing.T) {
	other, ino := reusePortSocket(t, "127.0.0.1:0")
	port := other.LocalAddr().(*net.UDPAddr).Port
	logs := &lockedbuf.Buffer{}
	c, _, _ := startTestCollector(t, func(cfg *Configuration) {
		cfg.PortSharing = "warn"
		cfg.Listeners[0].Address = fmt.Sprintf("127.0.0.1:%d", port)
	}, func(d *Dependencies) { d.Logger = slog.New(slog.NewTextHandler(logs, nil)) }, nil)
	defer c.Stop()
	name := fmt.Sprintf("netflow/127.0.0.1:%d", port)
	if !strings.Contains(logs.String(), fmt.Sprintf("inode=%d", ino)) || !strings.Contains(logs.String(), fmt.Sprintf("pid %d (", os.Getpid())) {
		t.Errorf("no error naming the socket and its process:\n%s", logs.String())
	}
	if v := promtest.ToFloat64(c.metrics.foreignSockets.WithLabelValues(name)); v != 1 {
		t.Errorf("foreign sockets %v, want 1", v)
	}
	code, o := healthz(t, c)
	if code != http.StatusServiceUnavailable || o.Status != health.Degraded || o.Components["collector"].Status != health.Degraded ||
		!strings.Contains(o.Components["collector"].Reason, fmt.Sprintf("socket inode %d", ino)) {
		t.Errorf("/healthz %d %+v, want 503 with the collector degraded by the socket", code, o)
	}
	other.Close()
	testutil.WaitUntil(t, "the collector to see the socket gone", func() bool {
		code, _ := healthz(t, c)
		return code == http.StatusOK
	})
	if v := promtest.ToFloat64(c.metrics.foreignSockets.WithLabelValues(name)); v != 0 {
		t.Errorf("foreign sockets %v after it went, want 0", v)
	}

	// One that joins later is found by the poller.
	late, lateIno := reusePortSocket(t, fmt.Sprintf("0.0.0.0:%d", port))
	defer late.Close()
	testutil.WaitUntil(t, "the collector to find the socket that joined its port", func() bool {
		_, o := healthz(t, c)
		return strings.Contains(o.Components["collector"].Reason, fmt.Sprintf("socket inode %d", lateIno))
	})
}

// TestCollectorSecondInProcess: a second collector given the port of a running one does
// not start (the sockets of another collector of the same process are not its own), and
// one started anyway (warn) is seen by the first.
func TestCollectorSecondInProcess(t *testing.T) {
	first, _, _ := newTestCollector(t, nil)
	defer first.Stop()
	addr := first.ListenAddrs()[0].String()
	_, deps := testDeps(t)
	cfg := testConfig()
	cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: addr, Workers: 1}}
	second, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err == nil {
		second.Stop()
		t.Fatal("a second collector started on the first one's port")
	} else if !strings.Contains(err.Error(), "this process") {
		t.Errorf("error %q does not say the socket is this process's", err)
	}
	cfg.PortSharing = "warn"
	_, deps = testDeps(t)
	second, err = New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer second.Stop()
	testutil.WaitUntil(t, "the first collector to see the second", func() bool {
		return first.Health().Status == health.Degraded
	})
	if second.Health().Status != health.Degraded {
		t.Errorf("the second collector reports %+v", second.Health())
	}
}

func TestParseProcAddr(t *testing.T) {
	for _, c := range []struct {
		in   string
		want netip.AddrPort
	}{
		{"0100007F:07EF", netip.MustParseAddrPort("127.0.0.1:2031")},
		{"00000000:0807", netip.MustParseAddrPort("0.0.0.0:2055")},
		{"00000000000000000000000000000000:18CB", netip.MustParseAddrPort("[::]:6347")},
		{"00000000000000000000000001000000:0807", netip.MustParseAddrPort("[::1]:2055")},
		{"0000000000000000FFFF00000100007F:0807", netip.MustParseAddrPort("[::ffff:127.0.0.1]:2055")},
	} {
		got, ok := parseProcAddr(c.in)
		if !ok || got != c.want {
			t.Errorf("parseProcAddr(%q) = %v %v, want %v", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:", "0100007G:0807", "01007F:0807", "0100007F:10000"} {
		if _, ok := parseProcAddr(bad); ok {
			t.Errorf("parseProcAddr(%q) accepted", bad)
		}
	}
	// The test's own socket is listed at its address.
	conn, ino := reusePortSocket(t, "127.0.0.1:0")
	defer conn.Close()
	found := false
	for _, s := range procUDPSockets() {
		if s.inode == ino {
			found = s.local == conn.LocalAddr().(*net.UDPAddr).AddrPort()
		}
	}
	if !found {
		t.Errorf("socket inode %d not listed at %s", ino, conn.LocalAddr())
	}
}

// testConfig is the configuration of startTestCollector: one netflow listener on a free
// loopback port, HTTP on another.
func testConfig() Configuration {
	cfg := DefaultConfiguration()
	cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 2}}
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.BatchInterval = 20 * time.Millisecond
	return cfg
}

// testDeps are the dependencies of startTestCollector: the default schema, the fake
// decoder, a memory sink, a registry of their own.
func testDeps(t *testing.T) (*schema.Schema, Dependencies) {
	t.Helper()
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	return s, Dependencies{Schema: s, Decoders: map[string]Decoder{"netflow": fakeDecoder{}}, Sinks: []output.Sink{&memSink{}},
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: testutil.Clock()}
}
