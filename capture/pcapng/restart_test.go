package pcapng

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"flowzero/capture/internal/capturetest"
	"flowzero/internal/pcapfile"
)

// writeRun writes frames on eth0 with a new Writer, as one run of a server does, and closes it.
func writeRun(t *testing.T, cfg Configuration, opts Options, frames []pcapfile.Frame) {
	t.Helper()
	o := NewWriter(cfg, opts)
	id, err := o.AddInterface(eth0)
	if err != nil {
		t.Fatal(err)
	}
	writeFrames(t, o, id, frames)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
}

// readSections reads a pcapng file with gopacket's NgReader, which goes from one section to
// the next, and returns its packets' data.
func readSections(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("%s: packet %d: %v", path, len(got), err)
		}
		got = append(got, bytes.Clone(data))
	}
}

// TestRestartAppends writes a file in two runs, as a server stopped cleanly and started again
// on the same path: the second run appends a section, and a reader sees both runs' packets.
func TestRestartAppends(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 4)
	cfg := Configuration{Path: filepath.Join(t.TempDir(), "out.pcapng")}
	writeRun(t, cfg, Options{}, pkts[:2])
	writeRun(t, cfg, Options{}, pkts[2:])
	capturetest.Compare(t, capturetest.ReadPcapng(t, cfg.Path), capturetest.Frames{"a:eth0": pkts})
	if got := readSections(t, cfg.Path); len(got) != 4 {
		t.Fatalf("NgReader reads %d packets, want 4", len(got))
	}
}

// TestRestartAfterCrash leaves an incomplete block at the end of the file, as a crash in the
// middle of a write does: the next run cuts it off (and reports it) before appending, so that
// readers reach the new section.
func TestRestartAfterCrash(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 4)
	cfg := Configuration{Path: filepath.Join(t.TempDir(), "out.pcapng")}
	writeRun(t, cfg, Options{}, pkts[:2])
	whole, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	// Half of one more packet block.
	epb := appendEPB(nil, 0, pkts[2].Time.UnixNano(), uint32(pkts[2].Length), pkts[2].Data)
	cut := int64(len(epb) / 2)
	if err := os.WriteFile(cfg.Path, append(whole, epb[:cut]...), 0o644); err != nil {
		t.Fatal(err)
	}
	var repaired []string
	writeRun(t, cfg, Options{Repaired: func(name string, n int64) {
		if n != cut {
			t.Errorf("%d bytes cut, want %d", n, cut)
		}
		repaired = append(repaired, name)
	}}, pkts[2:])
	if len(repaired) != 1 || repaired[0] != cfg.Path {
		t.Fatalf("repairs reported %q, want one of %s", repaired, cfg.Path)
	}
	capturetest.Compare(t, capturetest.ReadPcapng(t, cfg.Path), capturetest.Frames{"a:eth0": pkts})
	if got := readSections(t, cfg.Path); len(got) != 4 {
		t.Fatalf("NgReader reads %d packets, want 4", len(got))
	}
}

// TestRestartRefusesOtherFile: an existing file that is not pcapng is neither appended to
// nor truncated; the error names it.
func TestRestartRefusesOtherFile(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 1)
	cfg := Configuration{Path: filepath.Join(t.TempDir(), "notes.txt")}
	const text = "not a capture, and longer than one block header\n"
	if err := os.WriteFile(cfg.Path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var failures int
	o := NewWriter(cfg, Options{Failed: func(error) { failures++ }})
	id, err := o.AddInterface(eth0)
	if err != nil {
		t.Fatal(err)
	}
	err = o.WritePacket(id, pkts[0].Time.UnixNano(), uint32(pkts[0].Length), pkts[0].Data)
	if !errors.Is(err, ErrNotPcapng) || !strings.Contains(err.Error(), cfg.Path) || failures != 1 {
		t.Fatalf("WritePacket: %v (%d failures), want ErrNotPcapng naming %s", err, failures, cfg.Path)
	}
	_ = o.Close()
	if b, _ := os.ReadFile(cfg.Path); string(b) != text {
		t.Fatalf("the file was changed: %q", b)
	}
}

// TestRestartResumesSeries restarts a writer rotating by size (-C without -W): it appends to
// the last file of the series, not to the first one, and rotates to new names from there, so
// no file of the first run is truncated.
func TestRestartResumesSeries(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 8)
	dir := t.TempDir()
	cfg := Configuration{Path: filepath.Join(dir, "out.pcapng"), RotateSize: 1}
	for _, run := range [][]pcapfile.Frame{pkts[:3], pkts[3:]} {
		o := NewWriter(cfg, Options{})
		id, err := o.AddInterface(eth0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range run {
			writeFrames(t, o, id, []pcapfile.Frame{f})
			if err := o.Flush(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // distinct modification times
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(dir)
	got := capturetest.Frames{}
	for _, e := range ents {
		capturetest.Merge(got, capturetest.ReadPcapng(t, filepath.Join(dir, e.Name())))
	}
	if got.Count() != len(pkts) {
		t.Fatalf("%d packets in %d files after a restart, want %d", got.Count(), len(ents), len(pkts))
	}
}

// TestCompleteBlocks walks sections of either byte order and stops at a block whose lengths
// disagree.
func TestCompleteBlocks(t *testing.T) {
	// A big-endian section header block, no options: type, length 28, magic, version 1.0,
	// section length -1, length 28.
	shbBE := []byte{0x0A, 0x0D, 0x0D, 0x0A, 0, 0, 0, 28, 0x1A, 0x2B, 0x3C, 0x4D, 0, 1, 0, 0,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 28}
	for _, tc := range []struct {
		name string
		file []byte
		want int64
		err  error
	}{
		{"big-endian", shbBE, 28, nil},
		{"cut", append(shbBE[:28:28], shbBE[:20]...), 28, nil},
		{"bad trailer", append(shbBE[:28:28], append(shbBE[:27:27], 29)...), 28, nil},
		{"cut header", shbBE[:6], 0, nil},
		{"text", []byte("hello, world, this is text"), 0, ErrNotPcapng},
		{"short text", []byte("hi"), 0, ErrNotPcapng},
	} {
		got, err := completeBlocks(bytes.NewReader(tc.file), int64(len(tc.file)))
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}
