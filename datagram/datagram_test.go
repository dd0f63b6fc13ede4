package datagram

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
)

func TestRoundTrip(t *testing.T) {
	now := testutil.Now()
	for _, tc := range []struct {
		name     string
		exporter string
		header   int
	}{
		{"ipv4", "192.0.2.1:2055", 16},
		{"ipv4-mapped", "[::ffff:192.0.2.1]:2055", 16},
		{"ipv6", "[2001:db8::1]:6343", 28},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Datagram{Received: now, Exporter: netip.MustParseAddrPort(tc.exporter), Protocol: SFlow, Payload: []byte{0, 0, 0, 5, 1, 2}}
			rec := Append([]byte("prefix"), d)
			if !bytes.HasPrefix(rec, []byte("prefix")) || len(rec) != 6+tc.header+6 {
				t.Fatalf("record % x: %d bytes", rec, len(rec))
			}
			got, err := Parse(rec[6:])
			if err != nil {
				t.Fatal(err)
			}
			want := netip.AddrPortFrom(d.Exporter.Addr().Unmap(), d.Exporter.Port())
			if !got.Received.Equal(now) || got.Exporter != want || got.Protocol != SFlow || !bytes.Equal(got.Payload, d.Payload) {
				t.Fatalf("got %+v, want %+v", got, d)
			}
		})
	}
}

// TestLayout pins the bytes of version 1: a reader of another release must find the fields
// where the package documentation says.
func TestLayout(t *testing.T) {
	d := Datagram{Received: time.Unix(0, 0x0102030405060708), Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: []byte{0, 9}}
	want := []byte{1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 192, 0, 2, 1, 0x08, 0x07, 0, 9}
	if got := Append(nil, d); !bytes.Equal(got, want) {
		t.Fatalf("got % x, want % x", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	good := Append(nil, Datagram{Received: testutil.Now(), Exporter: netip.MustParseAddrPort("[2001:db8::1]:1"), Protocol: NetFlow})
	for _, tc := range []struct {
		name string
		rec  []byte
		err  string
	}{
		{"empty", nil, "0 bytes, shorter than the version and flags"},
		{"version", append([]byte{2}, good[1:]...), "byte 0: unknown record version 2"},
		{"reserved", append([]byte{1, 0x81}, good[2:]...), "byte 1: reserved flags set (0x81)"},
		{"protocol", append([]byte{1, 0x04}, good[2:]...), "byte 1: unknown protocol 0"},
		{"short-ipv6", good[:27], "27 bytes, shorter than its header (28)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.rec)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
	if _, err := Parse(append([]byte{9}, good[1:]...)); !errors.Is(err, ErrVersion) {
		t.Fatalf("a newer version must be told apart: %v", err)
	}
}

func TestNoAllocs(t *testing.T) {
	d := Datagram{Received: testutil.Now(), Exporter: netip.MustParseAddrPort("192.0.2.1:2055"), Protocol: NetFlow, Payload: make([]byte, 1400)}
	buf := make([]byte, 0, 2048)
	if n := testing.AllocsPerRun(100, func() {
		rec := Append(buf[:0], d)
		if _, err := Parse(rec); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per record", n)
	}
}

// FuzzParse reads arbitrary records: no panic, and a record that parses is written back by
// Append byte for byte (the format has one encoding per datagram).
func FuzzParse(f *testing.F) {
	for _, p := range testdata.AllCaptures(f) {
		dgs, err := pcapfile.ReadUDP(p)
		if err != nil {
			continue
		}
		for _, dg := range dgs {
			f.Add(Append(nil, Datagram{Received: dg.Time, Exporter: dg.Src, Protocol: NetFlow, Payload: dg.Payload}))
		}
	}
	f.Add(Append(nil, Datagram{Exporter: netip.MustParseAddrPort("[2001:db8::1]:6343"), Protocol: SFlow}))
	f.Fuzz(func(t *testing.T, rec []byte) {
		d, err := Parse(rec)
		if err != nil {
			return
		}
		if len(d.Payload) > len(rec) {
			t.Fatalf("payload of %d bytes from a record of %d", len(d.Payload), len(rec))
		}
		if again := Append(nil, d); !bytes.Equal(again, rec) {
			if rec[1]&flagIPv6 != 0 && d.Exporter.Addr().Is4() {
				return // an IPv4-mapped address, unmapped: written back as IPv4
			}
			t.Fatalf("record % x reads back as % x", rec, again)
		}
	})
}
