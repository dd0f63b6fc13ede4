package pbwire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The Buffer writers have fast paths of their own (keys and varints stored 8 bytes at a time,
// strings copied with overlapping loads, packed arrays written in a masked window, the
// reserve written without checks). These tests compare every path, at every length boundary
// and with keys of 1 to 5 bytes, byte for byte with the Append*Field functions.

// bufferTagNums give keys of every length, 1 to 5 bytes. (string([]rune(s)) below replaces each
// byte of s that is not valid UTF-8 by U+FFFD, as AppendUTF8Field must.)
var bufferTagNums = []int{1, 15, 16, 2047, 2048, 262143, 262144, MaxFieldNumber}

// newBuffer returns a Buffer whose message already holds a prefix, so that fields do not
// start at the array's beginning, and with room bytes free before it grows (-1: plenty).
func newBuffer(t testing.TB, room, reserved int) *Buffer {
	t.Helper()
	var b Buffer
	b.Init(64+max(room, 0), reserved)
	b.AppendVarintField(MakeTag(1, Varint), 150)
	if room >= 0 {
		b.buf = b.buf[:b.n+room]
		b.buf = b.buf[: len(b.buf) : len(b.buf)+b.reserve]
	} else {
		b.grow(4096)
	}
	return &b
}

// prefix is what newBuffer writes first.
var prefix = AppendVarintField(nil, MakeTag(1, Varint), 150)

func checkPayload(t *testing.T, b *Buffer, want []byte, what string) {
	t.Helper()
	want = append(bytes.Clone(prefix), want...)
	if got := b.Payload(); !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got % x\nwant % x", what, got, want)
	}
	if b.n > len(b.buf) || cap(b.buf)-len(b.buf) != b.reserve {
		t.Fatalf("%s: end %d, length %d, capacity %d, reserve %d", what, b.n, len(b.buf), cap(b.buf), b.reserve)
	}
}

func TestBufferVarint(t *testing.T) {
	for _, num := range bufferTagNums {
		tag := MakeTag(num, Varint)
		for _, v := range varintSamples() {
			want := AppendVarintField(nil, tag, v)
			for _, room := range []int{0, 1, len(want), wideRoom - 1, wideRoom, -1} {
				b := newBuffer(t, room, 0)
				b.AppendVarintField(tag, v)
				checkPayload(t, b, want, fmt.Sprintf("field %d = %#x, room %d", num, v, room))
				b = newBuffer(t, room, 1)
				b.AppendVarintFieldReserved(tag, v)
				if b.n > cap(b.buf) {
					t.Fatalf("reserved field %d = %#x: end %d past the capacity %d", num, v, b.n, cap(b.buf))
				}
				b.AppendVarintField(tag, v) // a checked writer restores the reserve
				checkPayload(t, b, append(bytes.Clone(want), want...), fmt.Sprintf("reserved field %d = %#x, room %d", num, v, room))
			}
		}
	}
}

// TestBufferReserve fills the reserve: with the array full to its length, as a checked
// writer may leave it, every reserved field at its widest still lands inside the capacity,
// and whichever checked writer comes next grows the array and keeps the reserve.
func TestBufferReserve(t *testing.T) {
	const fields = 40
	tag := MakeTag(MaxFieldNumber, Varint)
	next := map[string]func(b *Buffer) []byte{
		"varint": func(b *Buffer) []byte { b.AppendVarintField(tag, 1); return AppendVarintField(nil, tag, 1) },
		"string": func(b *Buffer) []byte { b.AppendStringField(tag, "edge1"); return AppendStringField(nil, tag, "edge1") },
		"utf8": func(b *Buffer) []byte {
			b.AppendUTF8Field(tag, "transit")
			return AppendStringField(nil, tag, "transit")
		},
		"long": func(b *Buffer) []byte {
			s := strings.Repeat("x", 40000) // the array moves, with room to spare
			b.AppendStringField(tag, s)
			return AppendStringField(nil, tag, s)
		},
		"bytes16": func(b *Buffer) []byte {
			v := netip.MustParseAddr("192.0.2.1").As16()
			lo, hi := words(v)
			b.AppendBytes16Field(tag, lo, hi)
			return AppendBytesField(nil, tag, v[:])
		},
		"packed": func(b *Buffer) []byte {
			b.AppendPackedUint32Field(tag, []uint32{16, 17})
			return AppendPackedUint32Field(nil, tag, []uint32{16, 17})
		},
		"raw": func(b *Buffer) []byte {
			raw := append(make([]byte, 0, 64), "raw fields"...)
			b.AppendRaw(raw)
			return raw
		},
		"room": func(b *Buffer) []byte {
			b.Grow(MaxRoomFieldLen)
			r := b.Room()
			b.Commit(r.AppendVarintField(tag, 1))
			return AppendVarintField(nil, tag, 1)
		},
	}
	for name, write := range next {
		for room := range 20 {
			b := newBuffer(t, room, fields)
			var want []byte
			for range fields {
				b.AppendVarintFieldReserved(tag, 1<<64-1)
				want = AppendVarintField(want, tag, 1<<64-1)
			}
			if b.n > cap(b.buf) {
				t.Fatalf("room %d: end %d past the capacity %d", room, b.n, cap(b.buf))
			}
			want = append(want, write(b)...)
			checkPayload(t, b, want, fmt.Sprintf("%s, room %d", name, room))
		}
	}
}

func TestBufferStrings(t *testing.T) {
	var inputs []string
	for l := 0; l <= 300; l++ {
		var s strings.Builder
		for i := range l {
			s.WriteByte(byte('!' + (i*7+l)%90))
		}
		inputs = append(inputs, s.String())
	}
	for l := 1; l <= 20; l++ {
		inputs = append(inputs, strings.Repeat("é", l), strings.Repeat("a", l)+"日本", "x"+strings.Repeat("\U0001F600", l))
		for pos := 0; pos < l; pos++ {
			invalid := []byte(strings.Repeat("b", l))
			invalid[pos] = 0xff
			inputs = append(inputs, string(invalid))
		}
	}
	for _, num := range bufferTagNums {
		tag := MakeTag(num, Bytes)
		for _, s := range inputs {
			for _, room := range []int{0, len(s), len(s) + wideRoom, -1} {
				what := fmt.Sprintf("field %d = %q (%d bytes), room %d", num, s, len(s), room)
				b := newBuffer(t, room, 0)
				b.AppendStringField(tag, s)
				checkPayload(t, b, AppendStringField(nil, tag, s), what)
				b = newBuffer(t, room, 0)
				b.AppendBytesField(tag, []byte(s))
				checkPayload(t, b, AppendStringField(nil, tag, s), what+" as bytes")
				b = newBuffer(t, room, 0)
				valid := b.AppendUTF8Field(tag, s)
				checkPayload(t, b, AppendStringField(nil, tag, string([]rune(s))), what+" as UTF-8")
				if valid != utf8.ValidString(s) {
					t.Fatalf("%s: AppendUTF8Field reports valid %v", what, valid)
				}
			}
		}
	}
}

func TestBufferShortString(t *testing.T) {
	for _, num := range bufferTagNums {
		tag := MakeTag(num, Bytes)
		for l := 8; l <= 16; l++ {
			s := "interface-name-of-sixteen"[:l]
			b := newBuffer(t, 0, 0)
			b.Grow(MaxRoomFieldLen)
			b.Commit(b.Room().AppendShortStringField(tag, s))
			checkPayload(t, b, AppendStringField(nil, tag, s), fmt.Sprintf("field %d = %q", num, s))
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("no panic for a string under 8 bytes")
		}
	}()
	b := newBuffer(t, -1, 0)
	b.Room().AppendShortStringField(MakeTag(1, Bytes), "short")
}

func TestBufferBytes16(t *testing.T) {
	for _, num := range bufferTagNums {
		tag := MakeTag(num, Bytes)
		for _, s := range []string{"192.0.2.1", "0.0.0.0", "::", "2001:db8::1", "fe80::1%eth0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
			v := netip.MustParseAddr(s).As16()
			want := AppendBytesField(nil, tag, v[:])
			for _, room := range []int{0, 20, -1} {
				b := newBuffer(t, room, 0)
				lo, hi := words(v)
				b.AppendBytes16Field(tag, lo, hi)
				checkPayload(t, b, want, fmt.Sprintf("field %d = %s, room %d", num, s, room))
			}
			b := newBuffer(t, 0, 0)
			b.Grow(MaxRoomFieldLen)
			r := b.Room()
			lo, hi := words(v)
			b.Commit(r.AppendBytes16Field(tag, lo, hi))
			checkPayload(t, b, want, fmt.Sprintf("field %d = %s through a Room", num, s))
		}
	}
}

// words splits 16 bytes into the two little-endian words AppendBytes16Field takes.
func words(v [16]byte) (lo, hi uint64) {
	return binary.LittleEndian.Uint64(v[:8]), binary.LittleEndian.Uint64(v[8:])
}

func TestBufferPacked(t *testing.T) {
	for _, num := range bufferTagNums {
		tag := MakeTag(num, Bytes)
		for l := 0; l <= 40; l++ {
			vs := make([]uint32, l)
			vs64 := make([]uint64, l)
			for i := range vs {
				// Every varint length, 1 to 5 bytes.
				vs[i] = uint32(1)<<(7*(i%5)+i%7) - uint32(i%3)
				vs64[i] = uint64(vs[i]) << (i % 30)
			}
			for _, room := range []int{0, packedWindow - 1, -1} {
				what := fmt.Sprintf("field %d, %d values, room %d", num, l, room)
				b := newBuffer(t, room, 0)
				b.AppendPackedUint32Field(tag, vs)
				checkPayload(t, b, AppendPackedUint32Field(nil, tag, vs), what)
				b = newBuffer(t, room, 0)
				b.AppendPackedUint64Field(tag, vs64)
				checkPayload(t, b, AppendPackedUint64Field(nil, tag, vs64), what+" uint64")
			}
		}
	}
}

func TestBufferRaw(t *testing.T) {
	for l := 0; l <= 70; l++ {
		raw := make([]byte, l, l+rawStep)
		for i := range raw {
			raw[i] = byte(i + 1)
		}
		for _, room := range []int{0, l, l + rawStep, -1} {
			what := fmt.Sprintf("%d bytes, room %d", l, room)
			b := newBuffer(t, room, 0)
			b.AppendRaw(raw)
			checkPayload(t, b, raw, what)
			b = newBuffer(t, room, 0)
			b.AppendRaw(raw[:l:l]) // no capacity past the end: no 16-byte steps
			checkPayload(t, b, raw, what+", no spare capacity")
			b = newBuffer(t, room, 0)
			b.Grow(l + RawPad)
			r := b.Room()
			if r.Available() < l+RawPad {
				t.Fatalf("%s: %d bytes available after Grow(%d)", what, r.Available(), l+RawPad)
			}
			b.Commit(r.AppendRaw(MakeRaw(raw)))
			checkPayload(t, b, raw, what+", through a Room")
		}
	}
}

// TestBufferAsRaw checks that a Buffer's message, taken as a Raw whatever the room left past
// it, appends the same bytes to another message.
func TestBufferAsRaw(t *testing.T) {
	for l := 0; l <= 70; l++ {
		for _, room := range []int{0, 1, RawPad - 1, RawPad, -1} {
			src := newBuffer(t, room, 0)
			b := newBuffer(t, room, 0)
			raw := bytes.Repeat([]byte{0x2a}, l)
			src.AppendRaw(raw)
			r := src.Raw()
			if r.Len() != l+len(prefix) || cap(r.Bytes())-r.Len() < RawPad {
				t.Fatalf("%d bytes, room %d: Raw of %d bytes, capacity %d", l, room, r.Len(), cap(r.Bytes()))
			}
			b.Grow(r.Len() + RawPad)
			b.Commit(b.Room().AppendRaw(r))
			checkPayload(t, b, append(bytes.Clone(prefix), raw...), fmt.Sprintf("%d bytes, room %d", l, room))
		}
	}
}

// TestBufferRoomTooSmall checks that Room.AppendRaw panics rather than writing past the room
// the Buffer has.
func TestBufferRoomTooSmall(t *testing.T) {
	b := newBuffer(t, 20+RawPad-1, 0)
	defer func() {
		if recover() == nil {
			t.Error("no panic past the Room")
		}
	}()
	b.Room().AppendRaw(MakeRaw(make([]byte, 20)))
}

func TestBufferDelimited(t *testing.T) {
	for _, l := range []int{0, 1, 127, 128, 1<<14 - 1, 1 << 14, 1 << 21} {
		var b Buffer
		b.Init(64, 4)
		msg := bytes.Repeat([]byte{0x2a}, l)
		b.AppendRaw(msg)
		if b.Len() != l || !bytes.Equal(b.Payload(), msg) {
			t.Fatalf("length %d: Len() = %d", l, b.Len())
		}
		want := protowire.AppendBytes(nil, msg)
		if got := b.Delimited(); !bytes.Equal(got, want) {
			t.Fatalf("length %d: Delimited() = % x..., want % x...", l, got[:min(len(got), 8)], want[:min(len(want), 8)])
		}
	}
}

func TestBufferAllocs(t *testing.T) {
	var b Buffer
	b.Init(256, 4)
	vs := []uint32{174, 3356, 64500}
	v := netip.MustParseAddr("2001:db8::1").As16()
	raw := append(make([]byte, 0, 32), "raw"...)
	lo, hi := words(v)
	if a := testing.AllocsPerRun(1000, func() {
		b.Reset()
		b.AppendVarintFieldReserved(MakeTag(1, Varint), 1500)
		b.AppendVarintField(MakeTag(2, Varint), 1<<40)
		b.AppendUTF8Field(MakeTag(3, Bytes), "et-0/0/1")
		b.AppendUTF8Field(MakeTag(3, Bytes), "caf\xe9")
		b.AppendBytes16Field(MakeTag(4, Bytes), lo, hi)
		b.AppendPackedUint32Field(MakeTag(5, Bytes), vs)
		b.AppendRaw(raw)
		b.Grow(2 * MaxRoomFieldLen)
		r := b.Room()
		r = r.AppendVarintField(MakeTag(6, Varint), 64500)
		b.Commit(r.AppendBytes16Field(MakeTag(7, Bytes), lo, hi))
		b.Delimited()
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// FuzzBuffer writes arbitrary fields through a Buffer, whose array starts small and grows,
// and through the Append*Field functions, and compares the bytes. It is seeded with the
// records of real captures (see addCaptureSeeds).
func FuzzBuffer(f *testing.F) {
	addCaptureSeeds(f)
	f.Add([]byte{0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 5, 2, 0, 0, 0, 0, 3, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Buffer
		b.Init(int(len(data)%64), 8)
		reserved := 0
		var want []byte
		p := &program{data: data}
		for ops := 0; len(p.data) > 0 && ops < 1000; ops++ {
			op := p.byte() % 8
			num := p.num()
			switch op {
			case 0:
				v := p.uint64()
				b.AppendVarintField(MakeTag(num, Varint), v)
				want = AppendVarintField(want, MakeTag(num, Varint), v)
				reserved = 0
			case 1:
				v := p.uint64()
				if reserved == 8 {
					continue
				}
				b.AppendVarintFieldReserved(MakeTag(num, Varint), v)
				want = AppendVarintField(want, MakeTag(num, Varint), v)
				reserved++
			case 2, 3:
				n := min(int(p.byte())*int(p.byte()%4+1), len(p.data))
				s := string(p.data[:n])
				p.data = p.data[n:]
				if op == 2 {
					b.AppendStringField(MakeTag(num, Bytes), s)
					want = AppendStringField(want, MakeTag(num, Bytes), s)
				} else {
					if b.AppendUTF8Field(MakeTag(num, Bytes), s) != utf8.ValidString(s) {
						t.Fatalf("AppendUTF8Field(%q): wrong validity", s)
					}
					want = AppendStringField(want, MakeTag(num, Bytes), string([]rune(s)))
				}
			case 4:
				var v [16]byte
				for i := range v {
					v[i] = p.byte()
				}
				lo, hi := words(v)
				b.AppendBytes16Field(MakeTag(num, Bytes), lo, hi)
				want = AppendBytesField(want, MakeTag(num, Bytes), v[:])
			case 5:
				vs := make([]uint32, p.byte()%40)
				for i := range vs {
					vs[i] = uint32(p.uint64())
				}
				b.AppendPackedUint32Field(MakeTag(num, Bytes), vs)
				want = AppendPackedUint32Field(want, MakeTag(num, Bytes), vs)
			case 6:
				spare := int(p.byte() % 32)
				n := min(int(p.byte()), len(p.data))
				raw := append(make([]byte, 0, n+spare), p.data[:n]...)
				p.data = p.data[n:]
				if spare%2 == 0 {
					b.AppendRaw(raw)
				} else {
					b.Grow(n + RawPad)
					b.Commit(b.Room().AppendRaw(MakeRaw(raw)))
				}
				want = append(want, raw...)
			case 7:
				v, a := p.uint64(), [16]byte{p.byte()}
				b.Grow(2 * MaxRoomFieldLen)
				r := b.Room()
				r = r.AppendVarintField(MakeTag(num, Varint), v)
				lo, hi := words(a)
				b.Commit(r.AppendBytes16Field(MakeTag(num, Bytes), lo, hi))
				want = AppendVarintField(want, MakeTag(num, Varint), v)
				want = AppendBytesField(want, MakeTag(num, Bytes), a[:])
			}
			if op != 1 {
				reserved = 0
			}
		}
		if got := b.Payload(); !bytes.Equal(got, want) {
			t.Fatalf("Buffer wrote\n%x\nthe Append functions\n%x", got, want)
		}
		framed := append(make([]byte, ReserveDelimited), want...)
		if got := b.Delimited(); !bytes.Equal(got, FinishDelimited(framed, 0)) {
			t.Fatalf("Delimited() = %x", got)
		}
	})
}
