package pcapfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"flowzero/internal/testdata"
)

// fuzzSeedLen bounds a seed: the first few KiB of a capture hold its header and several
// packets, which is what the reader's paths need; more only slows each run down.
const fuzzSeedLen = 4 << 10

// pcapngOf re-encodes frames read from a real pcap as pcapng, with two interfaces (the second
// one raw IP) so that the seeds exercise per-interface link types. The shared captures are all
// pcap; the pcapng reader needs seeds too.
func pcapngOf(tb testing.TB, frames []Frame) []byte {
	tb.Helper()
	var buf bytes.Buffer
	lt := layers.LinkTypeEthernet
	if len(frames) > 0 {
		lt = frames[0].LinkType
	}
	w, err := pcapgo.NewNgWriter(&buf, lt)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := w.AddInterface(pcapgo.NgInterface{Name: "raw0", LinkType: layers.LinkTypeRaw, SnapLength: 65535})
	if err != nil {
		tb.Fatal(err)
	}
	for i, fr := range frames {
		ci := gopacket.CaptureInfo{Timestamp: fr.Time, CaptureLength: len(fr.Data), Length: fr.Length}
		if i%2 == 1 {
			ci.InterfaceIndex = raw
		}
		if err := w.WritePacket(ci, fr.Data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// pcapfileSeeds returns the head of every real capture, a pcapng re-encoding of each, and
// truncated variants (cut inside the file header and inside the last packet).
func pcapfileSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	paths := testdata.AllCaptures(tb)
	paths = append(paths, testdata.Glob(tb, "*/*.pcapng")...)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		frames, err := ReadFrames(p)
		if err != nil {
			tb.Fatalf("%s: %v", filepath.Base(p), err)
		}
		for _, b := range [][]byte{data, pcapngOf(tb, frames)} {
			b = b[:min(len(b), fuzzSeedLen)]
			seeds = append(seeds, b, b[:min(len(b), 20)], b[:len(b)-1])
		}
	}
	return seeds
}

// FuzzPcapfile feeds arbitrary bytes to readFrames, which reads the user's files for
// `flowzero decode` and `replay`. It never panics; every frame's data is bytes of the input
// and no longer than its original length. When gopacket's pcap or pcapng reader (chosen by the
// magic number, as readFrames does) reads the whole input without error, readFrames succeeds
// too, with the same frames: count, timestamps, data, lengths, interfaces and the link type
// of each frame's interface. The exception is a frame captured over its original length,
// which pcapgo's pcapng reader lets through: readFrames fails on it, after the same frames.
func FuzzPcapfile(f *testing.F) {
	for _, s := range pcapfileSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := readFrames(bytes.NewReader(data), "fuzz")
		for i, fr := range frames {
			if len(fr.Data) > len(data) || !bytes.Contains(data, fr.Data) {
				t.Fatalf("frame %d: %d bytes not taken from the %d-byte input", i, len(fr.Data), len(data))
			}
			if len(fr.Data) > fr.Length {
				t.Fatalf("frame %d: %d bytes captured of %d on the wire", i, len(fr.Data), fr.Length)
			}
		}
		want, linkTypes, overLong, ok := readWithGopacket(data)
		if !ok {
			return
		}
		if overLong && err == nil {
			t.Fatalf("frame %d captured over its original length accepted", len(want)+1)
		}
		if !overLong && err != nil {
			t.Fatalf("gopacket reads %d frames, readFrames fails: %v", len(want), err)
		}
		if len(frames) != len(want) {
			t.Fatalf("readFrames: %d frames, gopacket: %d", len(frames), len(want))
		}
		for i, fr := range frames {
			ci := want[i].ci
			if !fr.Time.Equal(ci.Timestamp) || fr.Length != ci.Length || fr.Interface != ci.InterfaceIndex ||
				!bytes.Equal(fr.Data, want[i].data) || fr.LinkType != linkTypes[i] {
				t.Fatalf("frame %d: readFrames %v %d/%d bytes intf %d %v, gopacket %v %d/%d bytes intf %d %v",
					i, fr.Time, len(fr.Data), fr.Length, fr.Interface, fr.LinkType,
					ci.Timestamp, len(want[i].data), ci.Length, ci.InterfaceIndex, linkTypes[i])
			}
		}
	})
}

type gopacketFrame struct {
	data []byte
	ci   gopacket.CaptureInfo
}

// readWithGopacket reads data with pcapgo directly (no buffering, no magic sniffing of our
// own), returning the frames and the link type of each frame's interface, and whether the
// whole input read without error. It stops before the first frame captured over its original
// length (overLong).
func readWithGopacket(data []byte) (frames []gopacketFrame, lts []layers.LinkType, overLong, ok bool) {
	var (
		next     func() ([]byte, gopacket.CaptureInfo, error)
		linkType func(gopacket.CaptureInfo) layers.LinkType
	)
	if ng, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.DefaultNgReaderOptions); err == nil {
		next = ng.ReadPacketData
		linkType = func(ci gopacket.CaptureInfo) layers.LinkType {
			intf, err := ng.Interface(ci.InterfaceIndex)
			if err != nil {
				return ng.LinkType()
			}
			return intf.LinkType
		}
	} else if pc, err := pcapgo.NewReader(bytes.NewReader(data)); err == nil {
		next = pc.ReadPacketData
		linkType = func(gopacket.CaptureInfo) layers.LinkType { return pc.LinkType() }
	} else {
		return nil, nil, false, false
	}
	for {
		d, ci, err := next()
		if errors.Is(err, io.EOF) {
			return frames, lts, false, true
		}
		if err != nil {
			return nil, nil, false, false
		}
		if ci.CaptureLength > ci.Length {
			return frames, lts, true, true
		}
		frames = append(frames, gopacketFrame{bytes.Clone(d), ci})
		lts = append(lts, linkType(ci))
	}
}
