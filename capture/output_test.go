package capture

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

	"flowzero/capture/wire"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/pcapfile"
)

func replayOnce(t *testing.T, scfg ServerConfiguration, deps ServerDependencies, agents ...string) (*Server, []string) {
	t.Helper()
	files := allCaptures(t)
	s, err := NewServer(nil, scfg, deps)
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

func merge(dst, src map[string][]pcapfile.Frame) {
	for k, v := range src {
		dst[k] = append(dst[k], v...)
	}
}

func TestRotateSize(t *testing.T) {
	cfg := testServerConfig(t)
	cfg.Output.RotateSize = 3000
	_, files := replayOnce(t, cfg, ServerDependencies{Logger: quiet}, "rot")
	names, _ := filepath.Glob(cfg.Output.Path + "*")
	if len(names) < 5 {
		t.Fatalf("%d files: %v", len(names), names)
	}
	// tcpdump -C naming: capture.pcapng, capture.pcapng1, capture.pcapng2...
	got := map[string][]pcapfile.Frame{}
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
		merge(got, readPcapng(t, name))
	}
	compareFrames(t, got, expectedFrames(t, "rot", files))
}

func TestRotateRing(t *testing.T) {
	cfg := testServerConfig(t)
	cfg.Output.RotateSize = 3000
	cfg.Output.MaxFiles = 3
	replayOnce(t, cfg, ServerDependencies{Logger: quiet}, "ring")
	names, _ := filepath.Glob(cfg.Output.Path + "*")
	want := []string{cfg.Output.Path + "0", cfg.Output.Path + "1", cfg.Output.Path + "2"}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	for _, n := range names {
		if len(readPcapng(t, n)) == 0 {
			t.Fatalf("%s has no packets", n)
		}
	}
}

// TestRotateTime drives the writer with a fake clock: -G names from strftime, -W keeps the
// newest files.
func TestRotateTime(t *testing.T) {
	dir := t.TempDir()
	cfg := OutputConfiguration{Path: filepath.Join(dir, "cap-%Y%m%d-%H%M%S.pcapng"), RotateInterval: time.Minute, MaxFiles: 2, FlushInterval: time.Second}
	o := newPcapngOutput(cfg, "", nil)
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	o.now = func() time.Time { return now }
	id, err := o.Interface("a", wire.Interface{Name: "eth0", LinkType: 1})
	if err != nil {
		t.Fatal(err)
	}
	pkt := []byte{1, 2, 3, 4}
	for _, off := range []time.Duration{0, 30 * time.Second, 61 * time.Second, 125 * time.Second} {
		now = time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC).Add(off)
		if err := o.WritePacket(id, now.UnixNano(), 4, pkt); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := []string{filepath.Join(dir, "cap-20261122-060101.pcapng"), filepath.Join(dir, "cap-20261122-060205.pcapng")}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	if got := readPcapng(t, want[0])["a:eth0"]; len(got) != 1 || !got[0].Time.Equal(now.Add(-64*time.Second)) {
		t.Fatalf("first kept file: %+v", got)
	}
}

func TestPerAgent(t *testing.T) {
	cfg := testServerConfig(t)
	cfg.Output.PerAgent = true
	_, files := replayOnce(t, cfg, ServerDependencies{Logger: quiet}, "east", "west")
	dir := filepath.Dir(cfg.Output.Path)
	for _, agent := range []string{"east", "west"} {
		compareFrames(t, readPcapng(t, filepath.Join(dir, "capture-"+agent+".pcapng")), expectedFrames(t, agent, files))
	}
}

func TestStdoutAndFIFO(t *testing.T) {
	t.Run("stdout", func(t *testing.T) {
		cfg := testServerConfig(t)
		cfg.Output.Path = "-"
		var out lockedbuf.Buffer
		_, files := replayOnce(t, cfg, ServerDependencies{Logger: quiet, Stdout: &out}, "a1", "a2")
		want := expectedFrames(t, "a1", files)
		merge(want, expectedFrames(t, "a2", files))
		compareFrames(t, readPcapngFrom(t, bytes.NewReader(out.Bytes())), want)
	})
	t.Run("fifo", func(t *testing.T) {
		cfg := testServerConfig(t)
		if err := syscall.Mkfifo(cfg.Output.Path, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		var got map[string][]pcapfile.Frame
		done := make(chan struct{})
		go func() {
			defer close(done)
			f, err := os.Open(cfg.Output.Path) // waits for the server to open it
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			got = readPcapngFrom(t, f)
		}()
		_, files := replayOnce(t, cfg, ServerDependencies{Logger: quiet}, "piped")
		<-done
		compareFrames(t, got, expectedFrames(t, "piped", files))
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
	_, files := replayOnce(t, cfg, ServerDependencies{Logger: quiet}, "shark")
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
	files := allCaptures(t)
	cfg := testServerConfig(t)
	cfg.Output.PerAgent = true
	cfg.Output.RotateSize = 3000
	cfg.Output.IdleClose = time.Hour // the test closes idle agents itself
	s := startServer(t, cfg)
	defer s.Stop()
	base := filepath.Join(filepath.Dir(cfg.Output.Path), "capture-back.pcapng")
	want := expectedFrames(t, "back", files)
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
		eventually(t, "the packets counted as written", func() bool { return s.Stats("back").Packets == uint64(packets) })
		eventually(t, "the idle agent to be forgotten", func() bool {
			s.closeIdleAgents(time.Now().Add(2 * cfg.Output.IdleClose))
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.agents["back"] == nil
		})
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
	got := map[string][]pcapfile.Frame{}
	for _, b := range second {
		merge(got, readPcapngFrom(t, bytes.NewReader(b)))
	}
	compareFrames(t, got, repeatFrames(want, 2))
}

// TestResumedSeriesRing resumes a -C -W ring (one packet a file) in a new output: the ring
// goes on from its last file, which gets a new section, instead of starting again at file 0.
func TestResumedSeriesRing(t *testing.T) {
	pkts := testFrames(t, 4)
	path := filepath.Join(t.TempDir(), "ring.pcapng")
	cfg := OutputConfiguration{Path: path, RotateSize: 1, MaxFiles: 3}
	write := func(o *pcapngOutput, frames []pcapfile.Frame) {
		id, err := o.Interface("a", wire.Interface{Name: "eth0", LinkType: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			if err := o.WritePacket(id, f.Time.UnixNano(), uint32(f.Length), f.Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := newPcapngOutput(cfg, "", nil)
	write(first, pkts[:2])
	resumed := newPcapngOutput(cfg, "", nil)
	resumed.fileSeries = first.fileSeries
	write(resumed, pkts[2:])
	for i, want := range [][]pcapfile.Frame{pkts[:1], pkts[1:3], pkts[3:]} {
		compareFrames(t, readPcapng(t, path+strconv.Itoa(i)), map[string][]pcapfile.Frame{"a:eth0": want})
	}
}

// TestResumedSeriesAfterInterval resumes a -G -C series once its interval has passed: the new
// file starts a new -C series (no counter in its name), as a rotation would have.
func TestResumedSeriesAfterInterval(t *testing.T) {
	dir := t.TempDir()
	cfg := OutputConfiguration{Path: filepath.Join(dir, "cap-%H%M.pcapng"), RotateSize: 1, RotateInterval: time.Minute}
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	write := func(o *pcapngOutput, packets int) {
		o.now = func() time.Time { return now }
		id, err := o.Interface("a", wire.Interface{Name: "eth0", LinkType: 1})
		if err != nil {
			t.Fatal(err)
		}
		for range packets {
			if err := o.WritePacket(id, now.UnixNano(), 4, []byte{1, 2, 3, 4}); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := newPcapngOutput(cfg, "", nil)
	write(first, 2)
	now = now.Add(2 * time.Minute)
	resumed := newPcapngOutput(cfg, "", nil)
	resumed.fileSeries = first.fileSeries
	write(resumed, 1)
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := []string{filepath.Join(dir, "cap-0600.pcapng"), filepath.Join(dir, "cap-0600.pcapng1"), filepath.Join(dir, "cap-0602.pcapng")}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
}
