package pbwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
)

// addCaptureSeeds seeds a fuzz target with real UDP payloads (NetFlow, IPFIX, sFlow): arbitrary
// binary input for the reader, arbitrary programs for the round trip.
func addCaptureSeeds(f *testing.F) {
	for _, name := range []string{"netflow/data.pcap", "netflow/nfv5.pcap", "netflow/mpls.pcap", "sflow/data-1140.pcap"} {
		datagrams, err := pcapfile.ReadUDP(testdata.Path(f, name))
		if err != nil {
			f.Fatalf("ReadUDP(%s): %v", name, err)
		}
		for _, d := range datagrams {
			f.Add(d.Payload)
		}
	}
}

// readAll walks msg like a consumer would: every field, nested messages and packed values,
// and cross-checks each field with protowire.
func readAll(t *testing.T, msg []byte, depth int) {
	r := NewReader(msg)
	prev := 0
	for r.Next() {
		f := r.Field()
		// protowire agrees on the length and the value of every field pbwire accepts.
		num, typ, n := protowire.ConsumeField(msg[prev:])
		if n != r.Offset()-prev || int32(num) != f.Num || WireType(typ) != f.Type {
			t.Fatalf("field at %d: protowire read %d/%d in %d bytes, pbwire %d/%d in %d",
				prev, num, typ, n, f.Num, f.Type, r.Offset()-prev)
		}
		if f.Type == Varint {
			_, _, tl := protowire.ConsumeTag(msg[prev:])
			if v, _ := protowire.ConsumeVarint(msg[prev+tl:]); v != f.Varint {
				t.Fatalf("field at %d: protowire read %d, pbwire %d", prev, v, f.Varint)
			}
		}
		prev = r.Offset()
		if f.Type == Bytes {
			for _, elem := range []WireType{Varint, Fixed32, Fixed64} {
				p := f.Packed(elem)
				for p.Next() {
				}
			}
			if depth < 8 {
				readAll(t, f.Bytes, depth+1)
			}
		}
	}
	if err := r.Err(); err != nil && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrLength) &&
		!errors.Is(err, ErrVarintOverflow) && !errors.Is(err, ErrWireType) && !errors.Is(err, ErrFieldNumber) {
		t.Fatalf("unexpected error: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	addCaptureSeeds(f)
	for _, s := range conformanceSamples() {
		msg := appendSample(nil, s)
		if len(msg) < 4096 {
			f.Add(msg)
		}
	}
	f.Add([]byte{0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00})
	f.Add([]byte{0x0a, 0x87, 0x80, 0x80, 0x00, 0x0a, 0x05, 'a', 'b', 'c', 'd', 'e'})
	f.Fuzz(func(t *testing.T, data []byte) {
		readAll(t, data, 0)

		// Anything protowire fails to parse, pbwire refuses too.
		ok := true
		for b := data; len(b) > 0; {
			_, _, n := protowire.ConsumeField(b)
			if n < 0 {
				ok = false
				break
			}
			b = b[n:]
		}
		r := NewReader(data)
		for r.Next() {
		}
		if !ok && r.Err() == nil {
			t.Fatalf("pbwire accepts %x, protowire does not", data)
		}

		if compacted, err := Compact(bytes.Clone(data)); err == nil {
			if len(compacted) > len(data) {
				t.Fatalf("Compact grew the message from %d to %d bytes", len(data), len(compacted))
			}
			again, err := Compact(bytes.Clone(compacted))
			if err != nil || !bytes.Equal(again, compacted) {
				t.Fatalf("Compact is not idempotent: %x then %x (%v)", compacted, again, err)
			}
		}

		for rest := data; len(rest) > 0; {
			var err error
			if _, rest, err = SplitDelimited(rest); err != nil {
				break
			}
		}
		d := NewDelimitedReader(bytes.NewReader(data), 1<<16)
		for {
			if _, err := d.Next(); err != nil {
				break
			}
		}
	})
}

// node is the expected content of a message written by the round-trip fuzzer.
type node struct {
	fields []expected
}

type expected struct {
	num    int32
	wt     WireType
	v      uint64
	bytes  []byte
	child  *node // a nested message
	packed []uint64
}

// program turns fuzz bytes into writer calls, applied to both the append API and a
// ScatteredWriter, and records what a reader must find.
type program struct {
	data []byte
}

func (p *program) byte() byte {
	if len(p.data) == 0 {
		return 0
	}
	b := p.data[0]
	p.data = p.data[1:]
	return b
}

func (p *program) uint64() uint64 {
	var b [8]byte
	n := copy(b[:], p.data)
	p.data = p.data[n:]
	// Vary the magnitude so that every varint length shows up.
	return binary.LittleEndian.Uint64(b[:]) >> (p.byte() % 64)
}

func (p *program) num() int {
	n := int(p.byte()) | int(p.byte())<<8 | int(p.byte())<<16
	if p.byte()&1 == 1 {
		n <<= 8
	}
	return 1 + n%MaxFieldNumber
}

func FuzzRoundTrip(f *testing.F) {
	addCaptureSeeds(f)
	f.Add([]byte{0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 5, 2, 0, 0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add([]byte{6, 1, 0, 0, 0, 0, 2, 0, 0, 0, 3, 1, 'x', 6, 1, 0, 0, 0, 7, 7, 1, 0, 0, 0, 0x80, 0x80, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		chunk := 16 + int(len(data)%50)
		w := NewScatteredWriter(HeapDelegate{ChunkSize: chunk})
		var dst []byte
		root := &node{}
		stack := []*node{root}
		var marks []int
		p := &program{data: data}
		for ops := 0; len(p.data) > 0 && ops < 1000; ops++ {
			top := stack[len(stack)-1]
			op := p.byte() % 8
			num := p.num()
			switch op {
			case 0:
				v := p.uint64()
				dst = AppendVarintField(dst, MakeTag(num, Varint), v)
				w.VarintField(MakeTag(num, Varint), v)
				top.fields = append(top.fields, expected{num: int32(num), wt: Varint, v: v})
			case 1:
				v := int64(p.uint64())
				dst = AppendSint64Field(dst, MakeTag(num, Varint), v)
				w.Sint64Field(MakeTag(num, Varint), v)
				top.fields = append(top.fields, expected{num: int32(num), wt: Varint, v: EncodeZigZag64(v)})
			case 2:
				v := uint32(p.uint64())
				dst = AppendFixed32Field(dst, MakeTag(num, Fixed32), v)
				w.Fixed32Field(MakeTag(num, Fixed32), v)
				top.fields = append(top.fields, expected{num: int32(num), wt: Fixed32, v: uint64(v)})
			case 3:
				v := p.uint64()
				dst = AppendFixed64Field(dst, MakeTag(num, Fixed64), v)
				w.Fixed64Field(MakeTag(num, Fixed64), v)
				top.fields = append(top.fields, expected{num: int32(num), wt: Fixed64, v: v})
			case 4:
				n := min(int(p.byte())*int(p.byte()%4+1), len(p.data))
				b := p.data[:n]
				p.data = p.data[n:]
				if n%2 == 0 {
					dst = AppendBytesField(dst, MakeTag(num, Bytes), b)
					w.BytesField(MakeTag(num, Bytes), b)
				} else {
					dst = AppendStringField(dst, MakeTag(num, Bytes), string(b))
					w.StringField(MakeTag(num, Bytes), string(b))
				}
				top.fields = append(top.fields, expected{num: int32(num), wt: Bytes, bytes: b})
			case 5:
				vs := make([]uint64, p.byte()%8)
				for i := range vs {
					vs[i] = p.uint64()
				}
				dst = AppendPackedUint64Field(dst, MakeTag(num, Bytes), vs)
				w.PackedUint64Field(MakeTag(num, Bytes), vs)
				if len(vs) > 0 {
					top.fields = append(top.fields, expected{num: int32(num), wt: Bytes, packed: vs})
				}
			case 6:
				var mark int
				dst, mark = BeginNested(dst, MakeTag(num, Bytes))
				w.BeginNested(MakeTag(num, Bytes))
				marks = append(marks, mark)
				child := &node{}
				top.fields = append(top.fields, expected{num: int32(num), wt: Bytes, child: child})
				stack = append(stack, child)
			case 7:
				if len(marks) > 0 {
					dst = EndNested(dst, marks[len(marks)-1])
					w.EndNested()
					marks = marks[:len(marks)-1]
					stack = stack[:len(stack)-1]
				}
			}
		}
		for i := len(marks) - 1; i >= 0; i-- {
			dst = EndNested(dst, marks[i])
			w.EndNested()
		}
		if err := w.Err(); err != nil {
			t.Fatalf("ScatteredWriter error: %v", err)
		}
		if scattered := w.AppendTo(nil); !bytes.Equal(scattered, dst) {
			t.Fatalf("ScatteredWriter wrote\n%x\nthe append API\n%x", scattered, dst)
		}
		checkNode(t, dst, root, "root")
		compacted, err := AppendCompact(nil, dst)
		if err != nil {
			t.Fatalf("AppendCompact() error: %v", err)
		}
		checkNode(t, compacted, root, "compacted")
		inPlace, err := Compact(bytes.Clone(dst))
		if err != nil || !bytes.Equal(inPlace, compacted) {
			t.Fatalf("Compact() in place differs from AppendCompact (%v)", err)
		}
	})
}

// checkNode reads msg back and compares it with what was written.
func checkNode(t *testing.T, msg []byte, want *node, path string) {
	t.Helper()
	r := NewReader(msg)
	i := 0
	for ; r.Next(); i++ {
		f := r.Field()
		if i >= len(want.fields) {
			t.Fatalf("%s: extra field %d", path, f.Num)
		}
		e := want.fields[i]
		if f.Num != e.num || f.Type != e.wt {
			t.Fatalf("%s: field %d is %d/%s, want %d/%s", path, i, f.Num, f.Type, e.num, e.wt)
		}
		switch {
		case e.child != nil:
			checkNode(t, f.Bytes, e.child, path+"/child")
		case e.packed != nil:
			pk := f.Packed(Varint)
			j := 0
			for ; pk.Next(); j++ {
				if j >= len(e.packed) || pk.Value() != e.packed[j] {
					t.Fatalf("%s: field %d: packed value %d = %d", path, i, j, pk.Value())
				}
			}
			if pk.Err() != nil || j != len(e.packed) {
				t.Fatalf("%s: field %d: %d packed values, want %d: %v", path, i, j, len(e.packed), pk.Err())
			}
		case e.wt == Bytes:
			if !bytes.Equal(f.Bytes, e.bytes) {
				t.Fatalf("%s: field %d = %x, want %x", path, i, f.Bytes, e.bytes)
			}
		case e.wt == Varint:
			if f.Varint != e.v {
				t.Fatalf("%s: field %d = %d, want %d", path, i, f.Varint, e.v)
			}
		default:
			if f.Fixed != e.v {
				t.Fatalf("%s: field %d = %d, want %d", path, i, f.Fixed, e.v)
			}
		}
	}
	if err := r.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if i != len(want.fields) {
		t.Fatalf("%s: %d fields, want %d", path, i, len(want.fields))
	}
}
