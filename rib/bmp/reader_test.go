package bmp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
)

// stallingReader hands out data at most step bytes per read, then fails every read with err,
// as a connection whose peer stopped sending fails at its read deadline.
type stallingReader struct {
	data []byte
	step int
	err  error
}

func (s *stallingReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, s.err
	}
	n := copy(p[:min(len(p), s.step)], s.data)
	s.data = s.data[n:]
	return n, nil
}

// largeInitiation returns an initiation message of n bytes: the sysName of the capture's
// initiation, then a string TLV filling the rest.
func largeInitiation(t *testing.T, n int) []byte {
	t.Helper()
	msg := readAll(t, captureStream(t, "bmp-init.pcap"))[0]
	msg = bytes.Clone(msg)
	fill := n - len(msg) - 4
	msg = binary.BigEndian.AppendUint16(msg, uint16(InfoString))
	msg = binary.BigEndian.AppendUint16(msg, uint16(fill))
	msg = append(msg, bytes.Repeat([]byte{'x'}, fill)...)
	binary.BigEndian.PutUint32(msg[1:5], uint32(len(msg)))
	return msg
}

// TestReaderMemoryFollowsData checks that a header announcing a large message costs memory
// only as its bytes arrive: the auditor's probe sent 6 bytes announcing 1 MiB, then nothing.
func TestReaderMemoryFollowsData(t *testing.T) {
	header := []byte{Version, 0, 0, 0, 0, byte(MsgInitiation)}
	binary.BigEndian.PutUint32(header[1:5], MaxMessageLen)
	for _, tc := range []struct {
		name     string
		received int // body bytes sent before the peer stalls
		maxCap   int
	}{
		{"header only", 0, scratchStep},
		{"10 KiB", 10 << 10, scratchStep},
		{"300 KiB", 300 << 10, 2 * 300 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append(bytes.Clone(header), bytes.Repeat([]byte{0}, tc.received)...)
			r := NewReader(&stallingReader{data: in, step: 1500, err: os.ErrDeadlineExceeded})
			_, _, err := r.Next()
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Next(): %v, want the deadline error", err)
			}
			if c := cap(r.scratch); c > tc.maxCap {
				t.Errorf("scratch buffer of %d bytes after %d received, want at most %d", c, tc.received, tc.maxCap)
			}
		})
	}

	// Messages larger than the buffered reader still come out whole, twice in a row (the
	// second reusing the grown buffer), whatever the read sizes.
	big := largeInitiation(t, 200<<10+17)
	stream := append(bytes.Clone(big), big...)
	stream = append(stream, captureStream(t, "bmp-terminate.pcap")...)
	for _, step := range []int{1, 1500, 1 << 20} {
		r := NewReader(&stallingReader{data: stream, step: step, err: io.EOF})
		for i := range 2 {
			h, msg, err := r.Next()
			if err != nil || h.Type != MsgInitiation || !bytes.Equal(msg, big) {
				t.Fatalf("read size %d, message %d: %v, %s of %d bytes, want the %d bytes sent", step, i, err, h.Type, len(msg), len(big))
			}
		}
		if h, _, err := r.Next(); err != nil || h.Type != MsgTermination {
			t.Fatalf("read size %d, after the large messages: %v %s", step, err, h.Type)
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Fatalf("read size %d, at the end: %v", step, err)
		}
	}
}
