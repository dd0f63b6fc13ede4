package datagram

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"flowzero/internal/testutil"
)

func batchOf(ds ...Datagram) []byte {
	rec := AppendBatch(nil)
	for _, d := range ds {
		rec = AppendEntry(rec, d)
	}
	return rec
}

func readAll(t testing.TB, rec []byte) ([]Datagram, error) {
	t.Helper()
	out, _, err := readCounting(rec)
	return out, err
}

// readCounting reads rec whole: its datagrams, the number not read, and the first error.
func readCounting(rec []byte) ([]Datagram, int, error) {
	var out []Datagram
	r := NewReader(rec)
	for r.Next() {
		out = append(out, r.Datagram())
	}
	return out, r.Invalid(), r.Err()
}

func TestBatchRoundTrip(t *testing.T) {
	now := testutil.Now()
	ds := []Datagram{
		{Received: now, Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: []byte{0, 9, 1}},
		{Received: now.Add(time.Microsecond), Exporter: netip.MustParseAddrPort("[2001:db8::1]:6343"), Protocol: SFlow, Payload: []byte{0, 0, 0, 5}},
		{Received: now.Add(2 * time.Microsecond), Exporter: netip.MustParseAddrPort("[::ffff:192.0.2.7]:9995"), Protocol: NetFlow},
	}
	rec := batchOf(ds...)
	want := 4
	for _, d := range ds {
		want += EntryLen(d)
	}
	if len(rec) != want || BatchLen(rec) != 3 {
		t.Fatalf("record of %d bytes (want %d), BatchLen %d", len(rec), want, BatchLen(rec))
	}
	got, err := readAll(t, rec)
	if err != nil || len(got) != 3 {
		t.Fatalf("read %d datagrams, error %v", len(got), err)
	}
	for i, d := range ds {
		exp := netip.AddrPortFrom(d.Exporter.Addr().Unmap(), d.Exporter.Port())
		if !got[i].Received.Equal(d.Received) || got[i].Exporter != exp || got[i].Protocol != d.Protocol || !bytes.Equal(got[i].Payload, d.Payload) {
			t.Errorf("entry %d: got %+v, want %+v", i, got[i], d)
		}
	}
}

// TestBatchLayout pins the bytes of version 2.
func TestBatchLayout(t *testing.T) {
	d := Datagram{Received: time.Unix(0, 0x0102030405060708), Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: []byte{0, 9}}
	want := []byte{2, 0, 0, 2,
		0, 0, 0, 18, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 192, 0, 2, 1, 0x08, 0x07, 0, 9,
		0, 0, 0, 18, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 192, 0, 2, 1, 0x08, 0x07, 0, 9}
	if got := batchOf(d, d); !bytes.Equal(got, want) {
		t.Fatalf("got % x, want % x", got, want)
	}
}

// TestReaderVersion1: a version 1 record reads as one datagram (records of older inlets).
func TestReaderVersion1(t *testing.T) {
	d := Datagram{Received: testutil.Now(), Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: []byte{0, 9}}
	rec := Append(nil, d)
	got, err := readAll(t, rec)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Payload, d.Payload) || BatchLen(rec) != 1 {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got, err := readAll(t, []byte{9, 0}); len(got) != 0 || err == nil || !strings.Contains(err.Error(), "byte 0") {
		t.Fatalf("unknown version: got %d datagrams, error %v", len(got), err)
	}
}

func TestReaderErrors(t *testing.T) {
	d := Datagram{Received: testutil.Now(), Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: []byte{0, 9}}
	good := batchOf(d, d)
	for _, tc := range []struct {
		name string
		rec  []byte
		good int // datagrams read before the error
		err  string
	}{
		{"short header", []byte{2, 0, 0}, 0, "shorter than its header"},
		{"reserved flags", []byte{2, 1, 0, 1}, 0, "byte 1: reserved flags"},
		{"no entries", []byte{2, 0, 0, 0}, 0, "bytes 2-3: no entries"},
		{"count too high", append([]byte{2, 0, 0, 3}, good[4:]...), 2, "entry 2 at byte 48: the record ends (3 entries declared)"},
		{"count too low", append([]byte{2, 0, 0, 1}, good[4:]...), 1, "byte 26: 22 bytes after the last of its 1 entries"},
		{"entry cut", good[:len(good)-1], 1, "entry 1 at byte 26: length 18 runs past the record's end (17 bytes left)"},
		{"entry length cut", good[:28], 1, "entry 1 at byte 26: the record ends"},
		{"bad entry", append(good[:26:26], 0, 0, 0, 2, 7, 1), 1, "entry 1 at byte 26: datagram record: byte 0: unknown record version 7"},
		{"entry header cut", append(good[:26:26], 0, 0, 0, 3, 1, 1, 0), 1, "entry 1 at byte 26: datagram record: 3 bytes, shorter than its header (16)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.rec)
			if len(got) != tc.good || err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %d datagrams and error %v, want %d and %q", len(got), err, tc.good, tc.err)
			}
		})
	}
}

// An entry whose length holds but whose datagram does not parse costs that datagram only:
// the entries after it are read, and each bad one is counted.
func TestReaderSkipsBadEntries(t *testing.T) {
	d := Datagram{Received: testutil.Now(), Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: []byte{1, 2, 3}}
	rec := AppendBatch(nil)
	var starts []int
	for i := range 5 {
		starts = append(starts, len(rec))
		d.Payload = []byte{byte(i)}
		rec = AppendEntry(rec, d)
	}
	rec[starts[1]+entryHeader] = 9       // entry 1: unknown record version
	rec[starts[3]+entryHeader+1] |= 0x80 // entry 3: reserved flags
	got, invalid, err := readCounting(rec)
	if len(got) != 3 || invalid != 2 {
		t.Fatalf("read %d datagrams and %d invalid, want 3 and 2 (error %v)", len(got), invalid, err)
	}
	for i, want := range []byte{0, 2, 4} {
		if got[i].Payload[0] != want {
			t.Errorf("datagram %d is entry %d, want entry %d", i, got[i].Payload[0], want)
		}
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("entry 1 at byte %d: datagram record: byte 0: unknown record version 9", starts[1])) {
		t.Errorf("error %v does not name the first bad entry", err)
	}
	// A length that breaks the framing stops the reader: the rest counts as one.
	rec[starts[4]+3]++
	got, invalid, err = readCounting(rec)
	if len(got) != 2 || invalid != 3 || err == nil {
		t.Errorf("framing broken at entry 4: read %d datagrams and %d invalid (error %v), want 2 and 3", len(got), invalid, err)
	}
}

func TestBatchAllocations(t *testing.T) {
	d := Datagram{Received: testutil.Now(), Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: make([]byte, 1200)}
	buf := make([]byte, 0, 64<<10)
	var n int
	if a := testing.AllocsPerRun(100, func() {
		rec := AppendBatch(buf[:0])
		for range 16 {
			rec = AppendEntry(rec, d)
		}
		r := NewReader(rec)
		for r.Next() {
			n += len(r.Datagram().Payload)
		}
	}); a != 0 || n == 0 {
		t.Fatalf("%v allocations per batch of 16", a)
	}
}

// FuzzReader: any record reads without a panic, as datagrams and a count of those not read
// that add up to at most what it declares (and the bytes after it); what it reads written
// again as a batch reads back the same.
func FuzzReader(f *testing.F) {
	d := Datagram{Received: time.Unix(1700000000, 5), Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: []byte{0, 9}}
	d6 := Datagram{Received: time.Unix(1700000000, 6), Exporter: netip.MustParseAddrPort("[2001:db8::1]:6343"), Protocol: SFlow, Payload: []byte{0, 0, 0, 5}}
	f.Add(batchOf(d, d6))
	f.Add(batchOf(d))
	f.Add(Append(nil, d6))
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, rec []byte) {
		got, invalid, err := readCounting(rec)
		// Bytes after the last declared entry count as one more.
		if len(got)+invalid > BatchLen(rec)+1 {
			t.Fatalf("%d datagrams read and %d invalid, %d declared", len(got), invalid, BatchLen(rec))
		}
		if (err == nil) != (invalid == 0) {
			t.Fatalf("%d invalid, error %v", invalid, err)
		}
		if err == nil && len(got) != BatchLen(rec) {
			t.Fatalf("%d datagrams read without an error, %d declared", len(got), BatchLen(rec))
		}
		if len(got) == 0 {
			return
		}
		again, err := readAll(t, batchOf(got...))
		if err != nil || len(again) != len(got) {
			t.Fatalf("written again: %d datagrams, error %v", len(again), err)
		}
		for i := range got {
			if !again[i].Received.Equal(got[i].Received) || again[i].Exporter != got[i].Exporter ||
				again[i].Protocol != got[i].Protocol || !bytes.Equal(again[i].Payload, got[i].Payload) {
				t.Fatalf("entry %d: %+v written again reads %+v", i, got[i], again[i])
			}
		}
	})
}
