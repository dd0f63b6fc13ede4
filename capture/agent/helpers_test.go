package agent

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/capture/internal/capturetest"
	"flowzero/capture/server"
	"flowzero/internal/testutil"
)

var quiet = capturetest.Quiet

// startServer starts a capture server on loopback writing to a file in the test's folder.
func startServer(t testing.TB) (*server.Server, server.Configuration) {
	t.Helper()
	cfg := server.DefaultConfiguration()
	cfg.Listen = "127.0.0.1:0"
	cfg.Output.Path = filepath.Join(t.TempDir(), "capture.pcapng")
	cfg.Output.FlushInterval = 20 * time.Millisecond
	s, err := server.New(prometheus.NewRegistry(), cfg, server.Dependencies{Logger: quiet, Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s, cfg
}

// liveConfig configures an agent capturing on interfaces for a server.
func liveConfig(name, server string, interfaces ...string) Configuration {
	cfg := DefaultConfiguration()
	cfg.Name = name
	cfg.Server = server
	cfg.Live.Interfaces = interfaces
	cfg.Live.RingSize = 4 << 20
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.Heartbeat = 100 * time.Millisecond
	cfg.ReconnectMin = 10 * time.Millisecond
	cfg.ReconnectMax = 200 * time.Millisecond
	return cfg
}

func newAgent(t testing.TB, cfg Configuration) *Agent {
	t.Helper()
	a, err := New(prometheus.NewRegistry(), cfg, Dependencies{Logger: quiet, Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
