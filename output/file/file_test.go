package file

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/output"
)

// message returns a fake length-delimited flow message whose payload encodes i.
func message(i int) []byte {
	payload := []byte(fmt.Sprintf("flow-%06d", i))
	return append(binary.AppendUvarint(nil, uint64(len(payload))), payload...)
}

func readAll(t *testing.T, paths []string) []string {
	t.Helper()
	var got []string
	for _, p := range paths {
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for {
			m, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			got = append(got, string(m))
		}
		r.Close()
	}
	return got
}

func TestSinkRoundTrip(t *testing.T) {
	for _, comp := range []string{"none", "zstd", "gzip"} {
		t.Run(comp, func(t *testing.T) {
			cfg := DefaultConfiguration()
			cfg.Directory = t.TempDir()
			cfg.Compression = comp
			cfg.RotateSize = 1000 // forces several files
			cfg.MaxFiles = 0
			s, err := New(prometheus.NewRegistry(), nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			pool := output.NewBatchPool(512, 8)
			const total = 500
			for i := 0; i < total; {
				b := pool.Get()
				for j := 0; j < 10 && i < total; j, i = j+1, i+1 {
					b.Append(message(i))
				}
				if !s.Send(b) {
					s.Flush() // the test wants no drop: wait for the writer and retry
					b2 := pool.Get()
					t.Fatalf("queue full with default queue size (batch %p)", b2)
				}
			}
			s.Stop()
			files, err := ListArchives(cfg.Directory, cfg.Prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) < 5 {
				t.Fatalf("%d files, want size rotation to make several", len(files))
			}
			got := readAll(t, files)
			if len(got) != total {
				t.Fatalf("read %d messages, want %d", len(got), total)
			}
			for i, m := range got {
				if want := fmt.Sprintf("flow-%06d", i); m != want {
					t.Fatalf("message %d = %q, want %q", i, m, want)
				}
			}
			if v := testutil.ToFloat64(s.metrics.flowsWritten); v != total {
				t.Fatalf("flows written metric %v", v)
			}
		})
	}
}

func TestSinkMaxFilesAndTimeRotation(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.Directory = t.TempDir()
	cfg.Compression = "none"
	cfg.RotateInterval = time.Minute
	cfg.MaxFiles = 2
	s, err := New(nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return clock }
	s.Start()
	pool := output.NewBatchPool(64, 2)
	for i := range 4 {
		b := pool.Get()
		b.Append(message(i))
		s.Send(b)
		s.Flush()
		clock = clock.Add(61 * time.Second)
	}
	s.Stop()
	files, _ := ListArchives(cfg.Directory, cfg.Prefix)
	if len(files) != 2 {
		t.Fatalf("files %v, want the 2 newest", files)
	}
	if filepath.Base(files[0]) != "flows-20261122T100202.000Z.pb" || filepath.Base(files[1]) != "flows-20261122T100303.000Z.pb" {
		t.Fatalf("unexpected names %v", files)
	}
	if got := readAll(t, files); len(got) != 2 || got[0] != "flow-000002" || got[1] != "flow-000003" {
		t.Fatalf("got %v", got)
	}
}

func TestSinkQueueFullCounted(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.Directory = t.TempDir()
	cfg.QueueSize = 1
	s, _ := New(nil, nil, cfg) // not started: nothing drains the queue
	pool := output.NewBatchPool(64, 2)
	b1, b2 := pool.Get(), pool.Get()
	b1.Append(message(1))
	b2.Append(message(2))
	b2.Append(message(3))
	if !s.Send(b1) || s.Send(b2) {
		t.Fatal("first send must queue, second must drop")
	}
	if v := testutil.ToFloat64(s.metrics.flowsDropped); v != 2 {
		t.Fatalf("flows dropped %v, want 2", v)
	}
}

func TestReaderCorrupt(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]byte{
		"truncated-message": append(message(1), 0x05, 'a'),
		"huge-length":       {0xff, 0xff, 0xff, 0xff, 0x0f},
		"truncated-varint":  append(message(1), 0x80),
	}
	for name, data := range cases {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var err2 error
		for err2 == nil {
			_, err2 = r.Next()
		}
		if errors.Is(err2, io.EOF) && !bytes.Equal(data, message(1)) {
			t.Errorf("%s: clean EOF on a corrupt file", name)
		}
		r.Close()
	}
	if _, err := New(nil, nil, Configuration{Directory: "x", QueueSize: 1, Compression: "lzma"}); err == nil ||
		err.Error() != `compression: must be none, zstd or gzip, not "lzma"` {
		t.Fatalf("bad compression error: %v", err)
	}
}

// TestOpenChecksCompressionOfName checks that an archive named .zst or .gz must start with
// that compression's magic number, while a name without either suffix is detected.
func TestOpenChecksCompressionOfName(t *testing.T) {
	dir := t.TempDir()
	plain := []byte{3, 'a', 'b', 'c', 1, 'd'} // two length-delimited messages
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"flows.pb.zst", false},
		{"flows.pb.gz", false},
		{"flows.pb", true},
		{"empty.pb.zst", true}, // the sink's file before its first flush
	} {
		p := filepath.Join(dir, tc.name)
		content := plain
		if strings.HasPrefix(tc.name, "empty") {
			content = nil
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(p)
		if (err == nil) != tc.ok {
			t.Fatalf("%s holding plain messages: error %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "magic number") {
				t.Errorf("%s: error %q does not say why", tc.name, err)
			}
			continue
		}
		var got []string
		for {
			m, err := r.Next()
			if err != nil {
				if err != io.EOF {
					t.Fatalf("%s: %v after %q", tc.name, err, got)
				}
				break
			}
			got = append(got, string(m))
		}
		if want := map[bool]string{true: "[]", false: "[abc d]"}[content == nil]; fmt.Sprint(got) != want {
			t.Errorf("%s: messages %q, want %s", tc.name, got, want)
		}
		r.Close()
	}
}

// TestSinkUnwritableReported: a directory that becomes unwritable while the sink runs (here
// replaced by a regular file) drops every batch, and says so: counted, logged a bounded
// number of times with the directory and the count, health degraded with the reason; the
// write-error and drop series exist from the start at 0.
func TestSinkUnwritableReported(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.Directory = filepath.Join(t.TempDir(), "flows")
	reg := prometheus.NewRegistry()
	logs := &lockedbuf.Buffer{}
	s, err := New(reg, slog.New(slog.NewTextHandler(logs, nil)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"flowzero_file_write_errors_total", "flowzero_file_flows_dropped_total"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Errorf("%s: %d series before any error (%v), want 1 at 0", name, n, err)
		}
	}
	s.Start()
	if h := s.Health(); h.Status != health.OK {
		t.Fatalf("health at start %+v", h)
	}
	if err := os.RemoveAll(cfg.Directory); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Directory, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := output.NewBatchPool(64, 4)
	const batches = 50
	for i := range batches {
		b := pool.Get()
		b.Append(message(i))
		b.Append(message(i))
		s.Send(b)
		s.Flush()
	}
	h := s.Health()
	if h.Status != health.Degraded || !strings.Contains(h.Reason, "cannot open an archive file") ||
		!strings.Contains(h.Reason, "100 flows dropped since start") || h.Counters["flows-dropped"] != 100 || h.Counters["write-errors"] != batches {
		t.Errorf("health %+v", h)
	}
	s.Stop()
	if v := testutil.ToFloat64(s.metrics.flowsDropped); v != 100 {
		t.Errorf("flows dropped %v, want 100", v)
	}
	n := strings.Count(logs.String(), `msg="cannot open an archive file, flows dropped"`)
	if n < 1 || n > 3 || !strings.Contains(logs.String(), "directory="+cfg.Directory) {
		t.Errorf("%d error lines for %d failed batches, want 1 to 3 naming the directory:\n%s", n, batches, logs.String())
	}
}

// TestSinkFlushedReadableWithoutClose: a collector that dies after Flush leaves its file
// unclosed (an unfinished zstd or gzip stream); every message flushed before reads back.
func TestSinkFlushedReadableWithoutClose(t *testing.T) {
	for _, comp := range []string{"none", "zstd", "gzip"} {
		t.Run(comp, func(t *testing.T) {
			cfg := DefaultConfiguration()
			cfg.Directory = t.TempDir()
			cfg.Compression = comp
			s, err := New(prometheus.NewRegistry(), nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			pool := output.NewBatchPool(4096, 8)
			total := 0
			for range 20 {
				b := pool.Get()
				for range 50 {
					b.Append(message(total))
					total++
				}
				s.Send(b)
				s.Flush()
			}
			p := s.CurrentPath()
			data, err := os.ReadFile(p) // as a crash leaves it: not closed
			if err != nil {
				t.Fatal(err)
			}
			r, err := newReader(bytes.NewReader(data), p)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				m, err := r.Next()
				if err != nil {
					break
				}
				if want := fmt.Sprintf("flow-%06d", n); string(m) != want {
					t.Fatalf("message %d = %q, want %q", n, m, want)
				}
				n++
			}
			if n != total {
				t.Errorf("%d of %d flushed messages read from the unclosed file", n, total)
			}
			if h := s.Health(); h.Counters["flows-written"] != uint64(total) {
				t.Errorf("flows-written %d after Flush, want %d", h.Counters["flows-written"], total)
			}
		})
	}
}

// TestSinkPruneKeepsOtherPrefixesAndCurrentFile: max-files counts and removes only the
// sink's own files, never another prefix starting with its own (flows-edge for flows) nor
// the file being written, even when a clock set back makes it sort first.
func TestSinkPruneKeepsOtherPrefixesAndCurrentFile(t *testing.T) {
	dir := t.TempDir()
	keep := []string{
		"flows-edge-20260101T000000.000Z.pb", "flows-edge-20260101T010000.000Z.pb", // another prefix
		"flows-notes.txt", "flows-20260101T000000.000Z.pb.tmp", "flows-2026.pb", // not archives
	}
	own := []string{"flows-20261122T090000.000Z.pb", "flows-20261122T110000.000Z.pb.zst", "flows-20261122T120000.000Z.pb.gz"}
	for _, n := range append(append([]string{}, keep...), own...) {
		if err := os.WriteFile(filepath.Join(dir, n), message(0), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfiguration()
	cfg.Directory = dir
	cfg.Compression = "none"
	cfg.MaxFiles = 2
	s, err := New(prometheus.NewRegistry(), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) } // before two of its files
	s.Start()
	pool := output.NewBatchPool(4096, 8)
	b := pool.Get()
	b.Append(message(1))
	s.Send(b)
	current := s.CurrentPath()
	s.Stop()
	files, err := ListArchives(dir, cfg.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	// The oldest files go first, the current one staying whatever its place.
	want := []string{current, filepath.Join(dir, own[2])}
	if fmt.Sprint(files) != fmt.Sprint(want) {
		t.Errorf("archives after prune %v, want %v", files, want)
	}
	if got := readAll(t, []string{current}); len(got) != 1 || got[0] != "flow-000001" {
		t.Errorf("current file holds %q", got)
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s is not the sink's and was removed: %v", n, err)
		}
	}
}

func TestIsArchiveName(t *testing.T) {
	for name, want := range map[string]bool{
		"flows-20261122T100000.000Z.pb":      true,
		"flows-20261122T100000.000Z.pb.zst":  true,
		"flows-20261122T100000.000Z.pb.gz":   true,
		"flows-edge-20261122T100000.000Z.pb": false,
		"flows-20261122T100000.000Z.pb.tmp":  false,
		"flows-20261122T100000.000Z.gz":      false,
		"flows-20261122T100000Z.pb":          false,
		"flows-20261322T100000.000Z.pb":      false, // month 13
		"flows-2026112xT100000.000Z.pb":      false,
		"flows20261122T100000.000Z.pb":       false,
		"-20261122T100000.000Z.pb":           false,
	} {
		if got := IsArchiveName(name, "flows"); got != want {
			t.Errorf("IsArchiveName(%q, flows) = %v, want %v", name, got, want)
		}
	}
	if !IsArchiveName("flows-edge-20261122T100000.000Z.pb", "flows-edge") {
		t.Error("flows-edge's own file not matched")
	}
}
