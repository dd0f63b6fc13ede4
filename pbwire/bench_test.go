package pbwire

import (
	"strings"
	"testing"

	"flowzero/internal/testutil"
)

// The benchmarks write Perfetto's ProtoZero benchmark event (see bench/protozero): a flat
// message of four 5-byte varints and a 31-byte string, nested 4 levels deep.

var (
	benchTags = struct{ i32, i64, u32, u64, nested, str Tag }{
		MakeTag(1, Varint), MakeTag(2, Varint), MakeTag(3, Varint), MakeTag(4, Varint),
		MakeTag(14, Bytes), MakeTag(500, Bytes),
	}
	benchValues = [4]uint64{0x12345678, 0x90ABCDEF, 0x11111111, 0xFFFFFFFF}
	benchString = strings.Repeat("f", 31)
)

func benchFields(dst []byte) []byte {
	dst = AppendVarintField(dst, benchTags.i32, benchValues[0])
	dst = AppendVarintField(dst, benchTags.u32, benchValues[1])
	dst = AppendVarintField(dst, benchTags.i64, benchValues[2])
	dst = AppendVarintField(dst, benchTags.u64, benchValues[3])
	return AppendStringField(dst, benchTags.str, benchString)
}

func benchNested(dst []byte) []byte {
	var marks [3]int
	dst = benchFields(dst)
	for d := range marks {
		dst, marks[d] = BeginNested(dst, benchTags.nested)
		dst = benchFields(dst)
	}
	for d := len(marks) - 1; d >= 0; d-- {
		dst = EndNested(dst, marks[d])
	}
	return dst
}

func scatterNested(w *ScatteredWriter) {
	fields := func() {
		w.VarintField(benchTags.i32, benchValues[0])
		w.VarintField(benchTags.u32, benchValues[1])
		w.VarintField(benchTags.i64, benchValues[2])
		w.VarintField(benchTags.u64, benchValues[3])
		w.StringField(benchTags.str, benchString)
	}
	fields()
	for range 3 {
		w.BeginNested(benchTags.nested)
		fields()
	}
	for range 3 {
		w.EndNested()
	}
}

// BenchmarkWrite writes the nested event with the append API, then compacts it (Compact is
// the cost of canonical bytes on top of Append), with a scattered writer and reads it back.
func BenchmarkWrite(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.Run("Append", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for range b.N {
			benchNested(buf)
		}
		c.Stop(b)
	})
	b.Run("AppendCompact", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for range b.N {
			if _, err := Compact(benchNested(buf)); err != nil {
				b.Fatal(err)
			}
		}
		c.Stop(b)
	})
	b.Run("Compact", func(b *testing.B) {
		msg := benchNested(nil)
		out := make([]byte, 0, len(msg))
		b.SetBytes(int64(len(msg)))
		c := testutil.StartCPU(b)
		for range b.N {
			if _, err := AppendCompact(out, msg); err != nil {
				b.Fatal(err)
			}
		}
		c.Stop(b)
	})
	b.Run("Scattered", func(b *testing.B) {
		w := NewScatteredWriter(NewPooledDelegate(128, 16))
		c := testutil.StartCPU(b)
		for range b.N {
			w.Reset()
			scatterNested(w)
		}
		c.Stop(b)
	})
}

// BenchmarkRead iterates over every field of the nested event, descending into the nested
// messages, with Reader.Current (no copy) and Reader.Field (a copy per field).
func BenchmarkRead(b *testing.B) {
	msg := benchNested(nil)
	b.Run("Current", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		var sum uint64
		c := testutil.StartCPU(b)
		for range b.N {
			for m := msg; m != nil; {
				r := NewReader(m)
				m = nil
				for r.Next() {
					f := r.Current()
					switch f.Type {
					case Varint:
						sum += f.Varint
					case Bytes:
						if f.Num == 14 {
							m = f.Bytes
						}
					}
				}
				if r.Err() != nil {
					b.Fatal(r.Err())
				}
			}
		}
		c.Stop(b)
		if sum == 0 {
			b.Fatal("nothing read")
		}
	})
	b.Run("Field", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		var sum uint64
		c := testutil.StartCPU(b)
		for range b.N {
			for m := msg; m != nil; {
				r := NewReader(m)
				m = nil
				for r.Next() {
					f := r.Field()
					switch f.Type {
					case Varint:
						sum += f.Varint
					case Bytes:
						if f.Num == 14 {
							m = f.Bytes
						}
					}
				}
				if r.Err() != nil {
					b.Fatal(r.Err())
				}
			}
		}
		c.Stop(b)
		if sum == 0 {
			b.Fatal("nothing read")
		}
	})
}
