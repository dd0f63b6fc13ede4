package server

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"flowzero/capture/internal/capturetest"
	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testutil"
)

func replayOnce(t *testing.T, scfg Configuration, deps Dependencies, agents ...string) (*Server, []string) {
	t.Helper()
	files := capturetest.Captures(t)
	s, err := New(nil, scfg, testDeps(deps))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, name := range agents {
		a := startAgent(t, testAgentConfig(name, s.Addr().String(), files))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-a.Done()
			_ = a.Stop()
		}()
	}
	wg.Wait()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	return s, files
}

func TestRotateSize(t *testing.T) {
	cfg := testServerConfig(t)
	cfg.Output.RotateSize = 3000
	_, files := replayOnce(t, cfg, Dependencies{}, "rot")
	names, _ := filepath.Glob(cfg.Output.Path + "*")
	if len(names) < 5 {
		t.Fatalf("%d files: %v", len(names), names)
	}
	// tcpdump -C naming: capture.pcapng, capture.pcapng1, capture.pcapng2...
	got := capturetest.Frames{}
	for i := range names {
		name := cfg.Output.Path
		if i > 0 {
			name += strconv.Itoa(i)
		}
		if !slices.Contains(names, name) {
			t.Fatalf("missing %s in %v", name, names)
		}
		st, _ := os.Stat(name)
		if i < len(names)-1 && st.Size() < 3000 {
			t.Fatalf("%s rotated at %d bytes", name, st.Size())
		}
		capturetest.Merge(got, capturetest.ReadPcapng(t, name))
	}
	capturetest.Compare(t, got, capturetest.Expected(t, "rot", files))
}

func TestRotateRing(t *testing.T) {
	cfg := testServerConfig(t)
	cfg.Output.RotateSize = 3000
	cfg.Output.MaxFiles = 3
	replayOnce(t, cfg, Dependencies{}, "ring")
	names, _ := filepath.Glob(cfg.Output.Path + "*")
	want := []string{cfg.Output.Path + "0", cfg.Output.Path + "1", cfg.Output.Path + "2"}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	for _, n := range names {
		if len(capturetest.ReadPcapng(t, n)) == 0 {
			t.Fatalf("%s has no packets", n)
		}
	}
}

func TestPerAgent(t *testing.T) {
	cfg := testServerConfig(t)
	cfg.Output.PerAgent = true
	_, files := replayOnce(t, cfg, Dependencies{}, "east", "west")
	dir := filepath.Dir(cfg.Output.Path)
	for _, agent := range []string{"east", "west"} {
		capturetest.Compare(t, capturetest.ReadPcapng(t, filepath.Join(dir, "capture-"+agent+".pcapng")), capturetest.Expected(t, agent, files))
	}
}

func TestStdoutAndFIFO(t *testing.T) {
	t.Run("stdout", func(t *testing.T) {
		cfg := testServerConfig(t)
		cfg.Output.Path = "-"
		var out lockedbuf.Buffer
		_, files := replayOnce(t, cfg, Dependencies{Stdout: &out}, "a1", "a2")
		want := capturetest.Expected(t, "a1", files)
		capturetest.Merge(want, capturetest.Expected(t, "a2", files))
		capturetest.Compare(t, capturetest.ReadPcapngFrom(t, bytes.NewReader(out.Bytes())), want)
	})
	t.Run("fifo", func(t *testing.T) {
		capturetest.Captures(t) // before the reader's goroutine: the test may skip here
		cfg := testServerConfig(t)
		if err := syscall.Mkfifo(cfg.Output.Path, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		var got capturetest.Frames
		done := make(chan struct{})
		go func() {
			defer close(done)
			f, err := os.Open(cfg.Output.Path) // waits for the server to open it
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			got = capturetest.ReadPcapngFrom(t, f)
		}()
		_, files := replayOnce(t, cfg, Dependencies{}, "piped")
		<-done
		capturetest.Compare(t, got, capturetest.Expected(t, "piped", files))
	})
}

// TestTshark reads the server's file with Wireshark's dissector engine when it is installed:
// interface names, timestamps, lengths and the MD5 of the bytes of every packet, in order.
func TestTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed: install Wireshark's tshark (Debian: apt-get install tshark) to check the pcapng files with its reader")
	}
	cfg := testServerConfig(t)
	_, files := replayOnce(t, cfg, Dependencies{}, "shark")
	var stderr strings.Builder
	cmd := exec.Command(tshark, "-n", "-r", cfg.Output.Path, "-o", "frame.generate_md5_hash:TRUE",
		"-T", "fields", "-E", "separator=,", "-e", "frame.interface_name", "-e", "frame.time_epoch",
		"-e", "frame.cap_len", "-e", "frame.len", "-e", "frame.md5_hash")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var want []string
	for _, path := range files {
		frames, err := pcapfile.ReadFrames(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			if f.LinkType != layers.LinkTypeEthernet && f.LinkType != layers.LinkTypeRaw {
				t.Fatalf("%s: link type %v", path, f.LinkType)
			}
			want = append(want, strings.Join([]string{
				"shark:" + strings.TrimSuffix(filepath.Base(path), ".pcap"),
				strconv.FormatInt(f.Time.Unix(), 10) + "." + strconv.FormatInt(1e9+int64(f.Time.Nanosecond()), 10)[1:],
				strconv.Itoa(len(f.Data)), strconv.Itoa(f.Length), fmt.Sprintf("%x", md5.Sum(f.Data))}, ","))
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("tshark read %d packets, want %d", len(lines), len(want))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Fatalf("packet %d: tshark %q, want %q", i, lines[i], want[i])
		}
	}
}

// TestIdleCloseResumesRotation has an agent replay twice with output.per-agent, rotation by
// size and idle-close between: the second session continues the first one's series of files
// after its last file, so every packet counted as written is on disk and no file of the first
// session is truncated or written again.
func TestIdleCloseResumesRotation(t *testing.T) {
	files := capturetest.Captures(t)
	cfg := testServerConfig(t)
	cfg.Output.PerAgent = true
	cfg.Output.RotateSize = 3000
	cfg.Output.IdleClose = time.Hour // the test moves the server's clock past it
	clk := capturetest.NewClock()
	s := startServerWith(t, cfg, Dependencies{Clock: clk})
	defer s.Stop()
	base := filepath.Join(filepath.Dir(cfg.Output.Path), "capture-back.pcapng")
	want := capturetest.Expected(t, "back", files)
	packets := 0
	for _, frames := range want {
		packets += len(frames)
	}
	// series reads the agent's files in tcpdump -C order: base, base1, base2...
	series := func() [][]byte {
		var out [][]byte
		for i := 0; ; i++ {
			name := base
			if i > 0 {
				name += strconv.Itoa(i)
			}
			b, err := os.ReadFile(name)
			if os.IsNotExist(err) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	session := func(files []string) {
		waitDone(t, startAgent(t, testAgentConfig("back", s.Addr().String(), files)))
		testutil.WaitUntil(t, "the packets counted as written", func() bool { return s.Stats("back").Packets == uint64(packets) })
		testutil.WaitUntil(t, "the agent's connection to end", func() bool { return agentGone(s, "back") })
		clk.Advance(2 * cfg.Output.IdleClose)
		testutil.WaitUntil(t, "the idle agent to be forgotten", func() bool { return forgotten(s, "back") })
	}

	session(files)
	first := series()
	if len(first) < 3 {
		t.Fatalf("the first session wrote %d files, want a rotated series", len(first))
	}
	// In the other order, so that a file written again by the second session differs.
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	session(reversed)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	second := series()
	for i, b := range first {
		if i >= len(second) || !bytes.HasPrefix(second[i], b) {
			t.Errorf("file %d of the first session was removed or written again", i)
			break
		}
	}
	got := capturetest.Frames{}
	for _, b := range second {
		capturetest.Merge(got, capturetest.ReadPcapngFrom(t, bytes.NewReader(b)))
	}
	capturetest.Compare(t, got, capturetest.Repeat(want, 2))
}

// TestOutputFailureInHealth: an output that cannot be opened (its directory is missing) makes
// the server degraded in /healthz and counts the failure and the packet it drops.
func TestOutputFailureInHealth(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 1)
	cfg := testServerConfig(t)
	cfg.Output.Path = filepath.Join(t.TempDir(), "missing", "capture.pcapng")
	s := startServer(t, cfg)
	defer s.Stop()
	if r := s.Health(); r.Status != health.OK || r.Counters["output-errors"] != 0 {
		t.Fatalf("health before any packet: %+v", r)
	}
	ra, _ := dialRaw(t, s.Addr().String(), "raw", 7)
	ra.send(1, interfaceRecord(t, 0, "eth0"), packetRecord(pkts[0]))
	ra.waitAck(1)
	// The failed open is an event, then the packet it drops another: the reason is the last.
	r := s.Health()
	if r.Status != health.Degraded || !strings.Contains(r.Reason, "1 packets of agent raw dropped by the server") ||
		r.Counters["output-errors"] == 0 || r.Counters["drops-server"] != 1 {
		t.Fatalf("health after a failed open: %+v", r)
	}
}
