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
	// pending holds the flows, batches and bytes handed to the buffers since the last
	// successful flush: they count as written once a flush reaches the file, as dropped when
	// it fails.
	pending struct{ flows, batches, bytes int64 }
	// failing is set while the last file was abandoned on an error: the files started to
	// retry are not logged, and a flush that succeeds again is.
	failing bool
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

// writeFailed counts one write error losing batches holding flows and logs it, rate-limited.
func (s *Sink) writeFailed(flows, batches int64, msg string, err error) {
	s.metrics.writeErrors.Inc()
	s.metrics.batchesDropped.Add(float64(batches))
	s.metrics.flowsDropped.Add(float64(flows))
	s.counts.writeErrors.Add(1)
	s.counts.dropped.Add(flows)
	s.health.Event(fmt.Sprintf("%s: %v; %d flows dropped since start", msg, err, s.counts.dropped.Load()))
	if ok, suppressed := s.errLog.Allow(s.now()); ok {
		s.log.Error(msg+", flows dropped", "path", s.path, "directory", s.cfg.Directory, "flows", flows,
			"error", err, "flows-dropped-total", s.counts.dropped.Load(), "suppressed", suppressed)
	}
}

// pendingWritten counts the pending flows as written: a flush has put them in the file.
func (s *Sink) pendingWritten() {
	p := &s.pending
	if s.failing && p.flows > 0 {
		s.failing = false
		s.log.Info("archive file written again", "path", s.path, "flows-dropped-total", s.counts.dropped.Load())
	}
	s.metrics.flowsWritten.Add(float64(p.flows))
	s.counts.written.Add(p.flows)
	s.metrics.bytesWritten.Add(float64(p.bytes))
	*p = struct{ flows, batches, bytes int64 }{}
}

// pendingFailed counts the pending flows as dropped after err: the file may hold part of
// them, but not all, and cannot be appended to any more.
func (s *Sink) pendingFailed(msg string, err error) {
	s.writeFailed(s.pending.flows, s.pending.batches, msg, err)
	s.pending = struct{ flows, batches, bytes int64 }{}
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
			s.writeFailed(int64(b.Flows), 1, "cannot open an archive file", err)
			return
		}
	}
	s.pending.flows += int64(b.Flows)
	s.pending.batches++
	s.pending.bytes += int64(len(b.Data))
	if _, err := s.out.Write(b.Data); err != nil {
		// The buffer wrote through to the file and failed: what it held since the last
		// flush is lost with this batch.
		s.pendingFailed("cannot write the archive file (a new one is started)", err)
		s.abandonFile()
		return
	}
	s.written += int64(len(b.Data))
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
		path = filepath.Join(s.cfg.Directory, s.cfg.Prefix+"-"+t.Format(archiveTimeLayout)+s.suffix())
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
	if !s.failing {
		s.log.Info("archive file started", "path", path)
	}
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
		// The file ends with part of the buffer at most: a reader reads it up to its last
		// whole record, and the next batch starts a new file.
		s.pendingFailed("cannot flush the archive file (a new one is started)", err)
		s.abandonFile()
		return
	}
	s.pendingWritten()
}

// closeFile finishes the compressed stream, flushes and closes the current file.
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
		s.pendingFailed("cannot close the archive file", err)
	} else {
		s.pendingWritten()
	}
	s.f, s.comp, s.out = nil, nil, nil
}

// abandonFile closes the current file after a failed write or flush, already counted: the
// buffer keeps its error, so nothing more reaches the file. A file left empty is removed, so
// that retrying on a full disk does not leave one empty file per attempt.
func (s *Sink) abandonFile() {
	if s.comp != nil {
		s.comp.Close()
	}
	if fi, err := s.f.Stat(); err == nil && fi.Size() == 0 {
		os.Remove(s.path)
	}
	s.f.Close()
	s.f, s.comp, s.out = nil, nil, nil
	s.failing = true
}

// prune removes the oldest archive files beyond MaxFiles (names sort by time), never the
// file being written, even when a clock set back makes it sort first.
func (s *Sink) prune() {
	if s.cfg.MaxFiles <= 0 {
		return
	}
	files, err := ListArchives(s.cfg.Directory, s.cfg.Prefix)
	if err != nil {
		s.metrics.writeErrors.Inc()
		return
	}
	for i := 0; len(files) > s.cfg.MaxFiles && i < len(files); {
		if files[i] == s.path {
			i++
			continue
		}
		if err := os.Remove(files[i]); err != nil {
			s.metrics.writeErrors.Inc()
			s.log.Error("cannot remove old archive file", "path", files[i], "error", err)
		}
		files = append(files[:i], files[i+1:]...)
	}
}

// archiveTimeLayout dates the archive file names; its fixed width makes them sort by time.
const archiveTimeLayout = "20060102T150405.000Z"

// IsArchiveName tells whether name is an archive file written with prefix:
// <prefix>-<UTC time>.pb, .pb.zst or .pb.gz, exactly. Another prefix starting with this one
// (flows-edge for flows) does not match.
func IsArchiveName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok || len(rest) < len(archiveTimeLayout) {
		return false
	}
	switch rest[len(archiveTimeLayout):] {
	case ".pb", ".pb.zst", ".pb.gz":
	default:
		return false
	}
	_, err := time.Parse(archiveTimeLayout, rest[:len(archiveTimeLayout)])
	return err == nil
}

// ListArchives returns the archive files written with prefix in dir, oldest first.
func ListArchives(dir, prefix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && IsArchiveName(n, prefix) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Strings(out)
	return out, nil
}
