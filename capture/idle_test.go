//go:build linux

package capture

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
	files := allCaptures(t)
	cfg := testServerConfig(t)
	cfg.Output.PerAgent = true
	cfg.Output.IdleClose = 100 * time.Millisecond
	s := startServer(t, cfg)
	defer s.Stop()
	path := filepath.Join(filepath.Dir(cfg.Output.Path), "capture-ephemeral.pcapng")
	forgotten := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.agents["ephemeral"] == nil
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
	eventually(t, "the idle agent to be forgotten", forgotten)
	if n := openFDs(t, path); n != 0 {
		t.Fatalf("%d descriptors still open on the idle agent's file", n)
	}
	if n := testutil.CollectAndCount(s.metrics.packets) + testutil.CollectAndCount(s.metrics.drops); n != 0 {
		t.Fatalf("%d metric series left for the forgotten agent", n)
	}
	want := expectedFrames(t, "ephemeral", files)
	compareFrames(t, readPcapng(t, path), want)

	waitDone(t, startAgent(t, testAgentConfig("ephemeral", s.Addr().String(), files)))
	eventually(t, "the agent to be forgotten again", forgotten)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	compareFrames(t, readPcapng(t, path), repeatFrames(want, 2))
}
