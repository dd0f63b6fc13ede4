package pcapfile

import (
	"bytes"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"flowzero/internal/testdata"
)

func TestReadUDP(t *testing.T) {
	dgs, err := ReadUDP(testdata.Path(t, "netflow", "nfv5.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dgs) != 1 {
		t.Fatalf("got %d datagrams, want 1", len(dgs))
	}
	p := dgs[0].Payload
	// NetFlow v5 header: version 5, count 29 (../shared/testdata/README.md).
	if len(p) < 24 || p[0] != 0 || p[1] != 5 || p[2] != 0 || p[3] != 29 {
		t.Fatalf("unexpected payload head % x", p[:4])
	}
	if len(p) != 24+29*48 {
		t.Fatalf("payload length %d, want %d", len(p), 24+29*48)
	}
}

func TestReadTCP(t *testing.T) {
	segs, err := ReadTCP(testdata.Path(t, "bmp", "bmp-init.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) == 0 || segs[0].Payload[0] != 3 { // BMP version 3
		t.Fatalf("got %d segments, first % x", len(segs), segs[0].Payload[:1])
	}
}

func TestReadFramesErrors(t *testing.T) {
	if _, err := ReadFrames("/nonexistent.pcap"); err == nil {
		t.Fatal("want error for missing file")
	}
}

// pcapgo's pcap reader refuses a record longer than the packet it captured, its pcapng reader
// does not: readFrames refuses both alike (found by FuzzPcapfile).
func TestReadFramesCaptureOverOriginalLength(t *testing.T) {
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	good := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: 4, Length: 60}
	// NgWriter refuses the bad record: write it whole, then patch its original length to 5.
	bad := gopacket.CaptureInfo{Timestamp: time.Unix(1700000001, 0), CaptureLength: 8, Length: 8}
	if err := w.WritePacket(good, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(bad, []byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	epbLengths := []byte{8, 0, 0, 0, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	i := bytes.Index(buf.Bytes(), epbLengths)
	if i < 0 {
		t.Fatal("second packet block not found")
	}
	buf.Bytes()[i+4] = 5
	frames, err := readFrames(&buf, "test.pcapng")
	if err == nil || err.Error() != "test.pcapng: packet 2: captured length 8 over original length 5: corrupt file" {
		t.Fatalf("error %v", err)
	}
	if len(frames) != 1 || frames[0].Length != 60 || !bytes.Equal(frames[0].Data, []byte{1, 2, 3, 4}) {
		t.Fatalf("frames before the bad one: %+v", frames)
	}
}
