//go:build linux

package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/internal/capturetest"
	"flowzero/internal/testutil"
)

// openFDs counts the descriptors of this process open on path.
func openFDs(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == path {
			n++
		}
	}
	return n
}

// TestIdleClose has an agent replay, leave and come back with output.per-agent: once idle for
// output.idle-close its file is closed, its state and metric series forgotten, and when it
// comes back its file gets a second section instead of being truncated.
func TestIdleClose(t *testing.T) {
	files := capturetest.Captures(t)
	cfg := testServerConfig(t)
	cfg.Output.PerAgent = true
	cfg.Output.IdleClose = time.Hour // the test moves the server's clock past it
	clk := capturetest.NewClock()
	s := startServerWith(t, cfg, Dependencies{Clock: clk})
	defer s.Stop()
	path := filepath.Join(filepath.Dir(cfg.Output.Path), "capture-ephemeral.pcapng")
	leave := func() {
		t.Helper()
		testutil.WaitUntil(t, "the agent's connection to end", func() bool { return agentGone(s, "ephemeral") })
		if forgotten(s, "ephemeral") {
			t.Fatal("the agent was forgotten before idle-close")
		}
		clk.Advance(cfg.Output.IdleClose)
		testutil.WaitUntil(t, "the idle agent to be forgotten", func() bool { return forgotten(s, "ephemeral") })
	}

	// The descriptor count sees an open file.
	probe := filepath.Join(t.TempDir(), "probe")
	f, err := os.Create(probe)
	if err != nil {
		t.Fatal(err)
	}
	if n := openFDs(t, probe); n != 1 {
		t.Fatalf("%d descriptors seen on an open file", n)
	}
	f.Close()

	waitDone(t, startAgent(t, testAgentConfig("ephemeral", s.Addr().String(), files)))
	leave()
	if n := openFDs(t, path); n != 0 {
		t.Fatalf("%d descriptors still open on the idle agent's file", n)
	}
	if n := promtest.CollectAndCount(s.metrics.packets) + promtest.CollectAndCount(s.metrics.drops); n != 0 {
		t.Fatalf("%d metric series left for the forgotten agent", n)
	}
	want := capturetest.Expected(t, "ephemeral", files)
	capturetest.Compare(t, capturetest.ReadPcapng(t, path), want)

	waitDone(t, startAgent(t, testAgentConfig("ephemeral", s.Addr().String(), files)))
	leave()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	capturetest.Compare(t, capturetest.ReadPcapng(t, path), capturetest.Repeat(want, 2))
}
