//go:build linux

package server

import (
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"flowzero/capture/agent"
	"flowzero/capture/internal/capturetest"
	"flowzero/internal/health"
	"flowzero/internal/testutil"
)

func fifoServerConfig(t *testing.T) Configuration {
	t.Helper()
	cfg := testServerConfig(t)
	if err := syscall.Mkfifo(cfg.Output.Path, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return cfg
}

// stopWithin stops s and fails the test if that takes more than testutil.WaitTimeout: a bound
// for a hang, not a timing claim.
func stopWithin(t *testing.T, s *Server) {
	t.Helper()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("the server did not stop")
	}
}

func waitingForReader(s *Server) bool { return promtest.ToFloat64(s.metrics.outputsWaiting) == 1 }

// TestFIFONoReader streams to a FIFO that nobody opens: the server waits for a reader
// without writing or acknowledging anything, reports it in /healthz, and stops promptly.
func TestFIFONoReader(t *testing.T) {
	cfg := fifoServerConfig(t)
	s := startServer(t, cfg)
	acfg := testAgentConfig("lonely", s.Addr().String(), capturetest.Captures(t))
	acfg.DrainTimeout = 200 * time.Millisecond
	a := startAgent(t, acfg)
	testutil.WaitUntil(t, "the output to wait for a reader", func() bool { return waitingForReader(s) })
	if r := s.Health(); r.Status != health.Degraded || !strings.Contains(r.Reason, "FIFO without a reader") {
		t.Errorf("health while waiting for a reader: %+v", r)
	}
	stopWithin(t, s)
	_ = a.Stop()
	st, ss := a.Stats(), s.Stats("lonely")
	if st.Sent != 0 || st.Captured == 0 || st.Captured != st.DroppedAgent || ss.Packets != 0 || ss.DropServer != 0 {
		t.Fatalf("agent %+v, server %+v: want nothing written, acknowledged or dropped by the server", st, ss)
	}
}

// TestFIFOReaderLeaves has a reader read the section header and leave while an agent
// streams: the packets the server could not write count as server drops, the server waits
// for a new reader, which gets the later packets, and everything adds up.
func TestFIFOReaderLeaves(t *testing.T) {
	files := capturetest.Captures(t)
	cfg := fifoServerConfig(t)
	s := startServer(t, cfg)
	first := make(chan error, 1)
	go func() {
		f, err := os.Open(cfg.Output.Path)
		if err == nil {
			_, err = io.ReadFull(f, make([]byte, 300))
			f.Close()
		}
		first <- err
	}()
	acfg := testAgentConfig("feed", s.Addr().String(), files)
	acfg.Replay.Loop = 1 << 20 // until stopped
	acfg.FrameSize = 4096
	a := startAgent(t, acfg)
	if err := <-first; err != nil {
		t.Fatalf("first reader: %v", err)
	}
	// The reader's departure shows as the output waiting for a new one. Packets the server
	// held when the pipe broke count as server drops; there may be none, when a flush had
	// just emptied its buffer, so the accounting below checks them rather than this wait.
	testutil.WaitUntil(t, "the output to wait for a new reader", func() bool { return waitingForReader(s) })
	before := s.Stats("feed").Packets

	type result struct {
		frames capturetest.Frames
		err    error
	}
	second := make(chan result, 1)
	go func() {
		f, err := os.Open(cfg.Output.Path)
		if err != nil {
			second <- result{err: err}
			return
		}
		defer f.Close()
		second <- result{frames: capturetest.ReadPcapngFrom(t, f)}
	}()
	testutil.WaitUntil(t, "packets for the new reader", func() bool { return s.Stats("feed").Packets > before+1000 })
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	stopWithin(t, s)
	got := <-second
	if got.err != nil {
		t.Fatalf("second reader: %v", got.err)
	}
	st, ss := a.Stats(), s.Stats("feed")
	t.Logf("agent %+v; server %+v; %d packets before the second reader", st, ss, before)
	if st.Captured != st.Sent+st.DroppedAgent || st.Sent != ss.Packets+ss.DropServer {
		t.Fatalf("agent %+v, server %+v: captured != sent + agent drops or sent != written + server drops", st, ss)
	}
	n := 0
	for _, frames := range got.frames {
		n += len(frames)
	}
	if uint64(n) != ss.Packets-before {
		t.Fatalf("the second reader got %d packets, the server wrote %d after it came", n, ss.Packets-before)
	}
}

// TestFIFOStalledReaderStop has a reader open the FIFO and never read: once the pipe is full,
// the server's write waits, and Stop still returns, counting the packets it could not write
// as server drops.
func TestFIFOStalledReaderStop(t *testing.T) {
	files := capturetest.Captures(t) // before the reader's goroutine: the test may skip here
	cfg := fifoServerConfig(t)
	s := startServer(t, cfg)
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.Open(cfg.Output.Path)
		if err != nil {
			t.Error(err)
		}
		opened <- f
	}()
	a := startStuckAgent(t, s, files)
	r := <-opened
	if r == nil {
		t.FailNow()
	}
	defer r.Close()
	// A second writer polls the pipe: not writable means no free slot, so the server's next
	// write waits.
	probe, err := unix.Open(cfg.Output.Path, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(probe)
	stopStalled(t, s, a, probe)
}

// startStuckAgent starts an agent named "stuck" that streams files to s, over and over, in
// small frames.
func startStuckAgent(t *testing.T, s *Server, files []string) *agent.Agent {
	t.Helper()
	acfg := testAgentConfig("stuck", s.Addr().String(), files)
	acfg.Replay.Loop = 1 << 20
	acfg.FrameSize = 4096
	acfg.DrainTimeout = 200 * time.Millisecond
	return startAgent(t, acfg)
}

// stopStalled waits until the pipe whose write end is fd is full and the server holds packets
// it cannot write (a reader that never reads), then checks that Stop returns and that those
// packets count as server drops.
func stopStalled(t *testing.T, s *Server, a *agent.Agent, fd int) {
	t.Helper()
	testutil.WaitUntil(t, "a full pipe", func() bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, 0)
		return err == nil && n == 0
	})
	// The pipe stays full: packets buffered from now on are never written. Either frames keep
	// coming into the output's buffer, or a write already waits on the pipe, holding the
	// output's lock (a frame being written holds it only for a moment).
	frames := s.metrics.frames.WithLabelValues("stuck")
	full := promtest.ToFloat64(frames)
	s.mu.Lock()
	out := s.agents["stuck"].out
	s.mu.Unlock()
	busy := 0
	testutil.WaitUntil(t, "packets the server cannot write", func() bool {
		if out.mu.TryLock() {
			out.mu.Unlock()
			busy = 0
		} else {
			busy++
		}
		// Heartbeat frames come every 100 ms, packet frames many times as often.
		return promtest.ToFloat64(frames) >= full+3 || busy >= 3
	})
	stopWithin(t, s)
	_ = a.Stop()
	st, ss := a.Stats(), s.Stats("stuck")
	t.Logf("agent %+v; server %+v", st, ss)
	// Every frame the agent counts as sent was acknowledged, so written or counted as dropped.
	if ss.DropServer == 0 || st.Captured != st.Sent+st.DroppedAgent || st.Sent > ss.Packets+ss.DropServer {
		t.Fatalf("agent %+v, server %+v: want the packets of the interrupted write counted as server drops", st, ss)
	}
}

// blockingPipe returns a pipe opened the way a shell hands one to a command's stdout:
// blocking, so Go's poller does not wait on its write end; wfd is that end's descriptor
// (w.Fd would put it back in blocking mode).
func blockingPipe(t *testing.T) (r, w *os.File, wfd int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "pipe-r"), os.NewFile(uintptr(p[1]), "pipe-w")
	t.Cleanup(func() { r.Close(); w.Close() })
	if w.SetWriteDeadline(time.Time{}) == nil {
		t.Fatal("a blocking pipe takes write deadlines: the test would not test pollable")
	}
	return r, w, p[1]
}

// startStdoutServer starts a server writing to "-", with w as its stdout.
func startStdoutServer(t *testing.T, w *os.File) *Server {
	t.Helper()
	cfg := testServerConfig(t)
	cfg.Output.Path = "-"
	return startServerWith(t, cfg, Dependencies{Stdout: w})
}

// TestStdoutStalledReaderStop is TestFIFOStalledReaderStop for -w - with stdout a blocking pipe
// (flowzero capture server -w - | tshark -r -) whose reader stops reading: Stop returns, and
// the packets of the interrupted write count as server drops.
func TestStdoutStalledReaderStop(t *testing.T) {
	_, w, wfd := blockingPipe(t) // the read end stays open, unread, until the test ends
	s := startStdoutServer(t, w)
	a := startStuckAgent(t, s, capturetest.Captures(t))
	stopStalled(t, s, a, wfd)
	if s.stdoutDup == nil {
		t.Fatal("the server writes to the blocking pipe itself")
	}
	if _, err := s.stdoutDup.Write([]byte{0}); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("write to the stdout duplicate after Stop: %v, want it closed", err)
	}
	// O_NONBLOCK is the pipe's: left set, it would make the next writer's writes fail.
	if fl, err := unix.FcntlInt(uintptr(wfd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("stdout's pipe after Stop: flags %#x, %v, want it blocking again", fl, err)
	}
}

// TestStdoutReaderGone streams to -w - whose reader has gone (tshark quit, head had enough):
// the server reports it on Err, as tcpdump -w - dies of SIGPIPE, instead of counting every
// packet as a server drop forever.
func TestStdoutReaderGone(t *testing.T) {
	r, w, _ := blockingPipe(t)
	r.Close()
	s := startStdoutServer(t, w)
	defer s.Stop()
	startAgent(t, testAgentConfig("a", s.Addr().String(), capturetest.Captures(t)))
	select {
	case err := <-s.Err():
		if !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("Err: %v, want EPIPE", err)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("the server did not report its stdout reader gone")
	}
}
