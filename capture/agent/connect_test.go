package agent

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/internal/capturetest"
	"flowzero/capture/server"
	"flowzero/capture/wire"
	"flowzero/internal/health"
	"flowzero/internal/testutil"
)

// replayConfig configures an agent replaying files to a server, over and over, with a small
// buffer: its sources end only when the agent stops.
func replayConfig(name, srv string, files []string) Configuration {
	cfg := DefaultConfiguration()
	cfg.Name = name
	cfg.Server = srv
	cfg.Replay.Files = files
	cfg.Replay.Loop = 1 << 30
	cfg.FrameSize = 4096
	cfg.BufferSize = 1 << 20
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.Heartbeat = 100 * time.Millisecond
	cfg.ReconnectMin = 10 * time.Millisecond
	cfg.ReconnectMax = 50 * time.Millisecond
	cfg.DrainTimeout = 10 * time.Second
	return cfg
}

// startTokenServer starts a server on loopback that accepts one token.
func startTokenServer(t *testing.T, token string) *server.Server {
	t.Helper()
	cfg := server.DefaultConfiguration()
	cfg.Listen = "127.0.0.1:0"
	cfg.Output.Path = filepath.Join(t.TempDir(), "capture.pcapng")
	cfg.Tokens = []string{token}
	s, err := server.New(prometheus.NewRegistry(), cfg, server.Dependencies{Logger: quiet, Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// countingListener accepts connections on loopback and hands each to answer, counting them.
func countingListener(t *testing.T, answer func(net.Conn)) (addr string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	n := make(chan int, 1)
	n <- 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n <- <-n + 1
			go func() {
				defer c.Close()
				answer(c)
			}()
		}
	}()
	return ln.Addr().String(), func() int {
		v := <-n
		n <- v
		return v
	}
}

// TestUnauthorized runs an agent whose token the server refuses: it stops after the first
// refusal with an error that says so and names the key that keeps it trying; with
// retry-unauthorized it keeps trying.
func TestUnauthorized(t *testing.T) {
	files := capturetest.Captures(t)[:1]
	t.Run("stops", func(t *testing.T) {
		addr, accepted := countingListener(t, func(c net.Conn) {
			if _, err := wire.ReadHello(c); err == nil {
				_, _ = c.Write(wire.AppendWelcome(nil, &wire.Welcome{Version: wire.Version, Status: wire.StatusUnauthorized}))
			}
		})
		a := newAgent(t, replayConfig("intruder", addr, files))
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Done():
		case <-time.After(testutil.WaitTimeout):
			t.Fatalf("the agent did not stop after the server refused its token (%d connections, last error %v)", accepted(), a.LastError())
		}
		err := a.Err()
		var refused RefusedError
		if !errors.As(err, &refused) || refused.Status != wire.StatusUnauthorized ||
			!strings.Contains(err.Error(), "token") || !strings.Contains(err.Error(), "retry-unauthorized") {
			t.Fatalf("Err() = %v, want an unauthorized refusal naming the token and retry-unauthorized", err)
		}
		stopped := time.Now()
		if serr := a.Stop(); !errors.Is(serr, err) && serr != err {
			t.Fatalf("Stop() = %v, want %v", serr, err)
		}
		if d := time.Since(stopped); d > 5*time.Second {
			t.Fatalf("Stop took %v after the agent gave up: it waited to drain a queue nobody sends", d)
		}
		if n := accepted(); n != 1 {
			t.Fatalf("%d connections, want 1: the agent must not retry", n)
		}
		st := a.Stats()
		if st.Connections != 0 || st.Sent != 0 || st.Captured != st.DroppedAgent {
			t.Fatalf("agent stats %+v, want every captured packet dropped", st)
		}
		if n := promtest.ToFloat64(a.metrics.connectErrors[connUnauthorized]); n != 1 {
			t.Fatalf("unauthorized connection errors %v, want 1", n)
		}
	})
	t.Run("retry-unauthorized", func(t *testing.T) {
		s := startTokenServer(t, "right")
		cfg := replayConfig("intruder", s.Addr().String(), files)
		cfg.Token = "wrong"
		cfg.RetryUnauthorized = true
		cfg.DrainTimeout = 100 * time.Millisecond
		a := newAgent(t, cfg)
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		defer a.Stop()
		testutil.WaitUntil(t, "three refusals", func() bool {
			return promtest.ToFloat64(a.metrics.connectErrors[connUnauthorized]) >= 3
		})
		select {
		case <-a.Done():
			t.Fatalf("the agent stopped: %v", a.Err())
		default:
		}
		var refused RefusedError
		if err := a.LastError(); !errors.As(err, &refused) || refused.Status != wire.StatusUnauthorized {
			t.Fatalf("LastError() = %v, want unauthorized", err)
		}
	})
}

// TestConnectErrorsLogLimited has an agent fail to connect many times: every failure is
// counted, at most logBurst lines are logged, first burst included, and /healthz says so.
func TestConnectErrorsLogLimited(t *testing.T) {
	const attempts = 12
	// A server that closes every connection at once.
	addr, accepted := countingListener(t, func(c net.Conn) {})
	logs, logger := capturetest.NewLogs()
	cfg := replayConfig("lonely", addr, capturetest.Captures(t)[:1])
	cfg.ReconnectMax = cfg.ReconnectMin
	cfg.DrainTimeout = 100 * time.Millisecond
	a, err := New(prometheus.NewRegistry(), cfg, Dependencies{Logger: logger, Clock: capturetest.ClockAt(testutil.Now())})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	testutil.WaitUntil(t, strconv.Itoa(attempts)+" attempts", func() bool { return accepted() >= attempts })
	if n := len(logs.Matching("connecting to capture server")); n > logBurst {
		t.Fatalf("%d failed connections logged %d lines, want at most %d:\n%s", accepted(), n, logBurst, logs)
	}
	if n := promtest.ToFloat64(a.metrics.connectErrors[connNoWelcome]); n < attempts-1 {
		t.Fatalf("%v connection errors counted for %d attempts", n, accepted())
	}
	// /healthz: degraded while not connected; the packets dropped at Stop are reported.
	if r := a.Health(); r.Status != health.Degraded || !strings.Contains(r.Reason, "not connected to "+addr) {
		t.Errorf("health while failing to connect: %+v", r)
	}
	_ = a.Stop()
	if r := a.Health(); r.Counters["drops-agent"] == 0 || !strings.Contains(r.Reason, "packets dropped by the agent") {
		t.Errorf("health after dropping the replay: %+v", r)
	}
}

// TestNoWelcome checks what the agent says when a server does not answer its hello with a
// welcome.
func TestNoWelcome(t *testing.T) {
	cases := []struct {
		name   string
		answer func(net.Conn)
		reason connReason
		says   string
	}{
		// A TLS server other than flowzero's: it closes a connection that does not start TLS.
		{"closed", func(c net.Conn) { _, _ = io.ReadFull(c, make([]byte, wire.HelloFixedLen)) }, connNoWelcome,
			"the server closed the connection without answering the hello; if it requires TLS, set tls.enable: true and tls.ca on the agent"},
		// A TLS server that answers with an alert (RFC 8446 section 6: unexpected_message).
		{"tls-alert", func(c net.Conn) {
			_, _ = io.ReadFull(c, make([]byte, wire.HelloFixedLen))
			_, _ = c.Write([]byte{21, 3, 3, 0, 2, 2, 10})
		}, connTLSRequired, "the server answered with TLS: it requires TLS; set tls.enable: true and tls.ca on the agent"},
		// Not a capture server.
		{"http", func(c net.Conn) {
			_, _ = io.ReadFull(c, make([]byte, wire.HelloFixedLen))
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		}, connNoWelcome, `the server's answer starts with "HTTP", not a capture welcome`},
		{"tls-required", func(c net.Conn) {
			if _, err := wire.ReadHello(c); err == nil {
				_, _ = c.Write(wire.AppendWelcome(nil, &wire.Welcome{Version: wire.Version, Status: wire.StatusTLSRequired}))
			}
		}, connTLSRequired, "server refused the agent: TLS required: the server requires TLS; set tls.enable: true and tls.ca on the agent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := countingListener(t, tc.answer)
			a := newAgent(t, replayConfig("probe", addr, []string{"unused.pcap"}))
			_, _, reason, err := a.connect()
			if err == nil || reason != tc.reason || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("connect: reason %s, error %v; want %s and %q", connReasonNames[reason], err, connReasonNames[tc.reason], tc.says)
			}
		})
	}
}
