package pcapng

import (
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"flowzero/capture/internal/capturetest"
	"flowzero/internal/pcapfile"
)

var eth0 = Interface{Agent: "a", Name: "eth0", LinkType: 1}

// writeFrames writes frames on interface id.
func writeFrames(t *testing.T, o *Writer, id int, frames []pcapfile.Frame) {
	t.Helper()
	for _, f := range frames {
		if err := o.WritePacket(id, f.Time.UnixNano(), uint32(f.Length), f.Data); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRotateTime drives the writer with a clock of its own: -G names from strftime (all of its
// conversions, as tcpdump passes the name to strftime(3)), -W keeps the newest files.
func TestRotateTime(t *testing.T) {
	dir := t.TempDir()
	cfg := Configuration{Path: filepath.Join(dir, "cap-%Y%m%d-%H%M%S-%j.pcapng"), RotateInterval: time.Minute, MaxFiles: 2, FlushInterval: time.Second}
	start := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	clk := capturetest.ClockAt(start)
	o := NewWriter(cfg, Options{Clock: clk})
	id, err := o.AddInterface(eth0)
	if err != nil {
		t.Fatal(err)
	}
	pkt := []byte{1, 2, 3, 4}
	var last time.Time
	for _, step := range []time.Duration{0, 30 * time.Second, 31 * time.Second, 64 * time.Second} {
		clk.Advance(step)
		last = clk.Now()
		if err := o.WritePacket(id, last.UnixNano(), 4, pkt); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := []string{filepath.Join(dir, "cap-20261122-060101-326.pcapng"), filepath.Join(dir, "cap-20261122-060205-326.pcapng")}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	if got := capturetest.ReadPcapng(t, want[0])["a:eth0"]; len(got) != 1 || !got[0].Time.Equal(last.Add(-64*time.Second)) {
		t.Fatalf("first kept file: %+v", got)
	}
}

// TestResumedSeriesRing resumes a -C -W ring (one packet a file) in a new writer: the ring
// goes on from its last file, which gets a new section, instead of starting again at file 0.
func TestResumedSeriesRing(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 4)
	path := filepath.Join(t.TempDir(), "ring.pcapng")
	cfg := Configuration{Path: path, RotateSize: 1, MaxFiles: 3}
	write := func(o *Writer, frames []pcapfile.Frame) {
		id, err := o.AddInterface(eth0)
		if err != nil {
			t.Fatal(err)
		}
		writeFrames(t, o, id, frames)
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := NewWriter(cfg, Options{})
	write(first, pkts[:2])
	resumed := NewWriter(cfg, Options{Series: first.Series})
	write(resumed, pkts[2:])
	for i, want := range [][]pcapfile.Frame{pkts[:1], pkts[1:3], pkts[3:]} {
		capturetest.Compare(t, capturetest.ReadPcapng(t, path+strconv.Itoa(i)), capturetest.Frames{"a:eth0": want})
	}
}

// TestResumedSeriesAfterInterval resumes a -G -C series once its interval has passed: the new
// file starts a new -C series (no counter in its name), as a rotation would have.
func TestResumedSeriesAfterInterval(t *testing.T) {
	dir := t.TempDir()
	cfg := Configuration{Path: filepath.Join(dir, "cap-%H%M.pcapng"), RotateSize: 1, RotateInterval: time.Minute}
	clk := capturetest.ClockAt(time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC))
	write := func(o *Writer, packets int) {
		id, err := o.AddInterface(eth0)
		if err != nil {
			t.Fatal(err)
		}
		for range packets {
			if err := o.WritePacket(id, clk.Now().UnixNano(), 4, []byte{1, 2, 3, 4}); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := NewWriter(cfg, Options{Clock: clk})
	write(first, 2)
	clk.Advance(2 * time.Minute)
	resumed := NewWriter(cfg, Options{Clock: clk, Series: first.Series})
	write(resumed, 1)
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := []string{filepath.Join(dir, "cap-0600.pcapng"), filepath.Join(dir, "cap-0600.pcapng1"), filepath.Join(dir, "cap-0602.pcapng")}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
}

// halfWriter writes half of what it is given, then fails, like a disk filling up.
type halfWriter struct{ w io.Writer }

func (h halfWriter) Write(p []byte) (int, error) {
	n, _ := h.w.Write(p[:len(p)/2])
	return n, errors.New("no space left on the test device")
}

// TestReopenAppends fails a write of packet blocks halfway into a file: the cut block is
// removed, the packets are reported lost, and the file opened again gets a new section after
// the packets written before, which a reader sees whole.
func TestReopenAppends(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 6)
	path := filepath.Join(t.TempDir(), "out.pcapng")
	var written, lost uint64
	var failures int
	o := NewWriter(Configuration{Path: path}, Options{
		Settled: func(_ int, c Count, ok bool) {
			if ok {
				written += c.Packets
			} else {
				lost += c.Packets
			}
		},
		Failed: func(error) { failures++ },
	})
	id, err := o.AddInterface(eth0)
	if err != nil {
		t.Fatal(err)
	}
	writeFrames(t, o, id, pkts[:2])
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	writeFrames(t, o, id, pkts[2:4])
	o.counter.w = halfWriter{o.counter.w}
	if err := o.Flush(); err == nil {
		t.Fatal("the failing flush succeeded")
	}
	writeFrames(t, o, id, pkts[4:])
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if written != 4 || lost != 2 || failures != 1 {
		t.Fatalf("%d packets reported written and %d lost, %d failures, want 4, 2 and 1", written, lost, failures)
	}
	capturetest.Compare(t, capturetest.ReadPcapng(t, path), capturetest.Frames{"a:eth0": append(pkts[:2:2], pkts[4:]...)})
}
