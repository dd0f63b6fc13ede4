package server

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/capture/agent"
	"flowzero/capture/internal/capturetest"
	"flowzero/internal/testutil"
)

var quiet = capturetest.Quiet

func testServerConfig(t testing.TB) Configuration {
	cfg := DefaultConfiguration()
	cfg.Listen = "127.0.0.1:0"
	cfg.Output.Path = filepath.Join(t.TempDir(), "capture.pcapng")
	cfg.Output.FlushInterval = 20 * time.Millisecond
	cfg.IdleTimeout = 5 * time.Second
	return cfg
}

// testDeps fills what deps leaves unset: a quiet logger, the tests' clock.
func testDeps(deps Dependencies) Dependencies {
	if deps.Logger == nil {
		deps.Logger = quiet
	}
	if deps.Clock == nil {
		deps.Clock = testutil.Clock()
	}
	return deps
}

func startServer(t testing.TB, cfg Configuration) *Server {
	t.Helper()
	return startServerWith(t, cfg, Dependencies{})
}

func startServerWith(t testing.TB, cfg Configuration, deps Dependencies) *Server {
	t.Helper()
	s, err := New(prometheus.NewRegistry(), cfg, testDeps(deps))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func testAgentConfig(name, server string, files []string) agent.Configuration {
	cfg := agent.DefaultConfiguration()
	cfg.Name = name
	cfg.Server = server
	cfg.Replay.Files = files
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.Heartbeat = 100 * time.Millisecond
	cfg.ReconnectMin = 10 * time.Millisecond
	cfg.ReconnectMax = 200 * time.Millisecond
	cfg.DrainTimeout = 10 * time.Second
	return cfg
}

func newAgent(t testing.TB, cfg agent.Configuration) *agent.Agent {
	t.Helper()
	a, err := agent.New(prometheus.NewRegistry(), cfg, agent.Dependencies{Logger: quiet, Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func startAgent(t testing.TB, cfg agent.Configuration) *agent.Agent {
	t.Helper()
	a := newAgent(t, cfg)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	return a
}

// waitDone waits for a replaying agent's sources to finish, then stops it.
func waitDone(t testing.TB, a *agent.Agent) agent.Stats {
	t.Helper()
	select {
	case <-a.Done():
		if err := a.Err(); err != nil {
			t.Fatalf("agent sources: %v", err)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("agent did not finish its replay")
	}
	if err := a.Stop(); err != nil {
		t.Fatalf("agent stop: %v", err)
	}
	return a.Stats()
}

// agentGone reports whether the server knows agent name without a connection.
func agentGone(s *Server, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.agents[name]
	return st != nil && st.conn == nil
}

// forgotten reports whether the server has forgotten agent name (or never knew it).
func forgotten(s *Server, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agents[name] == nil
}
