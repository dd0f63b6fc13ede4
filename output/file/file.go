// Package file is the collector's archive sink: it writes the flows as a stream of
// length-delimited protobuf messages (the same bytes sent to Kafka, readable with
// ClickHouse's Protobuf format or Reader below), rotating files by size and time and keeping a
// bounded number of them, optionally compressed with zstd or gzip.
//
// One goroutine owns the open file; workers hand it batches through a bounded queue and never
// wait on the disk: a batch that finds the queue full is dropped and counted.
package file

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/clock"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
	"flowzero/output"
)

// Sink writes batches to rotated archive files.
type Sink struct {
	cfg     Configuration
	log     *slog.Logger
	metrics *metrics
	queue   chan *output.Batch
	flushed chan chan struct{}
	wg      sync.WaitGroup
	now     func() time.Time
	health  *health.State

	// counts are the flows written and dropped and the write errors, for the health
	// report, beside the Prometheus counters.
	counts struct{ written, dropped, writeErrors atomic.Int64 }
	// queueDrops counts the flows dropped on a full queue and not logged yet (the workers
	// count them; the writer logs them).
	queueDrops atomic.Int64
	// errLog limits the writer's error lines: a directory that became unwritable fails
	// every batch.
	errLog *lograte.Limiter

	// Owned by the writer goroutine.
	f       *os.File
	bw      *bufio.Writer
	comp    io.WriteCloser // zstd or gzip layer, nil for none
	out     io.Writer      // where batches go: comp or bw
	path    string
	written int64
	opened  time.Time
}

// New returns a file sink. It does not touch the disk until Start.
func New(r prometheus.Registerer, log *slog.Logger, cfg Configuration) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Sink{
		cfg:     cfg,
		log:     log.With("sink", "file"),
		queue:   make(chan *output.Batch, cfg.QueueSize),
		flushed: make(chan chan struct{}),
		now:     time.Now,
		health:  health.NewState(nil),
		errLog:  lograte.New(3, time.Minute),
	}
	s.metrics = newMetrics(r, s)
	return s, nil
}

// SetClock sets the clock that dates the archive files, their rotation and the health report
// (clock.System{} by default). Call it before Start.
func (s *Sink) SetClock(c clock.Clock) {
	c = clock.Or(c)
	s.now = c.Now
	s.health.SetClock(c)
}

// Health implements health.Reporter: degraded for health.Hold after a batch was dropped
// (queue full, or a file that could not be opened or written).
func (s *Sink) Health() health.Report {
	r := s.health.Report()
	r.Counters = map[string]uint64{
		"flows-written": uint64(s.counts.written.Load()), "flows-dropped": uint64(s.counts.dropped.Load()),
		"write-errors": uint64(s.counts.writeErrors.Load()),
	}
	return r
}

// writeFailed counts a batch of flows lost to a write error and logs it, rate-limited.
func (s *Sink) writeFailed(flows int, msg string, err error) {
	s.metrics.writeErrors.Inc()
	s.metrics.batchesDropped.Inc()
	s.metrics.flowsDropped.Add(float64(flows))
	s.counts.writeErrors.Add(1)
	s.counts.dropped.Add(int64(flows))
	s.health.Event(fmt.Sprintf("%s: %v; %d flows dropped since start", msg, err, s.counts.dropped.Load()))
	if ok, suppressed := s.errLog.Allow(s.now()); ok {
		s.log.Error(msg+", batch dropped", "path", s.path, "directory", s.cfg.Directory, "flows", flows,
			"error", err, "flows-dropped-total", s.counts.dropped.Load(), "suppressed", suppressed)
	}
}

// Name implements output.Sink.
func (s *Sink) Name() string { return "file" }

// Start creates the directory and starts the writer.
func (s *Sink) Start() error {
	if err := os.MkdirAll(s.cfg.Directory, 0o755); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	s.wg.Add(1)
	go s.run()
	return nil
}

// Send queues a batch without blocking; it must not be called after Stop.
func (s *Sink) Send(b *output.Batch) bool {
	select {
	case s.queue <- b:
		return true
	default:
		s.metrics.batchesDropped.Inc()
		s.metrics.flowsDropped.Add(float64(b.Flows))
		s.counts.dropped.Add(int64(b.Flows))
		s.queueDrops.Add(int64(b.Flows))
		s.health.Event("write queue full: the disk is slower than the flows")
		b.Release()
		return false
	}
}

// Flush waits until every batch queued before the call is written and flushed to the file
// (compressed frames included), so a reader sees them.
func (s *Sink) Flush() {
	done := make(chan struct{})
	s.flushed <- done
	<-done
}

// Stop writes everything queued, closes the current file and returns.
func (s *Sink) Stop() error {
	close(s.queue)
	s.wg.Wait()
	return nil
}

// CurrentPath returns the file being written ("" before the first batch). For tests and the
// API.
func (s *Sink) CurrentPath() string {
	done := make(chan struct{})
	s.flushed <- done
	<-done
	return s.path
}

func (s *Sink) run() {
	defer s.wg.Done()
	// The ticker drives time rotation on an idle collector and bounds how stale the file
	// is for a reader.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case b, ok := <-s.queue:
			if !ok {
				s.closeFile()
				return
			}
			s.write(b)
		case done := <-s.flushed:
			// Drain what was queued before the flush request.
			for n := len(s.queue); n > 0; n-- {
				b, ok := <-s.queue
				if !ok {
					break
				}
				s.write(b)
			}
			s.flush()
			close(done)
		case <-tick.C:
			if n := s.queueDrops.Load(); n > 0 {
				if ok, suppressed := s.errLog.Allow(s.now()); ok {
					s.queueDrops.Add(-n)
					s.log.Warn("write queue full: the disk is slower than the flows, batches dropped", "directory", s.cfg.Directory,
						"flows", n, "flows-dropped-total", s.counts.dropped.Load(), "suppressed", suppressed)
				}
			}
			if s.f != nil && s.cfg.RotateInterval > 0 && s.now().Sub(s.opened) >= s.cfg.RotateInterval {
				s.closeFile()
			} else {
				s.flush()
			}
		}
	}
}

func (s *Sink) write(b *output.Batch) {
	defer b.Release()
	if s.f != nil && ((s.cfg.RotateSize > 0 && s.written+int64(len(b.Data)) > s.cfg.RotateSize && s.written > 0) ||
		(s.cfg.RotateInterval > 0 && s.now().Sub(s.opened) >= s.cfg.RotateInterval)) {
		s.closeFile()
	}
	if s.f == nil {
		if err := s.openFile(); err != nil {
			s.writeFailed(b.Flows, "cannot open an archive file", err)
			return
		}
	}
	if _, err := s.out.Write(b.Data); err != nil {
		s.writeFailed(b.Flows, "cannot write the archive file (a new one is started)", err)
		s.closeFile()
		return
	}
	s.written += int64(len(b.Data))
	s.metrics.flowsWritten.Add(float64(b.Flows))
	s.counts.written.Add(int64(b.Flows))
	s.metrics.bytesWritten.Add(float64(len(b.Data)))
}

func (s *Sink) suffix() string {
	switch s.cfg.Compression {
	case "zstd":
		return ".pb.zst"
	case "gzip":
		return ".pb.gz"
	}
	return ".pb"
}

func (s *Sink) openFile() error {
	// Names sort by time. Two rotations within a millisecond must neither overwrite each
	// other nor break the order: the later one takes the next free millisecond.
	var path string
	for t := s.now().UTC(); ; t = t.Add(time.Millisecond) {
		path = filepath.Join(s.cfg.Directory, s.cfg.Prefix+"-"+t.Format("20060102T150405.000Z")+s.suffix())
		if _, err := os.Lstat(path); err != nil {
			// A free name, or a directory that cannot be read (gone, not a directory):
			// OpenFile says which. Only a name taken moves on.
			break
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	s.f, s.path, s.written, s.opened = f, path, 0, s.now()
	if s.bw == nil {
		s.bw = bufio.NewWriterSize(f, 256<<10)
	} else {
		s.bw.Reset(f)
	}
	s.out = s.bw
	comp, err := newCompressor(s.bw, s.cfg.Compression)
	if err != nil {
		return err
	}
	if comp != nil {
		s.comp, s.out = comp, comp
	}
	s.metrics.rotations.Inc()
	s.log.Info("archive file started", "path", path)
	s.prune()
	return nil
}

// newCompressor returns the compression layer of an archive over w, nil for "none".
func newCompressor(w io.Writer, compression string) (io.WriteCloser, error) {
	switch compression {
	case "zstd":
		zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err // not a nil *Encoder in a non-nil interface
		}
		return zw, nil
	case "gzip":
		return gzip.NewWriter(w), nil
	}
	return nil, nil
}

func (s *Sink) flush() {
	if s.f == nil {
		return
	}
	var err error
	if fl, ok := s.comp.(interface{ Flush() error }); ok {
		err = fl.Flush()
	}
	if err == nil {
		err = s.bw.Flush()
	}
	if err != nil {
		s.metrics.writeErrors.Inc()
		s.log.Error("cannot flush archive file", "path", s.path, "error", err)
	}
}

func (s *Sink) closeFile() {
	if s.f == nil {
		return
	}
	var errs []error
	if s.comp != nil {
		errs = append(errs, s.comp.Close())
	}
	errs = append(errs, s.bw.Flush(), s.f.Close())
	if err := errors.Join(errs...); err != nil {
		s.metrics.writeErrors.Inc()
		s.log.Error("cannot close archive file", "path", s.path, "error", err)
	}
	s.f, s.comp, s.out = nil, nil, nil
}

// prune removes the oldest archive files beyond MaxFiles (names sort by time).
func (s *Sink) prune() {
	if s.cfg.MaxFiles <= 0 {
		return
	}
	files, err := ListArchives(s.cfg.Directory, s.cfg.Prefix)
	if err != nil {
		s.metrics.writeErrors.Inc()
		return
	}
	for len(files) > s.cfg.MaxFiles {
		if err := os.Remove(files[0]); err != nil {
			s.metrics.writeErrors.Inc()
			s.log.Error("cannot remove old archive file", "path", files[0], "error", err)
		}
		files = files[1:]
	}
}

// ListArchives returns the archive files written with prefix in dir, oldest first.
func ListArchives(dir, prefix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, prefix+"-") &&
			(strings.HasSuffix(n, ".pb") || strings.HasSuffix(n, ".pb.zst") || strings.HasSuffix(n, ".pb.gz")) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Strings(out)
	return out, nil
}
