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

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestStdoutAndFIFO(t *testing.T) {
	t.Run("stdout", func(t *testing.T) {
		cfg := testServerConfig(t)
		cfg.Output.Path = "-"
		var out lockedBuffer
		_, files := replayOnce(t, cfg, ServerDependencies{Logger: quiet, Stdout: &out}, "a1", "a2")
		want := expectedFrames(t, "a1", files)
		merge(want, expectedFrames(t, "a2", files))
		compareFrames(t, readPcapngFrom(t, &out.b), want)
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
