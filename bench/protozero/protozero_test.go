package protozero

import (
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"flowzero/bench/protozero/testpb"
	"flowzero/internal/testutil"
)

type variant struct {
	name  string
	write func(dst []byte) []byte
}

var simpleVariants = []variant{
	{"pbwire", writeSimplePbwire},
	{"protowire", writeSimpleProtowire},
	{"vtproto", writeSimpleVT},
	{"easyproto", writeSimpleEasyproto},
	{"goproto", writeSimpleGoproto},
}

var nestedVariants = []variant{
	{"pbwire", writeNestedPbwire},
	{"protowire", writeNestedProtowire},
	{"vtproto", writeNestedVT},
	{"easyproto", writeNestedEasyproto},
	{"goproto", writeNestedGoproto},
}

// wantMessage is the event every variant must encode: the simple message, with depth nested
// copies below it.
func wantMessage(depth int) *testpb.EveryField {
	root := newGenerated()
	m := root
	for range depth {
		child := newGenerated()
		m.FieldNested = []*testpb.EveryField{child}
		m = child
	}
	return root
}

// TestRoundTrip checks that every variant writes, in its slot, an event that proto.Unmarshal
// decodes to the expected message.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		variants []variant
		want     *testpb.EveryField
	}{
		{"Simple", simpleVariants, wantMessage(0)},
		{"Nested", nestedVariants, wantMessage(nestedDepth)},
	} {
		for _, v := range tc.variants {
			t.Run(tc.scenario+"/"+v.name, func(t *testing.T) {
				for i := range 3 {
					dst := currentSlot()
					got := v.write(dst)
					if len(got) == 0 || len(got) > slotSize {
						t.Fatalf("wrote %d bytes, want 1..%d", len(got), slotSize)
					}
					if unsafe.SliceData(got) != &outBuffer[slot] {
						t.Fatalf("the event was not written in its slot")
					}
					var decoded testpb.EveryField
					if err := proto.Unmarshal(got, &decoded); err != nil {
						t.Fatalf("proto.Unmarshal() error: %v", err)
					}
					if !proto.Equal(&decoded, tc.want) {
						t.Fatalf("proto.Unmarshal() = %v, want %v", &decoded, tc.want)
					}
					clobber(i + 1)
				}
			})
		}
	}
}

// TestSpeedOfLight checks that the baseline stores the raw values where Perfetto's SOLMsg does.
func TestSpeedOfLight(t *testing.T) {
	writeNestedSOL()
	for level := range nestedDepth + 1 {
		p := unsafe.Pointer(&outBuffer[slot+level*solMsgSize])
		if got := *(*uint32)(unsafe.Add(p, 4)); got != 0x90ABCDEF {
			t.Fatalf("level %d: uint32 = %#x, want 0x90abcdef", level, got)
		}
		if got := string((*[31]byte)(unsafe.Add(p, 24))[:]); got != inputString {
			t.Fatalf("level %d: string = %q, want %q", level, got, inputString)
		}
	}
}

// BenchmarkProtoZero is Perfetto's BM_Protozero_{Simple,Nested}_* family. Each variant has
// its own loop calling its writer directly, so that the compiler may inline it as Perfetto's
// PERFETTO_ALWAYS_INLINE does.
func BenchmarkProtoZero(b *testing.B) {
	b.Run("Simple/SpeedOfLight", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleSOL()
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Simple/pbwire", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimplePbwire(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Simple/protowire", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleProtowire(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Simple/vtproto", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleVT(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Simple/easyproto", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleEasyproto(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Simple/goproto", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleGoproto(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Nested/SpeedOfLight", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeNestedSOL()
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Nested/pbwire", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeNestedPbwire(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Nested/protowire", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeNestedProtowire(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Nested/vtproto", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeNestedVT(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Nested/easyproto", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeNestedEasyproto(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
	b.Run("Nested/goproto", func(b *testing.B) {
		c := testutil.StartCPU(b)
		for i := 0; i < b.N; i++ {
			writeNestedGoproto(currentSlot())
			clobber(i)
		}
		c.Stop(b)
	})
}
