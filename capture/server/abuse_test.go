package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/agent"
	"flowzero/capture/internal/capturetest"
	"flowzero/capture/wire"
	"flowzero/internal/testutil"
)

// startLoggedServer starts a server whose log lines the test reads, on a clock stopped at the
// test clock's time (its log limiters' windows move only when the test advances it), with a
// handshake timeout of handshake.
func startLoggedServer(t *testing.T, cfg Configuration, handshake time.Duration) (*Server, *capturetest.Logs, *capturetest.Clock) {
	t.Helper()
	logs, logger := capturetest.NewLogs()
	clk := capturetest.ClockAt(testutil.Now())
	s, err := New(nil, cfg, testDeps(Dependencies{Logger: logger, Clock: clk}))
	if err != nil {
		t.Fatal(err)
	}
	s.handshakeTimeout = handshake
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s, logs, clk
}

// errorsCount returns errors_total for reason.
func errorsCount(s *Server, reason string) int {
	return int(promtest.ToFloat64(s.metrics.errors.WithLabelValues(reason)))
}

// byReason returns the log lines of reason.
func byReason(logs *capturetest.Logs, reason string) []capturetest.LogRecord {
	var out []capturetest.LogRecord
	for _, r := range logs.Records() {
		if r.Attrs["reason"] == reason {
			out = append(out, r)
		}
	}
	return out
}

// garbage is what a port scanner or a misdirected client sends: not a hello.
var garbage = []byte("GET / HTTP/1.1\r\nHost: capture\r\nUser-Agent: scanner\r\n\r\n")

// TestGarbageConnectionsLogLimited opens 5,000 connections that send garbage (issue 24 saw
// as many INFO lines): every one is counted (errors_total{reason="bad-hello"}), at most
// connLogBurst lines are logged, first burst included, and once the window has passed the
// next line says how many were suppressed.
func TestGarbageConnectionsLogLimited(t *testing.T) {
	const n = 5000
	s, logs, clk := startLoggedServer(t, testServerConfig(t), handshakeTimeout)
	addr := s.Addr().String()
	garbageConns(t, addr, n)
	testutil.WaitUntil(t, "every garbage connection counted", func() bool { return errorsCount(s, "bad-hello") == n })
	if got := len(logs.Records()); got > connLogBurst {
		t.Fatalf("%d garbage connections logged %d lines, want at most %d:\n%s", n, got, connLogBurst, logs)
	}
	clk.Advance(connLogWindow)
	garbageConns(t, addr, 1)
	testutil.WaitUntil(t, "the line after the window", func() bool { return len(logs.Records()) == connLogBurst+1 })
	last := logs.Records()[connLogBurst]
	if last.Attrs["suppressed"] != strconv.Itoa(n-connLogBurst) || last.Attrs["reason"] != "bad-hello" || last.Attrs["remote"] == "" {
		t.Fatalf("line after the window: %+v, want reason bad-hello, the remote address and suppressed=%d", last, n-connLogBurst)
	}
}

// garbageConns opens n connections to addr, from 8 goroutines, each sending garbage and
// closing.
func garbageConns(t *testing.T, addr string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < n; i += 8 {
				c, err := net.DialTimeout("tcp", addr, testutil.WaitTimeout)
				if err != nil {
					errs <- err
					return
				}
				_, _ = c.Write(garbage)
				_ = c.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestAbusiveClients runs clients that misbehave in each way the server must survive, several
// times each: the server closes their connection, counts every one under its reason, logs at
// most connLogBurst lines for them, and keeps no connection.
func TestAbusiveClients(t *testing.T) {
	const n = 12
	var agents atomic.Int64
	// hello connects as an agent of its own name (the same name would take over).
	hello := func(t *testing.T, c net.Conn) {
		t.Helper()
		name := fmt.Sprintf("abuser%d", agents.Add(1))
		h, err := wire.AppendHello(nil, &wire.Hello{Version: wire.Version, AgentID: 1, AgentName: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(h); err != nil {
			t.Fatal(err)
		}
		var b [wire.WelcomeLen]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			t.Fatalf("reading welcome: %v", err)
		}
	}
	header := func(length uint32) []byte {
		h := make([]byte, wire.FrameHeaderLen)
		wire.PutFrameHeader(h, &wire.FrameHeader{Length: length, RawLength: length, Records: 1, Seq: 1})
		return h
	}
	cases := []struct {
		name   string
		reason string
		// abuse misbehaves on c; close says whether the client closes c itself after.
		abuse func(t *testing.T, c net.Conn)
		close bool
	}{
		// A client that sends a few bytes of a hello and then nothing.
		{"slow-hello", "handshake-timeout", func(t *testing.T, c net.Conn) { _, _ = c.Write([]byte("FZC")) }, false},
		// An agent that goes away in the middle of a frame.
		{"disconnect-mid-frame", "truncated-frame", func(t *testing.T, c net.Conn) {
			hello(t, c)
			_, _ = c.Write(append(header(1000), make([]byte, 100)...))
		}, true},
		// An agent that starts a frame and never finishes it (a slow-loris past the handshake).
		{"stalled-frame", "idle-timeout", func(t *testing.T, c net.Conn) {
			hello(t, c)
			_, _ = c.Write(append(header(1000), make([]byte, 100)...))
		}, false},
		// A frame announcing more than wire.MaxFramePayload.
		{"oversized-frame", "frame-too-long", func(t *testing.T, c net.Conn) {
			hello(t, c)
			_, _ = c.Write(header(wire.MaxFramePayload + 1))
		}, false},
		// A frame header whose lengths disagree.
		{"bad-frame-header", "bad-frame", func(t *testing.T, c net.Conn) {
			hello(t, c)
			h := header(100)
			binary.LittleEndian.PutUint32(h[16:], 50)
			_, _ = c.Write(h)
		}, false},
		// A hello whose name is longer than the hello.
		{"malformed-hello", "bad-hello", func(t *testing.T, c net.Conn) {
			h, _ := wire.AppendHello(nil, &wire.Hello{Version: wire.Version, AgentID: 1, AgentName: "abuser"})
			binary.LittleEndian.PutUint16(h[16:], 0)
			_, _ = c.Write(h)
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Only the timeout a case waits for is short: a client slower than it before its
			// next write would end as timed out instead of as its case.
			cfg := testServerConfig(t)
			cfg.IdleTimeout = testutil.WaitTimeout
			handshake := testutil.WaitTimeout
			switch tc.reason {
			case "handshake-timeout":
				handshake = 300 * time.Millisecond
			case "idle-timeout":
				cfg.IdleTimeout = 300 * time.Millisecond
			}
			s, logs, _ := startLoggedServer(t, cfg, handshake)
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					c, err := net.DialTimeout("tcp", s.Addr().String(), testutil.WaitTimeout)
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					tc.abuse(t, c)
					if tc.close {
						return
					}
					// The server closes the connection: the client reads its end.
					_ = c.SetReadDeadline(time.Now().Add(testutil.WaitTimeout))
					if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
						t.Errorf("waiting for the server to close: %v", err)
					}
				})
			}
			wg.Wait()
			testutil.WaitUntil(t, fmt.Sprintf("%d connections counted as %s", n, tc.reason), func() bool { return errorsCount(s, tc.reason) == n })
			testutil.WaitUntil(t, "no connection left", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.conns) == 0
			})
			if lines := len(logs.Records()); lines < 1 || lines > connLogBurst || lines != len(byReason(logs, tc.reason)) {
				t.Fatalf("%d lines logged for %d connections, want 1 to %d, all with reason %s:\n%s", lines, n, connLogBurst, tc.reason, logs)
			}
		})
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// TestSilentConnectionsEvicted fills the server's connections (max-agents and 64 more) with
// clients that say nothing: an agent connecting next takes the place of the oldest of them
// (counted as evicted) instead of being turned away.
func TestSilentConnectionsEvicted(t *testing.T) {
	cfg := testServerConfig(t)
	cfg.MaxAgents = 1
	s, logs, _ := startLoggedServer(t, cfg, time.Hour)
	silent := make([]net.Conn, cfg.MaxAgents+maxExtraHandshakes)
	for i := range silent {
		c, err := net.DialTimeout("tcp", s.Addr().String(), testutil.WaitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent[i] = c
	}
	testutil.WaitUntil(t, "the silent connections accepted", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == len(silent)
	})
	ra, wel := dialRaw(t, s.Addr().String(), "agent", 1)
	if wel.Status != wire.StatusOK {
		t.Fatalf("agent after silent connections: %v", wel.Status)
	}
	ra.send(1, interfaceRecord(t, 0, "eth0"))
	ra.waitAck(1)
	testutil.WaitUntil(t, "an eviction counted", func() bool { return errorsCount(s, "evicted") == 1 })
	// The oldest silent connection was the one closed.
	_ = silent[0].SetReadDeadline(time.Now().Add(testutil.WaitTimeout))
	if _, err := silent[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("the oldest silent connection is still open")
	}
	if lines := byReason(logs, "evicted"); len(lines) != 1 {
		t.Fatalf("eviction lines:\n%s", logs)
	}
}

// TestTLSMismatch connects an agent and a server that disagree about TLS: each side says
// which one expects TLS and which key to set, and the server counts the connections.
func TestTLSMismatch(t *testing.T) {
	files := capturetest.Captures(t)[:1]
	pki := capturetest.NewPKI(t, testutil.Now())
	cases := []struct {
		name      string
		serverTLS TLSConfiguration
		agentTLS  agent.TLSConfiguration
		reason    string // errors_total's
		agentSays string // in the agent's error
		logSays   string // in the server's line
	}{
		{"agent-without-tls", TLSConfiguration{Enable: true, Cert: pki.ServerCert, Key: pki.ServerKey}, agent.TLSConfiguration{},
			"not-tls", "the server requires TLS; set tls.enable: true and tls.ca on the agent",
			"connected without TLS but this listener requires TLS: set tls.enable: true and tls.ca on the agent"},
		{"agent-with-tls", TLSConfiguration{}, agent.TLSConfiguration{Enable: true, CA: pki.CA},
			"unexpected-tls", "the server answered without TLS: it does not serve TLS; set tls.enable: false on the agent, or tls.enable, tls.cert and tls.key on the server",
			"the agent speaks TLS but this listener does not: set tls.enable, tls.cert and tls.key on the server, or tls.enable: false on the agent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testServerConfig(t)
			cfg.TLS = tc.serverTLS
			s, logs, _ := startLoggedServer(t, cfg, handshakeTimeout)
			acfg := testAgentConfig("mismatch", s.Addr().String(), files)
			acfg.TLS = tc.agentTLS
			acfg.DrainTimeout = 100 * time.Millisecond
			a := startAgent(t, acfg)
			testutil.WaitUntil(t, "the agent's error", func() bool {
				err := a.LastError()
				return err != nil && strings.Contains(err.Error(), tc.agentSays)
			})
			testutil.WaitUntil(t, "the server's line", func() bool {
				lines := byReason(logs, tc.reason)
				return len(lines) > 0 && strings.Contains(lines[0].Msg, tc.logSays)
			})
			_ = a.Stop()
			if n := errorsCount(s, tc.reason); n < 1 {
				t.Fatalf("%s connections counted %d times", tc.reason, n)
			}
			if st := a.Stats(); st.Connections != 0 || st.Sent != 0 {
				t.Fatalf("agent stats %+v", st)
			}
			// The agent retries until it stops: a connection it opened just before stopping
			// closes before its hello (bad-hello, EOF), which is not a mismatch line.
			for _, r := range logs.Records() {
				if r.Attrs["reason"] != tc.reason && !(r.Attrs["reason"] == "bad-hello" && r.Attrs["error"] == "EOF") {
					t.Fatalf("lines of other reasons:\n%s", logs)
				}
			}
		})
	}
}
