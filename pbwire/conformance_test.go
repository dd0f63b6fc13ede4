package pbwire

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// conformanceProto covers every scalar kind, strings, bytes, packed repeated fields, nested
// and repeated nested messages, and keys of 1, 2 and 3 bytes. proto2 gives every optional
// field presence, so zero values are serialized by proto.Marshal too.
const conformanceProto = `
syntax = "proto2";
package flowzero.pbwire.test;
enum Color { RED = 0; GREEN = 1; BLUE = 300; }
message All {
  optional int32 f_int32 = 1;
  optional int64 f_int64 = 2;
  optional uint32 f_uint32 = 3;
  optional uint64 f_uint64 = 4;
  optional sint32 f_sint32 = 5;
  optional sint64 f_sint64 = 6;
  optional fixed32 f_fixed32 = 7;
  optional fixed64 f_fixed64 = 8;
  optional sfixed32 f_sfixed32 = 9;
  optional sfixed64 f_sfixed64 = 10;
  optional float f_float = 11;
  optional double f_double = 12;
  optional bool f_bool = 13;
  optional Color f_enum = 14;
  optional string f_string = 15;
  optional bytes f_bytes = 16;
  repeated uint32 p_uint32 = 17 [packed = true];
  repeated uint64 p_uint64 = 18 [packed = true];
  repeated fixed32 p_fixed32 = 19 [packed = true];
  repeated fixed64 p_fixed64 = 20 [packed = true];
  optional All child = 21;
  repeated All children = 22;
  optional string f_string_2000 = 2000;
  optional uint64 f_uint64_100000 = 100000;
}
`

func allDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"all.proto": conformanceProto}),
	}}
	files, err := c.Compile(context.Background(), "all.proto")
	if err != nil {
		t.Fatalf("Compile() error:\n%+v", err)
	}
	return files[0].Messages().ByName("All")
}

// sample is one All message as plain Go values.
type sample struct {
	i32      int32
	i64      int64
	u32      uint32
	u64      uint64
	s32      int32
	s64      int64
	f32      uint32
	f64      uint64
	sf32     int32
	sf64     int64
	fl       float32
	db       float64
	b        bool
	enum     int32
	str      string
	bytes    []byte
	pu32     []uint32
	pu64     []uint64
	pf32     []uint32
	pf64     []uint64
	child    *sample
	children []sample
	str2000  string
	u100000  uint64
}

var (
	tagI32      = MakeTag(1, Varint)
	tagI64      = MakeTag(2, Varint)
	tagU32      = MakeTag(3, Varint)
	tagU64      = MakeTag(4, Varint)
	tagS32      = MakeTag(5, Varint)
	tagS64      = MakeTag(6, Varint)
	tagF32      = MakeTag(7, Fixed32)
	tagF64      = MakeTag(8, Fixed64)
	tagSF32     = MakeTag(9, Fixed32)
	tagSF64     = MakeTag(10, Fixed64)
	tagFloat    = MakeTag(11, Fixed32)
	tagDouble   = MakeTag(12, Fixed64)
	tagBool     = MakeTag(13, Varint)
	tagEnum     = MakeTag(14, Varint)
	tagString   = MakeTag(15, Bytes)
	tagBytes    = MakeTag(16, Bytes)
	tagPU32     = MakeTag(17, Bytes)
	tagPU64     = MakeTag(18, Bytes)
	tagPF32     = MakeTag(19, Bytes)
	tagPF64     = MakeTag(20, Bytes)
	tagChild    = MakeTag(21, Bytes)
	tagChildren = MakeTag(22, Bytes)
	tagStr2000  = MakeTag(2000, Bytes)
	tagU100000  = MakeTag(100000, Varint)
)

// appendSample writes s with the append API, fields in number order.
func appendSample(dst []byte, s *sample) []byte {
	dst = AppendVarintField(dst, tagI32, uint64(int64(s.i32)))
	dst = AppendVarintField(dst, tagI64, uint64(s.i64))
	dst = AppendVarintField(dst, tagU32, uint64(s.u32))
	dst = AppendVarintField(dst, tagU64, s.u64)
	dst = AppendSint32Field(dst, tagS32, s.s32)
	dst = AppendSint64Field(dst, tagS64, s.s64)
	dst = AppendFixed32Field(dst, tagF32, s.f32)
	dst = AppendFixed64Field(dst, tagF64, s.f64)
	dst = AppendFixed32Field(dst, tagSF32, uint32(s.sf32))
	dst = AppendFixed64Field(dst, tagSF64, uint64(s.sf64))
	dst = AppendFloatField(dst, tagFloat, s.fl)
	dst = AppendDoubleField(dst, tagDouble, s.db)
	b := uint64(0)
	if s.b {
		b = 1
	}
	dst = AppendVarintField(dst, tagBool, b)
	dst = AppendVarintField(dst, tagEnum, uint64(int64(s.enum)))
	dst = AppendStringField(dst, tagString, s.str)
	dst = AppendBytesField(dst, tagBytes, s.bytes)
	dst = AppendPackedUint32Field(dst, tagPU32, s.pu32)
	dst = AppendPackedUint64Field(dst, tagPU64, s.pu64)
	dst = AppendPackedFixed32Field(dst, tagPF32, s.pf32)
	dst = AppendPackedFixed64Field(dst, tagPF64, s.pf64)
	if s.child != nil {
		var mark int
		dst, mark = BeginNested(dst, tagChild)
		dst = appendSample(dst, s.child)
		dst = EndNested(dst, mark)
	}
	for i := range s.children {
		var mark int
		dst, mark = BeginNested(dst, tagChildren)
		dst = appendSample(dst, &s.children[i])
		dst = EndNested(dst, mark)
	}
	dst = AppendStringField(dst, tagStr2000, s.str2000)
	dst = AppendVarintField(dst, tagU100000, s.u100000)
	return dst
}

// scatterSample writes s with a ScatteredWriter, in the same order as appendSample.
func scatterSample(w *ScatteredWriter, s *sample) {
	w.VarintField(tagI32, uint64(int64(s.i32)))
	w.VarintField(tagI64, uint64(s.i64))
	w.VarintField(tagU32, uint64(s.u32))
	w.VarintField(tagU64, s.u64)
	w.Sint32Field(tagS32, s.s32)
	w.Sint64Field(tagS64, s.s64)
	w.Fixed32Field(tagF32, s.f32)
	w.Fixed64Field(tagF64, s.f64)
	w.Fixed32Field(tagSF32, uint32(s.sf32))
	w.Fixed64Field(tagSF64, uint64(s.sf64))
	w.Fixed32Field(tagFloat, math.Float32bits(s.fl))
	w.Fixed64Field(tagDouble, math.Float64bits(s.db))
	b := uint64(0)
	if s.b {
		b = 1
	}
	w.VarintField(tagBool, b)
	w.VarintField(tagEnum, uint64(int64(s.enum)))
	w.StringField(tagString, s.str)
	w.BytesField(tagBytes, s.bytes)
	w.PackedUint32Field(tagPU32, s.pu32)
	w.PackedUint64Field(tagPU64, s.pu64)
	w.PackedFixed32Field(tagPF32, s.pf32)
	w.PackedFixed64Field(tagPF64, s.pf64)
	if s.child != nil {
		w.BeginNested(tagChild)
		scatterSample(w, s.child)
		w.EndNested()
	}
	for i := range s.children {
		w.BeginNested(tagChildren)
		scatterSample(w, &s.children[i])
		w.EndNested()
	}
	w.StringField(tagStr2000, s.str2000)
	w.VarintField(tagU100000, s.u100000)
}

// dynSample builds the same message with the protobuf runtime.
func dynSample(md protoreflect.MessageDescriptor, s *sample) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	fd := md.Fields().ByName
	m.Set(fd("f_int32"), protoreflect.ValueOfInt32(s.i32))
	m.Set(fd("f_int64"), protoreflect.ValueOfInt64(s.i64))
	m.Set(fd("f_uint32"), protoreflect.ValueOfUint32(s.u32))
	m.Set(fd("f_uint64"), protoreflect.ValueOfUint64(s.u64))
	m.Set(fd("f_sint32"), protoreflect.ValueOfInt32(s.s32))
	m.Set(fd("f_sint64"), protoreflect.ValueOfInt64(s.s64))
	m.Set(fd("f_fixed32"), protoreflect.ValueOfUint32(s.f32))
	m.Set(fd("f_fixed64"), protoreflect.ValueOfUint64(s.f64))
	m.Set(fd("f_sfixed32"), protoreflect.ValueOfInt32(s.sf32))
	m.Set(fd("f_sfixed64"), protoreflect.ValueOfInt64(s.sf64))
	m.Set(fd("f_float"), protoreflect.ValueOfFloat32(s.fl))
	m.Set(fd("f_double"), protoreflect.ValueOfFloat64(s.db))
	m.Set(fd("f_bool"), protoreflect.ValueOfBool(s.b))
	m.Set(fd("f_enum"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(s.enum)))
	m.Set(fd("f_string"), protoreflect.ValueOfString(s.str))
	m.Set(fd("f_bytes"), protoreflect.ValueOfBytes(s.bytes))
	l := m.Mutable(fd("p_uint32")).List()
	for _, v := range s.pu32 {
		l.Append(protoreflect.ValueOfUint32(v))
	}
	l = m.Mutable(fd("p_uint64")).List()
	for _, v := range s.pu64 {
		l.Append(protoreflect.ValueOfUint64(v))
	}
	l = m.Mutable(fd("p_fixed32")).List()
	for _, v := range s.pf32 {
		l.Append(protoreflect.ValueOfUint32(v))
	}
	l = m.Mutable(fd("p_fixed64")).List()
	for _, v := range s.pf64 {
		l.Append(protoreflect.ValueOfUint64(v))
	}
	if s.child != nil {
		m.Set(fd("child"), protoreflect.ValueOfMessage(dynSample(md, s.child)))
	}
	l = m.Mutable(fd("children")).List()
	for i := range s.children {
		l.Append(protoreflect.ValueOfMessage(dynSample(md, &s.children[i])))
	}
	m.Set(fd("f_string_2000"), protoreflect.ValueOfString(s.str2000))
	m.Set(fd("f_uint64_100000"), protoreflect.ValueOfUint64(s.u100000))
	return m
}

// conformanceSamples are the messages checked against the protobuf runtime.
func conformanceSamples() map[string]*sample {
	zero := &sample{}
	small := &sample{
		i32: 1, i64: 2, u32: 3, u64: 4, s32: -1, s64: 1, f32: 7, f64: 8, sf32: -9, sf64: -10,
		fl: 1.5, db: -2.25, b: true, enum: 1, str: "flowzero", bytes: []byte{0, 1, 2},
		pu32: []uint32{1, 2, 3}, pu64: []uint64{4, 5}, pf32: []uint32{6}, pf64: []uint64{7},
		str2000: "x", u100000: 42,
	}
	extremes := &sample{
		i32: math.MinInt32, i64: math.MinInt64, u32: math.MaxUint32, u64: math.MaxUint64,
		s32: math.MinInt32, s64: math.MinInt64, f32: math.MaxUint32, f64: math.MaxUint64,
		sf32: math.MinInt32, sf64: math.MinInt64, fl: float32(math.Inf(-1)), db: math.MaxFloat64,
		enum: 300, str: strings.Repeat("é", 100), bytes: bytes.Repeat([]byte{0xff}, 200),
		pu32: []uint32{0, 127, 128, 16383, 16384, math.MaxUint32},
		pu64: []uint64{0, 1 << 7, 1 << 14, 1 << 21, 1 << 28, 1 << 35, 1 << 42, 1 << 49, 1 << 56, 1 << 63},
		pf32: []uint32{0, math.MaxUint32}, pf64: []uint64{0, math.MaxUint64},
		str2000: strings.Repeat("y", 16384), u100000: 1 << 40,
	}
	// Nested 4 deep through the optional child, with repeated children on the way.
	deep := *small
	level := &deep
	for i := 0; i < 4; i++ {
		c := *extremes
		c.u64 = uint64(i)
		c.children = []sample{*small, *zero}
		level.child = &c
		level = &c
	}
	// A large message: fields far longer than a 4 KiB chunk and a nested message of more than
	// 16 KiB (a 3-byte minimal size), all under 2 MiB so that every nested size is redundant.
	large := *small
	large.bytes = bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	large.child = &sample{str: strings.Repeat("z", 100000), child: extremes}
	return map[string]*sample{
		"zero": zero, "small": small, "extremes": extremes, "deep": &deep, "large": &large,
	}
}

func TestConformance(t *testing.T) {
	md := allDescriptor(t)
	for name, s := range conformanceSamples() {
		t.Run(name, func(t *testing.T) {
			want := dynSample(md, s)
			canonical, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if err != nil {
				t.Fatalf("proto.Marshal() error: %v", err)
			}

			got := appendSample(nil, s)
			decoded := dynamicpb.NewMessage(md)
			if err := proto.Unmarshal(got, decoded); err != nil {
				t.Fatalf("proto.Unmarshal(pbwire) error: %v", err)
			}
			if !proto.Equal(decoded, want) {
				t.Fatalf("proto.Unmarshal(pbwire) = %v, want %v", decoded, want)
			}

			// Canonical form, appended elsewhere then in place.
			appended, err := AppendCompact(nil, got)
			if err != nil {
				t.Fatalf("AppendCompact() error: %v", err)
			}
			if !bytes.Equal(appended, canonical) {
				t.Fatalf("AppendCompact() differs from proto.Marshal:\n got %x\nwant %x", head(appended), head(canonical))
			}
			compacted, err := Compact(bytes.Clone(got))
			if err != nil {
				t.Fatalf("Compact() error: %v", err)
			}
			if !bytes.Equal(compacted, canonical) {
				t.Fatalf("Compact() differs from proto.Marshal:\n got %x\nwant %x", head(compacted), head(canonical))
			}

			// The scattered writer produces the same bytes, for several chunk sizes.
			for _, size := range []int{16, 17, 61, 4096} {
				w := NewScatteredWriter(HeapDelegate{ChunkSize: size})
				scatterSample(w, s)
				if err := w.Err(); err != nil {
					t.Fatalf("ScatteredWriter(%d) error: %v", size, err)
				}
				chunks := w.Chunks(nil)
				for i, c := range chunks[:len(chunks)-1] {
					if cap(c) != size {
						t.Fatalf("ScatteredWriter(%d) chunk %d has capacity %d", size, i, cap(c))
					}
				}
				if scattered := w.AppendTo(nil); !bytes.Equal(scattered, got) {
					t.Fatalf("ScatteredWriter(%d) differs from the append API:\n got %x\nwant %x",
						size, head(scattered), head(got))
				}
				if w.Len() != len(got) {
					t.Fatalf("ScatteredWriter(%d).Len() = %d, want %d", size, w.Len(), len(got))
				}
			}
		})
	}
}

// head shortens a message for an error message.
func head(b []byte) []byte {
	if len(b) > 256 {
		return b[:256]
	}
	return b
}
