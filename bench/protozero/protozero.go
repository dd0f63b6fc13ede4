// Package protozero replicates Perfetto's ProtoZero benchmark
// (src/protozero/test/protozero_benchmark.cc) in Go, to compare pbwire with a speed-of-light
// serializer and with other Go protobuf encoders.
//
// Each iteration writes one event into the next 512-byte slot of a 64 MiB buffer, then reads
// the slot back (Perfetto's Clobber step: it makes the CPU consume the writes and costs the
// same for every variant). "Simple" is one flat EveryField message (int32, uint32, int64,
// uint64 and a 31-byte string, with the values of Perfetto's g_fake_input_simple); "Nested" is
// the same message nested 4 levels deep through the repeated field_nested field.
//
// Besides ns/op, each benchmark reports cpu-ns/op, the CPU time of its own thread: on a shared
// machine, wall-clock time also counts the time other processes hold the core.
//
// Variants:
//   - SpeedOfLight: raw values stored with unsafe, no encoding and no bounds checks (Perfetto's
//     SOLMsg);
//   - pbwire: flowzero's writer, nested sizes back-patched as 4-byte redundant varints;
//   - protowire: google.golang.org/protobuf/encoding/protowire appends, nested sizes
//     back-patched in 4 bytes the same way;
//   - vtproto: planetscale/vtprotobuf's generated SizeVT + MarshalToSizedBufferVT on a reused
//     struct;
//   - easyproto: VictoriaMetrics/easyproto with a MarshalerPool;
//   - goproto: proto.Marshal of a new generated struct, copied into the slot.
package protozero

import (
	"strings"
	"unsafe"

	"github.com/VictoriaMetrics/easyproto"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"flowzero/bench/protozero/testpb"
	"flowzero/pbwire"
)

const (
	// slotSize must exceed the largest event (Nested: 246 bytes).
	slotSize = 512
	// workingSet is cycled through, as Perfetto does, to simulate a tracing buffer.
	workingSet = 64 << 20
	slots      = workingSet / slotSize
	// nestedDepth is the number of nested messages under the root (Perfetto: depth < 3).
	nestedDepth = 3
)

// outBuffer is the 64 MiB working set, its pages touched once so that no benchmark pays the
// first page faults; slot is the offset of the current 512-byte slot.
var (
	outBuffer = func() []byte {
		b := make([]byte, workingSet)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		return b
	}()
	slot int
)

// input holds Perfetto's g_fake_input_simple. Package variables keep the compiler from
// folding the values into constants, as benchmark::DoNotOptimize does.
var input = [8]uint64{
	0x12345678,
	0x90ABCDEF,
	0x11111111,
	0xFFFFFFFF,
	0x6666666666666666,
	0x6666666666666666,
	0x6666666666666666,
	0x0066666666666666,
}

// inputString is the C string at &input[4]: 31 'f' bytes.
var inputString = strings.Repeat("f", 31)

// Field numbers of EveryField.
const (
	fieldInt32  = 1
	fieldInt64  = 2
	fieldUint32 = 3
	fieldUint64 = 4
	fieldNested = 14
	fieldString = 500
)

// clobber is Perfetto's Clobber: it overwrites the first word, XOR-chains the slot's 64 words
// so that the CPU has to consume the written bytes, then moves to the next slot.
func clobber(i int) {
	buf := (*[slotSize / 8]uint64)(unsafe.Pointer(&outBuffer[slot]))
	// The running value stays in a register, as the C++ compiler keeps it: only the reads of
	// the written words go to memory.
	prev := uint64(i)
	buf[0] = prev
	for j := 1; j < len(buf); j++ {
		prev ^= buf[j]
		buf[j] = prev
	}
	slot = (i % slots) * slotSize
}

// currentSlot is the empty 512-byte slot to write the next event into.
func currentSlot() []byte {
	return outBuffer[slot : slot : slot+slotSize]
}

// Speed of light: Perfetto's SOLMsg, a 64-byte storage followed by its write pointer; a
// nested message is placed right after its parent.

const solMsgSize = 72

func solSimple(p unsafe.Pointer) {
	*(*int32)(p) = int32(input[0])
	*(*uint32)(unsafe.Add(p, 4)) = uint32(input[1])
	*(*int64)(unsafe.Add(p, 8)) = int64(input[2])
	*(*uint64)(unsafe.Add(p, 16)) = input[3]
	// strcpy of the 31-byte string and its NUL: four aligned words, as an inlined memcpy.
	*(*uint64)(unsafe.Add(p, 24)) = input[4]
	*(*uint64)(unsafe.Add(p, 32)) = input[5]
	*(*uint64)(unsafe.Add(p, 40)) = input[6]
	*(*uint64)(unsafe.Add(p, 48)) = input[7]
}

func writeSimpleSOL() {
	solSimple(unsafe.Pointer(&outBuffer[slot]))
}

func writeNestedSOL() {
	p := unsafe.Pointer(&outBuffer[slot])
	for range nestedDepth + 1 {
		solSimple(p)
		p = unsafe.Add(p, solMsgSize)
	}
}

// pbwire.

var (
	tagInt32  = pbwire.MakeTag(fieldInt32, pbwire.Varint)
	tagInt64  = pbwire.MakeTag(fieldInt64, pbwire.Varint)
	tagUint32 = pbwire.MakeTag(fieldUint32, pbwire.Varint)
	tagUint64 = pbwire.MakeTag(fieldUint64, pbwire.Varint)
	tagNested = pbwire.MakeTag(fieldNested, pbwire.Bytes)
	tagString = pbwire.MakeTag(fieldString, pbwire.Bytes)
)

func pbwireFields(dst []byte) []byte {
	dst = pbwire.AppendVarintField(dst, tagInt32, uint64(int64(int32(input[0]))))
	dst = pbwire.AppendVarintField(dst, tagUint32, uint64(uint32(input[1])))
	dst = pbwire.AppendVarintField(dst, tagInt64, uint64(int64(input[2])))
	dst = pbwire.AppendVarintField(dst, tagUint64, input[3])
	return pbwire.AppendStringField(dst, tagString, inputString)
}

func writeSimplePbwire(dst []byte) []byte {
	return pbwireFields(dst)
}

func writeNestedPbwire(dst []byte) []byte {
	var marks [nestedDepth]int
	dst = pbwireFields(dst)
	for d := range nestedDepth {
		dst, marks[d] = pbwire.BeginNested(dst, tagNested)
		dst = pbwireFields(dst)
	}
	for d := nestedDepth - 1; d >= 0; d-- {
		dst = pbwire.EndNested(dst, marks[d])
	}
	return dst
}

// protowire, with the same 4-byte back-patching of nested sizes.

func protowireFields(dst []byte) []byte {
	dst = protowire.AppendTag(dst, fieldInt32, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(int64(int32(input[0]))))
	dst = protowire.AppendTag(dst, fieldUint32, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(uint32(input[1])))
	dst = protowire.AppendTag(dst, fieldInt64, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(int64(input[2])))
	dst = protowire.AppendTag(dst, fieldUint64, protowire.VarintType)
	dst = protowire.AppendVarint(dst, input[3])
	dst = protowire.AppendTag(dst, fieldString, protowire.BytesType)
	return protowire.AppendString(dst, inputString)
}

func writeSimpleProtowire(dst []byte) []byte {
	return protowireFields(dst)
}

func writeNestedProtowire(dst []byte) []byte {
	var marks [nestedDepth]int
	dst = protowireFields(dst)
	for d := range nestedDepth {
		dst = protowire.AppendTag(dst, fieldNested, protowire.BytesType)
		dst = append(dst, 0x80, 0x80, 0x80, 0)
		marks[d] = len(dst)
		dst = protowireFields(dst)
	}
	for d := nestedDepth - 1; d >= 0; d-- {
		n := len(dst) - marks[d]
		b := dst[marks[d]-4 : marks[d]]
		b[0] = byte(n) | 0x80
		b[1] = byte(n>>7) | 0x80
		b[2] = byte(n>>14) | 0x80
		b[3] = byte(n >> 21)
	}
	return dst
}

// vtprotobuf, on structs reused from one iteration to the next.

var (
	vtSimple testpb.EveryField
	vtNested = func() *testpb.EveryField {
		root := &testpb.EveryField{}
		m := root
		for range nestedDepth {
			child := &testpb.EveryField{}
			m.FieldNested = []*testpb.EveryField{child}
			m = child
		}
		return root
	}()
)

func fillGenerated(m *testpb.EveryField) {
	m.FieldInt32 = int32(input[0])
	m.FieldUint32 = uint32(input[1])
	m.FieldInt64 = int64(input[2])
	m.FieldUint64 = input[3]
	m.FieldString = inputString
}

func marshalVT(dst []byte, m *testpb.EveryField) []byte {
	size := m.SizeVT()
	dst = dst[:size]
	if _, err := m.MarshalToSizedBufferVT(dst); err != nil {
		panic(err)
	}
	return dst
}

func writeSimpleVT(dst []byte) []byte {
	fillGenerated(&vtSimple)
	return marshalVT(dst, &vtSimple)
}

func writeNestedVT(dst []byte) []byte {
	for m := vtNested; m != nil; {
		fillGenerated(m)
		if len(m.FieldNested) == 0 {
			break
		}
		m = m.FieldNested[0]
	}
	return marshalVT(dst, vtNested)
}

// easyproto, with its marshaler pool.

var easyPool easyproto.MarshalerPool

func easyFields(mm *easyproto.MessageMarshaler) {
	mm.AppendInt32(fieldInt32, int32(input[0]))
	mm.AppendUint32(fieldUint32, uint32(input[1]))
	mm.AppendInt64(fieldInt64, int64(input[2]))
	mm.AppendUint64(fieldUint64, input[3])
	mm.AppendString(fieldString, inputString)
}

func writeSimpleEasyproto(dst []byte) []byte {
	m := easyPool.Get()
	easyFields(m.MessageMarshaler())
	dst = m.Marshal(dst)
	easyPool.Put(m)
	return dst
}

func writeNestedEasyproto(dst []byte) []byte {
	m := easyPool.Get()
	mm := m.MessageMarshaler()
	easyFields(mm)
	for range nestedDepth {
		mm = mm.AppendMessage(fieldNested)
		easyFields(mm)
	}
	dst = m.Marshal(dst)
	easyPool.Put(m)
	return dst
}

// goproto: a new struct marshaled by proto.Marshal, then copied into the slot as
// SerializeToArray would write it.

func newGenerated() *testpb.EveryField {
	return &testpb.EveryField{
		FieldInt32:  int32(input[0]),
		FieldUint32: uint32(input[1]),
		FieldInt64:  int64(input[2]),
		FieldUint64: input[3],
		FieldString: inputString,
	}
}

func marshalGoproto(dst []byte, m *testpb.EveryField) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return append(dst, b...)
}

func writeSimpleGoproto(dst []byte) []byte {
	return marshalGoproto(dst, newGenerated())
}

func writeNestedGoproto(dst []byte) []byte {
	root := newGenerated()
	m := root
	for range nestedDepth {
		child := newGenerated()
		m.FieldNested = append(m.FieldNested, child)
		m = child
	}
	return marshalGoproto(dst, root)
}
