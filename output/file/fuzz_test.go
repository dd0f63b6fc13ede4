package file

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
)

// fuzzReadLimit stops reading a fuzzed archive after this many message bytes: a few bytes of
// zstd or gzip can expand to gigabytes of valid messages, which is not a reader bug.
const fuzzReadLimit = 4 << 20

// archiveCompressions are the sink's compressions, chosen by the fuzzer's byte.
var archiveCompressions = []string{"none", "zstd", "gzip"}

// encodeArchive returns an archive of msgs as the sink writes it: each message length-delimited
// (as the encoder hands them over in batches), through the sink's compression layer.
func encodeArchive(tb testing.TB, compression string, msgs [][]byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	comp, err := newCompressor(&buf, compression)
	if err != nil {
		tb.Fatal(err)
	}
	var out io.Writer = &buf
	if comp != nil {
		out = comp
	}
	for _, m := range msgs {
		if _, err := out.Write(binary.AppendUvarint(nil, uint64(len(m)))); err != nil {
			tb.Fatal(err)
		}
		if _, err := out.Write(m); err != nil {
			tb.Fatal(err)
		}
	}
	if comp != nil {
		if err := comp.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return buf.Bytes()
}

// readArchive reads every message of data until an error (io.EOF for a clean end) or
// fuzzReadLimit bytes, copying each message.
func readArchive(t *testing.T, data []byte) ([][]byte, error) {
	r, err := newReader(bytes.NewReader(data), "fuzz")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var (
		msgs [][]byte
		read int
	)
	for read < fuzzReadLimit {
		m, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && err.Error() == "" {
				t.Fatal("error without a message")
			}
			return msgs, err
		}
		if len(m) > MaxMessageSize {
			t.Fatalf("message %d: %d bytes over MaxMessageSize", len(msgs)+1, len(m))
		}
		msgs = append(msgs, bytes.Clone(m))
		read += len(m)
	}
	return msgs, nil
}

// fuzzMessages splits contents into messages: a 2-byte little-endian length (cut to what is
// left), then that many bytes, so that messages hold any bytes and span 1- to 3-byte varints.
func fuzzMessages(contents []byte) [][]byte {
	msgs := [][]byte{}
	for len(contents) >= 2 {
		n := min(int(binary.LittleEndian.Uint16(contents)), len(contents)-2)
		msgs = append(msgs, contents[2:2+n])
		contents = contents[2+n:]
	}
	return msgs
}

// fuzzContents returns the contents that fuzzMessages splits into msgs.
func fuzzContents(msgs ...[]byte) []byte {
	var c []byte
	for _, m := range msgs {
		c = binary.LittleEndian.AppendUint16(c, uint16(len(m)))
		c = append(c, m...)
	}
	return c
}

// flowLikeMessages are seeds shaped like the flows the file test writes, plus an empty message
// and one whose length needs a 3-byte varint.
func flowLikeMessages() [][]byte {
	var msgs [][]byte
	for i := range 5 {
		msgs = append(msgs, []byte(fmt.Sprintf("flow-%06d", i)))
	}
	return append(msgs, nil, bytes.Repeat([]byte{0x0a, 0x80}, 9000))
}

// FuzzFileReader feeds arbitrary bytes to the archive reader: it never panics nor hangs, and
// refuses a message over MaxMessageSize. For an uncompressed archive, the messages of a read
// that ends cleanly are exactly the input's length-delimited messages (parsed here from the
// slice with binary.Uvarint), in order, and cover it whole.
func FuzzFileReader(f *testing.F) {
	for _, comp := range archiveCompressions {
		enc := encodeArchive(f, comp, flowLikeMessages()[:5])
		f.Add(enc)
		f.Add(enc[:len(enc)-1])
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := readArchive(t, data)
		if !errors.Is(err, io.EOF) || len(data) >= 4 && (bytes.Equal(data[:4], []byte{0x28, 0xb5, 0x2f, 0xfd}) || data[0] == 0x1f && data[1] == 0x8b) {
			return
		}
		rest := data
		for i, m := range msgs {
			size, n := binary.Uvarint(rest)
			if n <= 0 || size != uint64(len(m)) || len(rest)-n < len(m) || !bytes.Equal(rest[n:n+len(m)], m) {
				t.Fatalf("message %d of %d bytes is not the input's next length-delimited message", i+1, len(m))
			}
			rest = rest[n+len(m):]
		}
		if len(rest) != 0 {
			t.Fatalf("clean end after %d messages with %d bytes left", len(msgs), len(rest))
		}
	})
}

// FuzzFileReaderRoundTrip writes messages of any contents the way the sink does, with each
// compression, and reads them back identically. The archive cut short (a crashed collector)
// reads as a prefix of the messages and, but for an empty file or an uncompressed one cut
// between two messages, ends with an error. An archive with one byte changed never reads to a clean end
// with other messages than those written when compressed (zstd and gzip checksum their
// content), unless the byte is in the magic number; uncompressed, it has no checksum to catch
// the change.
func FuzzFileReaderRoundTrip(f *testing.F) {
	for i := range archiveCompressions {
		f.Add(uint8(i), fuzzContents(flowLikeMessages()...), uint32(40), uint32(7), uint8(0x01))
		f.Add(uint8(i), fuzzContents([]byte("single")), uint32(3), uint32(0), uint8(0x80))
	}
	f.Fuzz(func(t *testing.T, compIndex uint8, contents []byte, cut, flipAt uint32, flip uint8) {
		comp := archiveCompressions[int(compIndex)%len(archiveCompressions)]
		msgs := fuzzMessages(contents)
		enc := encodeArchive(t, comp, msgs)
		got, err := readArchive(t, enc)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("%s: reading what was written: %v", comp, err)
		}
		if !equalMessages(got, msgs) {
			t.Fatalf("%s: read %d messages, wrote %d, or their bytes differ", comp, len(got), len(msgs))
		}
		if len(enc) == 0 {
			return
		}

		n := int(cut % uint32(len(enc)))
		got, err = readArchive(t, enc[:n])
		if len(got) > len(msgs) || !equalMessages(got, msgs[:len(got)]) {
			t.Fatalf("%s cut at %d of %d bytes: %d messages read are not the first written", comp, n, len(enc), len(got))
		}
		// An empty file is an empty archive, whatever compression its name says.
		if errors.Is(err, io.EOF) && n > 0 && (comp != "none" || n != framedLen(got)) {
			t.Fatalf("%s cut at %d of %d bytes: clean end after %d of %d messages", comp, n, len(enc), len(got), len(msgs))
		}

		if flip == 0 || comp == "none" {
			return
		}
		// A changed magic number makes another format of the file, read as such: the reader
		// detects the compression from the content, not from the file's name.
		magicLen := map[string]int{"zstd": 4, "gzip": 2}[comp]
		at := magicLen + int(flipAt%uint32(len(enc)-magicLen))
		bad := bytes.Clone(enc)
		bad[at] ^= flip
		got, err = readArchive(t, bad)
		if errors.Is(err, io.EOF) && !equalMessages(got, msgs) {
			t.Fatalf("%s with byte %d changed: clean end with other messages than written", comp, at)
		}
	})
}

func equalMessages(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// framedLen is the size of msgs length-delimited.
func framedLen(msgs [][]byte) int {
	n := 0
	for _, m := range msgs {
		n += len(binary.AppendUvarint(nil, uint64(len(m)))) + len(m)
	}
	return n
}
