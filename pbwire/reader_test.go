package pbwire

import (
	"bytes"
	"errors"
	"google.golang.org/protobuf/encoding/protowire"
	"io"
	"math"
	"testing"
)

func TestReader(t *testing.T) {
	s := conformanceSamples()["extremes"]
	msg := appendSample(nil, s)
	r := NewReader(msg)
	seen := map[int32]Field{}
	for r.Next() {
		f := r.Field()
		seen[f.Num] = f
	}
	if err := r.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	if r.Offset() != len(msg) {
		t.Fatalf("Offset() = %d, want %d", r.Offset(), len(msg))
	}
	check := func(num int32, wt WireType, ok bool, what string) {
		t.Helper()
		f, found := seen[num]
		if !found || f.Type != wt || !ok {
			t.Errorf("field %d (%s): %+v", num, what, f)
		}
	}
	f := func(n int32) *Field { x := seen[n]; return &x }
	check(1, Varint, f(1).Int32() == math.MinInt32, "int32")
	check(2, Varint, int64(f(2).Varint) == math.MinInt64, "int64")
	check(3, Varint, f(3).Varint == math.MaxUint32, "uint32")
	check(4, Varint, f(4).Varint == math.MaxUint64, "uint64")
	check(5, Varint, f(5).Sint32() == math.MinInt32, "sint32")
	check(6, Varint, f(6).Sint64() == math.MinInt64, "sint64")
	check(7, Fixed32, f(7).Fixed == math.MaxUint32, "fixed32")
	check(8, Fixed64, f(8).Fixed == math.MaxUint64, "fixed64")
	check(9, Fixed32, int32(f(9).Fixed) == math.MinInt32, "sfixed32")
	check(10, Fixed64, int64(f(10).Fixed) == math.MinInt64, "sfixed64")
	check(11, Fixed32, math.IsInf(float64(f(11).Float()), -1), "float")
	check(12, Fixed64, f(12).Double() == math.MaxFloat64, "double")
	check(13, Varint, !f(13).Bool(), "bool")
	check(14, Varint, f(14).Varint == 300, "enum")
	check(15, Bytes, string(f(15).Bytes) == s.str, "string")
	check(16, Bytes, bytes.Equal(f(16).Bytes, s.bytes), "bytes")
	check(2000, Bytes, string(f(2000).Bytes) == s.str2000, "string field 2000")
	check(100000, Varint, f(100000).Varint == 1<<40, "uint64 field 100000")

	// Zero copy: the bytes are a window on the message.
	b := f(16).Bytes
	if i := bytes.Index(msg, b); i < 0 || &msg[i] != &b[0] {
		t.Error("Field.Bytes is a copy, want a sub-slice of the message")
	}

	// Packed fields.
	for _, tc := range []struct {
		num  int32
		elem WireType
		want []uint64
	}{
		{17, Varint, []uint64{0, 127, 128, 16383, 16384, math.MaxUint32}},
		{18, Varint, s.pu64},
		{19, Fixed32, []uint64{0, math.MaxUint32}},
		{20, Fixed64, []uint64{0, math.MaxUint64}},
	} {
		p := f(tc.num).Packed(tc.elem)
		var got []uint64
		for p.Next() {
			got = append(got, p.Value())
		}
		if p.Err() != nil || len(got) != len(tc.want) {
			t.Errorf("packed field %d = %v, want %v: %v", tc.num, got, tc.want, p.Err())
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("packed field %d = %v, want %v", tc.num, got, tc.want)
				break
			}
		}
	}
}

func TestReaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input []byte
		want  error
	}{
		{"truncated key", []byte{0x80}, ErrTruncated},
		{"truncated varint", []byte{0x08, 0x80, 0x80}, ErrTruncated},
		{"missing varint", []byte{0x08}, ErrTruncated},
		{"truncated fixed32", []byte{0x0d, 1, 2, 3}, ErrTruncated},
		{"truncated fixed64", []byte{0x09, 1, 2, 3, 4, 5, 6, 7}, ErrTruncated},
		{"truncated length", []byte{0x0a, 0x80}, ErrTruncated},
		{"length past the end", []byte{0x0a, 0x05, 1, 2, 3, 4}, ErrLength},
		{"huge length", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrLength},
		{"start group", []byte{0x0b}, ErrWireType},
		{"end group", []byte{0x0c}, ErrWireType},
		{"wire type 6", []byte{0x0e, 0}, ErrWireType},
		{"wire type 7", []byte{0x0f, 0}, ErrWireType},
		{"varint of 11 bytes", []byte{0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, ErrVarintOverflow},
		{"varint over 64 bits", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, ErrVarintOverflow},
		{"field number 0", []byte{0x00, 0x01}, ErrFieldNumber},
		{"field number 0 with a long key", []byte{0x80, 0x00, 0x01}, ErrFieldNumber},
		{"field number above 2^29-1", []byte{0xf8, 0xff, 0xff, 0xff, 0x1f, 0x01}, ErrFieldNumber},
		{"good field then a bad one", []byte{0x08, 0x01, 0x0b}, ErrWireType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(tc.input)
			for r.Next() {
			}
			if !errors.Is(r.Err(), tc.want) {
				t.Fatalf("Err() = %v, want %v", r.Err(), tc.want)
			}
			if r.Next() {
				t.Fatal("Next() = true after an error")
			}
			if _, err := Compact(bytes.Clone(tc.input)); !errors.Is(err, tc.want) {
				t.Fatalf("Compact() error = %v, want %v", err, tc.want)
			}
		})
	}

	// A 10-byte varint with a last byte of 1 is the largest valid one.
	var f Field
	if _, err := ReadField([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, &f); err != nil || f.Varint != math.MaxUint64 {
		t.Fatalf("ReadField(max uint64) = %#x, %v", f.Varint, err)
	}

	// Packed errors.
	for _, tc := range []struct {
		input []byte
		elem  WireType
	}{
		{[]byte{0x01, 0x80}, Varint},
		{[]byte{1, 2, 3, 4, 5}, Fixed32},
		{[]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, Fixed64},
		{[]byte{1}, Bytes},
	} {
		p := NewPacked(tc.input, tc.elem)
		for p.Next() {
		}
		if p.Err() == nil {
			t.Errorf("NewPacked(%x, %s): no error", tc.input, tc.elem)
		}
	}
}

func TestDelimitedReader(t *testing.T) {
	var stream []byte
	var want [][]byte
	for i, n := range []int{0, 5, 200, 70000} {
		start := len(stream)
		stream = append(stream, make([]byte, ReserveDelimited)...)
		for j := range n {
			stream = append(stream, byte(i+j))
		}
		framed := FinishDelimited(stream, start)
		want = append(want, bytes.Clone(framed[len(framed)-n:]))
		// Drop the unused part of the reserved room.
		stream = append(stream[:start], framed...)
	}
	d := NewDelimitedReader(bytes.NewReader(stream), 1<<20)
	for i, w := range want {
		got, err := d.Next()
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("message %d: %d bytes, want %d: %v", i, len(got), len(w), err)
		}
	}
	if _, err := d.Next(); err != io.EOF {
		t.Fatalf("Next() at the end = %v, want io.EOF", err)
	}

	// The in-memory splitter agrees.
	rest := stream
	for i, w := range want {
		var msg []byte
		var err error
		msg, rest, err = SplitDelimited(rest)
		if err != nil || !bytes.Equal(msg, w) {
			t.Fatalf("SplitDelimited() message %d: %d bytes, want %d: %v", i, len(msg), len(w), err)
		}
	}

	for _, tc := range []struct {
		name  string
		input []byte
		want  error
	}{
		{"truncated length", []byte{0x80}, io.ErrUnexpectedEOF},
		{"truncated message", []byte{0x05, 1, 2}, io.ErrUnexpectedEOF},
		{"too large", []byte{0x80, 0x80, 0x04}, ErrTooLarge},
		{"length overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ErrVarintOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDelimitedReader(bytes.NewReader(tc.input), 1000)
			if _, err := d.Next(); !errors.Is(err, tc.want) {
				t.Fatalf("Next() = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestConsumeVarintNonMinimal checks the encodings padded with continuation bytes (as the
// redundant sizes of nested messages are) against protowire, for every length, alone and
// followed by other bytes.
func TestConsumeVarintNonMinimal(t *testing.T) {
	for _, v := range varintSamples() {
		enc := AppendVarint(nil, v)
		for len(enc) <= MaxVarintLen {
			for _, in := range [][]byte{enc, append(bytes.Clone(enc), 0xff, 0x80, 0xff, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)} {
				want, wantN := protowire.ConsumeVarint(in)
				got, n, err := ConsumeVarint(in)
				if wantN < 0 {
					if err == nil {
						t.Errorf("ConsumeVarint(%x) = %#x, %d; want an error", in, got, n)
					}
					continue
				}
				if err != nil || got != want || n != wantN {
					t.Errorf("ConsumeVarint(%x) = %#x, %d, %v; want %#x, %d", in, got, n, err, want, wantN)
				}
			}
			// The same value with one more group: the last byte gets a continuation bit.
			enc = append(enc[:len(enc)-1], enc[len(enc)-1]|0x80, 0)
		}
	}
}

func TestConsumeVarint(t *testing.T) {
	for _, v := range varintSamples() {
		enc := AppendVarint(nil, v)
		// Alone (the careful path) and followed by other bytes (the unchecked paths), which
		// must not leak into the value.
		for _, in := range [][]byte{enc, append(bytes.Clone(enc), make([]byte, 10)...), append(bytes.Clone(enc), bytes.Repeat([]byte{0xff}, 10)...)} {
			got, n, err := ConsumeVarint(in)
			if err != nil || got != v || n != len(enc) {
				t.Errorf("ConsumeVarint(%x) = %#x, %d, %v; want %#x, %d", in, got, n, err, v, len(enc))
			}
		}
		// Every strict prefix is truncated.
		for i := 1; i < len(enc); i++ {
			if _, _, err := ConsumeVarint(enc[:i]); !errors.Is(err, ErrTruncated) {
				t.Errorf("ConsumeVarint(%x) error = %v, want ErrTruncated", enc[:i], err)
			}
		}
	}
}
