package pcapfile

import (
	"testing"

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
