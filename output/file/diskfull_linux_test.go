package file

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/output"
)

// mountSmallTmpfs mounts a tmpfs of size bytes on a temporary directory and unmounts it when
// the test ends. It skips the test when it cannot (not root, no mount rights).
func mountSmallTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a small tmpfs to fill the disk needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs on %s: %v", dir, err)
	}
	// Registered after TempDir's cleanup, so it runs first: the directory is removed once
	// unmounted.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// TestSinkDiskFullDropsBufferedFlows fills a small tmpfs through the sink's buffer: the flows
// a failed flush loses count as dropped, not written (every flow counted written reads back),
// sent = written + dropped, health is degraded, the write errors are counted and their log
// lines rate-limited.
func TestSinkDiskFullDropsBufferedFlows(t *testing.T) {
	dir := mountSmallTmpfs(t, "64k")
	cfg := DefaultConfiguration()
	cfg.Directory = dir
	cfg.Compression = "none"
	logs := &lockedbuf.Buffer{}
	s, err := New(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(logs, nil)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	pool := output.NewBatchPool(16<<10, 8)
	sent := 0
	for sent < 8000 { // more than the disk holds, less than the sink's buffer
		b := pool.Get()
		for range 100 {
			b.Append(message(sent))
			sent++
		}
		if !s.Send(b) {
			t.Fatal("queue full")
		}
		s.Flush()
	}
	paths, err := ListArchives(dir, cfg.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 {
		t.Errorf("archives %v, want the one the disk filled (the files started to retry are removed empty)", paths)
	}
	readable := countReadable(t, paths)
	// Space again: the flows after it are written to a new file.
	before := s.Health().Counters["flows-written"]
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		b := pool.Get()
		for range 100 {
			b.Append(message(sent))
			sent++
		}
		s.Send(b)
		s.Flush()
	}
	s.Stop()
	if got := s.Health().Counters["flows-written"] - before; got != 1000 {
		t.Errorf("%d flows written once the disk has space, want 1000", got)
	}
	if !strings.Contains(logs.String(), `msg="archive file written again"`) {
		t.Errorf("no line says the archive is written again:\n%s", logs.String())
	}
	paths, _ = ListArchives(dir, cfg.Prefix)
	readable += countReadable(t, paths)
	h := s.Health()
	written, dropped := int(h.Counters["flows-written"]), int(h.Counters["flows-dropped"])
	t.Logf("sent %d, readable %d, health %+v", sent, readable, h)
	if written == 0 || dropped == 0 {
		t.Fatalf("written %d, dropped %d: the disk should have taken some flows and refused others", written, dropped)
	}
	if written > readable {
		t.Errorf("flows-written %d but %d readable on disk", written, readable)
	}
	if written+dropped != sent {
		t.Errorf("written %d + dropped %d != sent %d", written, dropped, sent)
	}
	if v := testutil.ToFloat64(s.metrics.flowsWritten); int(v) != written {
		t.Errorf("flows written metric %v, health %d", v, written)
	}
	if v := testutil.ToFloat64(s.metrics.flowsDropped); int(v) != dropped {
		t.Errorf("flows dropped metric %v, health %d", v, dropped)
	}
	if h.Status != health.Degraded || !strings.Contains(h.Reason, "no space left on device") || h.Counters["write-errors"] == 0 {
		t.Errorf("health %+v after a full disk lost flows", h)
	}
	if v := testutil.ToFloat64(s.metrics.writeErrors); int(v) != int(h.Counters["write-errors"]) {
		t.Errorf("write errors metric %v, health %d", v, h.Counters["write-errors"])
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n < 1 || n > 3 {
		t.Errorf("%d error lines for %d write errors, want 1 to 3:\n%s", n, h.Counters["write-errors"], logs.String())
	}
}

// countReadable returns the messages read from the archives at paths, up to the first error
// of each (the record a full disk cut short).
func countReadable(t *testing.T, paths []string) int {
	t.Helper()
	n := 0
	for _, p := range paths {
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := r.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Logf("%s: %v (the record the disk cut short)", p, err)
				}
				break
			}
			n++
		}
		r.Close()
	}
	return n
}
