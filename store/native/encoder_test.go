package native

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"flowzero/pbwire"
	"flowzero/schema"
	"flowzero/store/internal/storetest"
)

// nativeTestMessage is a flow with a value in every kind of column: scalars, addresses,
// strings, enums, integer arrays, address arrays and large communities.
func nativeTestMessage(s *schema.Schema, t uint64) []byte {
	fm := s.NewFlowMessage()
	fm.TimeReceived = t
	fm.SamplingRate = 1000
	fm.ExporterAddress = netip.MustParseAddr("192.0.2.1")
	fm.SrcAddr = netip.MustParseAddr("2001:db8::1")
	fm.DstAddr = netip.MustParseAddr("198.51.100.7")
	fm.SrcAS, fm.DstAS = 64500, 3356
	fm.SrcNetMask, fm.DstNetMask = 48, 24
	fm.DstASPath = []uint32{3356, 174}
	fm.DstCommunities = []uint32{3356<<16 | 100}
	fm.DstLargeCommunities = []schema.LargeCommunity{{ASN: 64500, LocalData1: 1, LocalData2: 2}}
	fm.AppendUint(schema.ColumnBytes, 1500)
	fm.AppendUint(schema.ColumnPackets, 1)
	fm.AppendUint(schema.ColumnProto, 6)
	fm.AppendUint(schema.ColumnFlowDirection, 2)
	fm.AppendUint(schema.ColumnSrcMAC, 0x0200_5e00_0001)
	fm.AppendString(schema.ColumnExporterName, "edge1.par")
	fm.AppendString(schema.ColumnSrcCountry, "FR")
	fm.AppendIP(schema.ColumnSRv6SIDs, netip.MustParseAddr("fc00::1"))
	fm.AppendIP(schema.ColumnSRv6SIDs, netip.MustParseAddr("fc00::2"))
	return bytes.Clone(fm.Finalize())
}

// TestNativeEncoderRefusesBadMessages checks that every way a message can fail to fit its
// columns is an error that leaves the block as it was, and that unknown fields are skipped.
func TestNativeEncoderRefusesBadMessages(t *testing.T) {
	s := storetest.AllColumnsSchema(t)
	good := storetest.Unframe(t, nativeTestMessage(s, 1_790_000_000))
	enc, err := NewEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Append(good); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(enc.Block())

	field := func(num int, typ pbwire.WireType, v uint64, b []byte) []byte {
		out := bytes.Clone(good)
		out = pbwire.AppendTag(out, pbwire.MakeTag(num, typ))
		switch typ {
		case pbwire.Varint:
			out = pbwire.AppendVarint(out, v)
		case pbwire.Bytes:
			out = pbwire.AppendVarint(out, uint64(len(b)))
			out = append(out, b...)
		}
		return out
	}
	col := func(k schema.ColumnKey) int { return s.Column(k).Field }
	for _, tc := range []struct {
		name string
		msg  []byte
		want error
	}{
		{"truncated", good[:len(good)-1], pbwire.ErrLength},
		{"string as varint", field(col(schema.ColumnExporterName), pbwire.Varint, 1, nil), errWireType},
		{"varint as bytes", field(col(schema.ColumnBytes), pbwire.Bytes, 0, []byte{1}), errWireType},
		{"UInt8 out of range", field(col(schema.ColumnSrcNetMask), pbwire.Varint, 256, nil), errRange},
		{"DateTime out of range", field(col(schema.ColumnTimeReceived), pbwire.Varint, 1<<32, nil), errRange},
		{"unknown enum value", field(col(schema.ColumnFlowDirection), pbwire.Varint, 3, nil), errRange},
		{"short address", field(col(schema.ColumnSrcAddr), pbwire.Bytes, 0, make([]byte, 15)), errSize},
		{"FixedString(2) too long", field(col(schema.ColumnSrcCountry), pbwire.Bytes, 0, []byte("FRA")), errSize},
		{"large community of 11 bytes", field(col(schema.ColumnDstLargeCommunities), pbwire.Bytes, 0, make([]byte, 11)), errSize},
		{"array element out of range", field(col(schema.ColumnDstASPath), pbwire.Varint, 1<<32, nil), errRange},
	} {
		err := enc.Append(tc.msg)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
		if got := enc.Block(); !bytes.Equal(got, want) || enc.Rows() != 1 {
			t.Errorf("%s: the refused message changed the block", tc.name)
		}
	}

	// Unknown fields are skipped; a repeated scalar field keeps its last value, as protobuf.
	enc.Reset()
	if err := enc.Append(field(1000, pbwire.Varint, 7, nil)); err != nil {
		t.Fatalf("unknown field: %v", err)
	}
	if got := enc.Block(); !bytes.Equal(got, want) {
		t.Error("unknown field changed the row")
	}
	enc.Reset()
	if err := enc.Append(field(col(schema.ColumnBytes), pbwire.Varint, 1500, nil)); err != nil {
		t.Fatal(err)
	}
	if got := enc.Block(); !bytes.Equal(got, want) {
		t.Error("a repeated scalar field did not keep its last value")
	}

	// AppendDelimited keeps the good messages around a bad one.
	var batch []byte
	for _, m := range [][]byte{good, field(col(schema.ColumnExporterName), pbwire.Varint, 1, nil), good} {
		batch = pbwire.AppendVarint(batch, uint64(len(m)))
		batch = append(batch, m...)
	}
	enc.Reset()
	if ok, err := enc.AppendDelimited(batch); ok != 2 || err == nil {
		t.Errorf("AppendDelimited: %d ok, %v; want 2 and an error", ok, err)
	}
	if ok, err := enc.AppendDelimited([]byte{0x80}); ok != 0 || err == nil {
		t.Errorf("AppendDelimited of a cut length: %d ok, %v", ok, err)
	}
}

// TestNativeEncoderTypes checks that every column type of the schema has a Native encoding
// (the sink never falls back to Protobuf with the columns flowzero knows), and the
// LowCardinality index width chosen from the number of keys.
func TestNativeEncoderTypes(t *testing.T) {
	s := storetest.AllColumnsSchema(t)
	enc, err := NewEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(enc.cols), len(s.WireColumns()); got != want {
		t.Fatalf("%d columns, want %d", got, want)
	}
	fm := s.NewFlowMessage()
	for i := range 300 {
		fm.Reset()
		fm.AppendString(schema.ColumnInIfName, "if-"+strconv.Itoa(i))
		if err := enc.Append(storetest.Unframe(t, fm.Finalize())); err != nil {
			t.Fatal(err)
		}
	}
	lcHeader := func(block []byte) []byte {
		marker := append(appendString(nil, "InIfName"), appendString(nil, "LowCardinality(String)")...)
		i := bytes.Index(block, marker)
		if i < 0 {
			t.Fatal("no InIfName column in the block")
		}
		return block[i+len(marker):][:24]
	}
	// InIfName: 301 keys ("" first) need 16-bit indexes: version 1, then HasAdditionalKeys |
	// NeedUpdateDictionary | 1.
	if p := lcHeader(enc.Block()); !bytes.Equal(p, []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 6, 0, 0, 0, 0, 0, 0, 45, 1, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("InIfName header % x", p)
	}
	// 65,537 keys ("" and 65,536 names) in one block need 32-bit indexes.
	enc.Reset()
	enc.blockRows = 1 << 17
	for i := range 1 << 16 {
		fm.Reset()
		fm.AppendString(schema.ColumnInIfName, "if-"+strconv.Itoa(i))
		if err := enc.Append(storetest.Unframe(t, fm.Finalize())); err != nil {
			t.Fatal(err)
		}
	}
	if p := lcHeader(enc.Block()); !bytes.Equal(p, []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 6, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0}) {
		t.Errorf("InIfName header % x", p)
	}
}

// TestNativeEncoderOmitsDefaultColumns checks that a block leaves out the columns whose every
// row holds the default, whatever the column kind, and keeps the first column when every
// column would go (a block without columns would lose its row count).
func TestNativeEncoderOmitsDefaultColumns(t *testing.T) {
	s := storetest.AllColumnsSchema(t)
	enc, err := NewEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	header := func(block []byte) (cols, rows uint64, names []string) {
		cols, n := binary.Uvarint(block)
		rows, _ = binary.Uvarint(block[n:])
		for i := range enc.cols {
			c := &enc.cols[i]
			marker := append(appendString(nil, c.name), appendString(nil, c.typ)...)
			if bytes.Contains(block, marker) {
				names = append(names, c.name)
			}
		}
		return cols, rows, names
	}
	fm := s.NewFlowMessage()
	for range 3 {
		if err := enc.Append(storetest.Unframe(t, fm.Finalize())); err != nil {
			t.Fatal(err)
		}
	}
	if cols, rows, names := header(enc.Block()); cols != 1 || rows != 3 || len(names) != 1 || names[0] != enc.cols[0].name {
		t.Errorf("block of empty flows: %d columns %v, %d rows", cols, names, rows)
	}

	// One row sets a column of each kind, the others nothing; an explicit zero counts as
	// the default.
	enc.Reset()
	fm.Reset()
	fm.TimeReceived = 1_790_000_000
	fm.SrcAddr = netip.MustParseAddr("2001:db8::1")
	fm.DstASPath = []uint32{3356}
	fm.AppendUint(schema.ColumnBytes, 1500)
	fm.AppendUint(schema.ColumnPackets, 0)
	fm.AppendUint(schema.ColumnInIfBoundary, 1)
	fm.AppendString(schema.ColumnInIfName, "et-0/0/1")
	fm.AppendIP(schema.ColumnSRv6SIDs, netip.MustParseAddr("fc00::1"))
	msg := bytes.Clone(storetest.Unframe(t, fm.Finalize()))
	fm.Reset()
	empty := bytes.Clone(storetest.Unframe(t, fm.Finalize()))
	for _, m := range [][]byte{empty, msg, empty} {
		if err := enc.Append(m); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"TimeReceived", "SrcAddr", "Bytes", "DstASPath", "InIfName", "InIfBoundary", "SRv6SIDs"}
	cols, rows, names := header(enc.Block())
	if int(cols) != len(want) || rows != 3 || len(names) != len(want) {
		t.Fatalf("%d columns %v, %d rows; want %v", cols, names, rows, want)
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("no column %s in %v", w, names)
		}
	}
}

// TestNativeEncoderFastPath checks that appendFast converts the real captures' flows and a
// flow with every kind of column exactly as the field-by-field path, and that a message it
// does not take (an unknown field after known ones, a value out of range, a wire type the
// column does not take) is converted or refused as before with nothing of it left behind.
func TestNativeEncoderFastPath(t *testing.T) {
	s := storetest.AllColumnsSchema(t)
	fast, err := NewEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	slow, _ := NewEncoder(s)
	slow.byTag = nil
	good := storetest.Unframe(t, nativeTestMessage(s, 1_790_000_000))
	bytesField := s.Column(schema.ColumnBytes).Field
	maskField := s.Column(schema.ColumnSrcNetMask).Field // UInt8
	if bytesField >= 16 || maskField < 16 || maskField >= 2048 {
		t.Fatalf("fields %d, %d: want a 1-byte and a 2-byte tag", bytesField, maskField)
	}
	unknown := append(bytes.Clone(good), 0xd0, 0x7d, 0x2a)                                           // field 2000, varint 42
	outOfRange := append(bytes.Clone(good), byte(maskField<<3|0x80), byte(maskField>>4), 0x80, 0x02) // 256 in a UInt8
	wrongType := append(bytes.Clone(good), byte(bytesField<<3|2), 1, 0)                              // length-delimited Bytes
	var batch []byte
	captured := storetest.CaptureMessages(t, s)
	for _, m := range captured {
		batch = append(batch, m...)
	}
	for _, m := range [][]byte{good, unknown, outOfRange, good, wrongType, good} {
		batch = append(pbwire.AppendVarint(batch, uint64(len(m))), m...)
	}
	fok, ferr := fast.AppendDelimited(batch)
	sok, serr := slow.AppendDelimited(batch)
	// Every message but outOfRange and wrongType.
	if want := len(captured) + 4; fok != want || sok != want || ferr == nil || serr == nil || ferr.Error() != serr.Error() {
		t.Fatalf("fast path: %d ok (%v); field by field: %d ok (%v); want %d", fok, ferr, sok, serr, want)
	}
	if !bytes.Equal(fast.Block(), slow.Block()) {
		t.Error("the fast path's block differs")
	}
}

// FuzzStoreNativeEncode feeds arbitrary batches to Encoder, pre-aggregating as the
// sink does. It never panics; a message the schema's decoder refuses is refused too; a
// refused message leaves the block and the groups as they were.
func FuzzStoreNativeEncode(f *testing.F) {
	s := storetest.AllColumnsSchema(f)
	f.Add(nativeTestMessage(s, 1_790_000_000))
	for i, m := range storetest.CaptureMessages(f, s) {
		if i%4 == 0 {
			f.Add(m)
		}
	}
	good := storetest.Unframe(f, nativeTestMessage(s, 1_790_000_000))
	enc, err := NewEncoder(s)
	if err != nil {
		f.Fatal(err)
	}
	ref, _ := NewEncoder(s)
	slow, _ := NewEncoder(s)
	slow.byTag = nil // every message through pbwire's reader and set
	dims := aggDims(s)
	for _, e := range []*Encoder{enc, ref} {
		if _, err = NewAggregator(e, dims, time.Minute); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, batch []byte) {
		enc.Reset()
		ok, err := enc.AppendDelimited(batch)
		if enc.Rows() != ok {
			t.Fatalf("%d rows, %d ok, %v", enc.Rows(), ok, err)
		}
		// appendFast converts exactly as the field-by-field path.
		slow.Reset()
		sok, serr := slow.AppendDelimited(batch)
		if !bytes.Equal(enc.Block(), slow.Block()) || sok != ok || (serr == nil) != (err == nil) {
			t.Fatalf("fast path: %d ok, %v; field by field: %d ok, %v, blocks equal: %v",
				ok, err, sok, serr, bytes.Equal(enc.Block(), slow.Block()))
		}
		enc.agg.Block()
		if g := enc.agg.Groups(); g > ok || (ok > 0 && g == 0) {
			t.Fatalf("%d groups for %d rows", g, ok)
		}
		// The batch's first message, between two good ones.
		msg, _, err := pbwire.SplitDelimited(batch)
		if err != nil {
			return
		}
		enc.Reset()
		enc.Append(good)
		aerr := enc.Append(msg)
		enc.Append(good)
		if derr := s.DecodeMessage(msg, func(*schema.Column, any) {}); derr != nil && aerr == nil {
			t.Fatalf("decoder refuses (%v), encoder accepts", derr)
		}
		if aerr != nil {
			ref.Reset()
			ref.Append(good)
			ref.Append(good)
			if !bytes.Equal(enc.Block(), ref.Block()) {
				t.Fatal("a refused message changed the block")
			}
			if !bytes.Equal(enc.agg.Block(), ref.agg.Block()) {
				t.Fatal("a refused message changed the groups")
			}
		}
	})
}
