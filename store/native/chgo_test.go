package native

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ClickHouse/ch-go/proto"

	"flowzero/schema"
	"flowzero/store/internal/storetest"
)

// ch-go's proto package (github.com/ClickHouse/ch-go/proto), ClickHouse's own Go
// implementation of the Native block layout, checks the encoder's blocks without the engine
// (TestBlocksDecodeWithChGo), and writes the same blocks from the encoder's columns for
// BenchmarkStoreNativeEncode impl=chgo, the comparison that keeps the encoder's own writer on
// the hot path (docs/design/store.md).

// chgoRows decodes every Native block of data with ch-go's columns and returns its rows,
// each value formatted by chgoValue, fields separated by tabs, in the order of names; a
// column the block leaves out has its default (defaults, in the same order).
func chgoRows(t testing.TB, data []byte, names, defaults []string) []string {
	t.Helper()
	var out []string
	r := proto.NewReader(bytes.NewReader(data))
	for {
		ncols, err := r.Int()
		if errors.Is(err, io.EOF) && len(out) > 0 {
			return out
		}
		if err != nil {
			t.Fatalf("block header: %v", err)
		}
		rows, err := r.Int()
		if err != nil {
			t.Fatalf("block header: %v", err)
		}
		cols := make([]proto.Column, len(names))
		for range ncols {
			name, err := r.Str()
			if err != nil {
				t.Fatal(err)
			}
			typ, err := r.Str()
			if err != nil {
				t.Fatal(err)
			}
			col := chgoColumn(t, proto.ColumnType(typ))
			if d, ok := col.(proto.StateDecoder); ok {
				if err := d.DecodeState(r); err != nil {
					t.Fatalf("column %s state: %v", name, err)
				}
			}
			if err := col.DecodeColumn(r, rows); err != nil {
				t.Fatalf("column %s (%s): %v", name, typ, err)
			}
			i := slices.Index(names, name)
			if i < 0 {
				t.Fatalf("block column %s not in %v", name, names)
			}
			cols[i] = col
		}
		for row := range rows {
			vals := slices.Clone(defaults)
			for i, c := range cols {
				if c != nil {
					vals[i] = chgoValue(t, c, row)
				}
			}
			out = append(out, strings.Join(vals, "\t"))
		}
	}
}

// chgoColumn returns ch-go's column of type t: inferred, except FixedString(N), which ch-go
// infers for a few sizes only.
func chgoColumn(t testing.TB, typ proto.ColumnType) proto.Column {
	t.Helper()
	fixed := func(typ proto.ColumnType) *proto.ColFixedStr {
		n, err := strconv.Atoi(string(typ.Elem()))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		return &proto.ColFixedStr{Size: n}
	}
	switch {
	case typ.Base() == "FixedString":
		return fixed(typ)
	case typ.Base() == proto.ColumnTypeArray && typ.Elem().Base() == "FixedString":
		return fixed(typ.Elem()).Array()
	}
	var auto proto.ColAuto
	if err := auto.Infer(typ); err != nil {
		t.Fatalf("ch-go has no column for %s: %v", typ, err)
	}
	return auto.Data
}

// chgoValue formats row i of a decoded ch-go column as expectedValue formats a message's.
func chgoValue(t testing.TB, col proto.Column, i int) string {
	switch c := col.(type) {
	case *proto.ColUInt8:
		return strconv.FormatUint(uint64((*c)[i]), 10)
	case *proto.ColUInt16:
		return strconv.FormatUint(uint64((*c)[i]), 10)
	case *proto.ColUInt32:
		return strconv.FormatUint(uint64((*c)[i]), 10)
	case *proto.ColUInt64:
		return strconv.FormatUint((*c)[i], 10)
	case *proto.ColDateTime:
		return strconv.FormatUint(uint64(c.Data[i]), 10)
	case *proto.ColEnum:
		return c.Row(i)
	case *proto.ColIPv6:
		return netip.AddrFrom16((*c)[i]).String()
	case *proto.ColFixedStr:
		return string(bytes.TrimRight(c.Row(i), "\x00"))
	case *proto.ColLowCardinality[string]:
		return c.Row(i)
	case *proto.ColArr[uint32]:
		return joinValues(c.Row(i), func(v uint32) string { return strconv.FormatUint(uint64(v), 10) })
	case *proto.ColArr[uint64]:
		return joinValues(c.Row(i), func(v uint64) string { return strconv.FormatUint(v, 10) })
	case *proto.ColArr[proto.IPv6]:
		return joinValues(c.Row(i), func(v proto.IPv6) string { return netip.AddrFrom16(v).String() })
	case *proto.ColArr[[]byte]:
		return joinValues(c.Row(i), hex.EncodeToString)
	}
	t.Fatalf("no formatting of a %T (%s)", col, col.Type())
	return ""
}

func joinValues[T any](vs []T, format func(T) string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = format(v)
	}
	return strings.Join(s, ",")
}

// expectedRows decodes framed messages with the schema and formats their wire columns as
// chgoRows does, absent fields as the column's default.
func expectedRows(t testing.TB, s *schema.Schema, msgs [][]byte) (names, defaults, rows []string) {
	t.Helper()
	cols := s.WireColumns()
	for _, c := range cols {
		names = append(names, c.Name)
		defaults = append(defaults, defaultValue(c))
	}
	for _, framed := range msgs {
		vals := map[string][]string{}
		if err := s.DecodeMessage(storetest.Unframe(t, framed), func(c *schema.Column, v any) {
			vals[c.Name] = append(vals[c.Name], expectedValue(c, v))
		}); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, c := range cols {
			switch v, ok := vals[c.Name]; {
			case ok && c.Kind.Repeated():
				row[i] = strings.Join(v, ",")
			case ok:
				row[i] = v[len(v)-1] // the last value of a field given twice
			default:
				row[i] = defaults[i]
			}
		}
		rows = append(rows, strings.Join(row, "\t"))
	}
	return names, defaults, rows
}

// defaultValue is the column's default as expectedValue formats it.
func defaultValue(c *schema.Column) string {
	switch {
	case c.Kind == schema.KindIP:
		return "::"
	case c.Kind == schema.KindEnum:
		return c.EnumName(0)
	case c.Kind == schema.KindString || c.Kind == schema.KindBytes || c.Kind.Repeated():
		return ""
	}
	return "0"
}

func expectedValue(c *schema.Column, v any) string {
	switch x := v.(type) {
	case netip.Addr:
		return netip.AddrFrom16(x.As16()).String()
	case uint64:
		if c.Kind == schema.KindEnum {
			return c.EnumName(x)
		}
		return strconv.FormatUint(x, 10)
	case string:
		return x
	case []byte:
		return string(bytes.TrimRight(x, "\x00"))
	case schema.LargeCommunity:
		var b [12]byte
		binary.BigEndian.PutUint32(b[0:], x.ASN) // RFC 8092 order, as on the wire
		binary.BigEndian.PutUint32(b[4:], x.LocalData1)
		binary.BigEndian.PutUint32(b[8:], x.LocalData2)
		return hex.EncodeToString(b[:])
	}
	return fmt.Sprint(v)
}

// TestBlocksDecodeWithChGo decodes the encoder's blocks with ch-go's implementation of the
// Native format: every row reads back as the message it was converted from (compared as
// sets: the block is in the sorting key's order), for the default columns and every column,
// in one sorted block and in many small ones in arrival order, for the flows of the captures
// with a flow that has every kind of column set, and flows whose sorting key varies in every
// part (IPv4 and IPv6 exporters); ch-go's own writer (chgoWriter) gives the same rows.
func TestBlocksDecodeWithChGo(t *testing.T) {
	for name, s := range map[string]*schema.Schema{
		"default columns": storetest.MustSchema(t, schema.DefaultConfiguration()),
		"all columns":     storetest.AllColumnsSchema(t),
	} {
		batches := map[string][][]byte{
			"captures": append(storetest.CaptureMessages(t, s), nativeTestMessage(s, storetest.BaseTime)),
			"ipv4":     sortTestFlows(s, storetest.BaseTime, 3000, false),
			"ipv6":     sortTestFlows(s, storetest.BaseTime, 3000, true),
		}
		for batchName, msgs := range batches {
			names, defaults, arrival := expectedRows(t, s, msgs)
			want := slices.Sorted(slices.Values(arrival))
			var batch []byte
			for _, m := range msgs {
				batch = append(batch, m...)
			}
			for _, layout := range []string{"sorted", "blocks of 7 rows", "chgo writer"} {
				t.Run(name+"/"+batchName+"/"+layout, func(t *testing.T) {
					enc := mustEncoder(t, s)
					if layout == "blocks of 7 rows" {
						enc.sorter, enc.blockRows = nil, 7
					}
					if ok, err := enc.AppendDelimited(batch); ok != len(msgs) || err != nil {
						t.Fatalf("%d of %d converted: %v", ok, len(msgs), err)
					}
					var block []byte
					if layout == "chgo writer" {
						block = new(chgoWriter).block(enc)
					} else {
						block = enc.Block()
					}
					got := chgoRows(t, block, names, defaults)
					if sorted := !slices.Equal(got, arrival); sorted != (layout != "blocks of 7 rows") {
						t.Errorf("rows in the sorting key's order: %v", sorted)
					}
					slices.Sort(got)
					if len(got) != len(want) {
						t.Fatalf("%d rows decoded, want %d", len(got), len(want))
					}
					for i := range want {
						if got[i] != want[i] {
							g, w := strings.Split(got[i], "\t"), strings.Split(want[i], "\t")
							for j := range w {
								if g[j] != w[j] {
									t.Errorf("row %d column %s: %q, want %q", i, names[j], g[j], w[j])
								}
							}
							t.FailNow()
						}
					}
				})
			}
		}
	}
}

// chgoWriter writes the encoder's block with ch-go's proto columns instead of flush's own
// writing: the same rows (the columns the block holds, in the sorting key's order), filled
// into ch-go's column types and encoded by proto.Block.EncodeRawBlock. Its columns and
// buffer are reused block after block.
type chgoWriter struct {
	cols  []proto.Column
	input []proto.InputColumn
	buf   proto.Buffer
	u32   []uint32
	u64   []uint64
	ips   []proto.IPv6
	fixed [][]byte
	elems [][]byte
}

// typed gives a raw column (Enum8's values) the type name of its column.
type typed struct {
	proto.Column
	t proto.ColumnType
}

func (c typed) Type() proto.ColumnType { return c.t }

// block writes the block of the rows appended to e since its last Reset, as Block does.
func (w *chgoWriter) block(e *Encoder) []byte {
	rows := e.rows
	ncols := e.closeBlock()
	var perm []uint32
	if e.sorter != nil {
		perm = e.sorter.permutation(e, rows)
	}
	if perm == nil {
		perm = make([]uint32, rows) // a test without sorter: arrival order
		for i := range perm {
			perm[i] = uint32(i)
		}
	}
	if w.cols == nil {
		w.cols = make([]proto.Column, len(e.cols))
		for i := range e.cols {
			c := &e.cols[i]
			switch {
			case c.op == opUint8:
				w.cols[i] = new(proto.ColUInt8)
			case c.op == opUint16:
				w.cols[i] = new(proto.ColUInt16)
			case c.op == opUint32 && c.typ == "DateTime":
				w.cols[i] = new(proto.ColDateTime)
			case c.op == opUint32:
				w.cols[i] = new(proto.ColUInt32)
			case c.op == opUint64:
				w.cols[i] = new(proto.ColUInt64)
			case c.op == opEnum8:
				w.cols[i] = &typed{new(proto.ColEnum8), proto.ColumnType(c.typ)}
			case c.op == opIPv6:
				w.cols[i] = new(proto.ColIPv6)
			case c.op == opFixedString:
				w.cols[i] = &proto.ColFixedStr{Size: c.width}
			case c.op == opLowCard:
				w.cols[i] = new(proto.ColStr).LowCardinality()
			case c.op == opArrayUint && c.width == 4:
				w.cols[i] = new(proto.ColUInt32).Array()
			case c.op == opArrayUint:
				w.cols[i] = new(proto.ColUInt64).Array()
			case c.op == opArrayFixed && c.width == 16:
				w.cols[i] = new(proto.ColIPv6).Array()
			default:
				w.cols[i] = (&proto.ColFixedStr{Size: c.width}).Array()
			}
		}
	}
	w.input = w.input[:0]
	for i := range e.cols {
		c := &e.cols[i]
		if c.omit {
			continue
		}
		col := w.cols[i]
		if r, ok := col.(proto.Resettable); ok {
			r.Reset()
		} else {
			col.(*typed).Column.(proto.Resettable).Reset()
		}
		switch p := col.(type) {
		case *proto.ColUInt8:
			for _, r := range perm {
				*p = append(*p, c.data[r])
			}
		case *proto.ColUInt16:
			for _, r := range perm {
				*p = append(*p, binary.LittleEndian.Uint16(c.data[2*r:]))
			}
		case *proto.ColUInt32:
			for _, r := range perm {
				*p = append(*p, binary.LittleEndian.Uint32(c.data[4*r:]))
			}
		case *proto.ColDateTime:
			for _, r := range perm {
				p.Data = append(p.Data, proto.DateTime(binary.LittleEndian.Uint32(c.data[4*r:])))
			}
		case *proto.ColUInt64:
			for _, r := range perm {
				*p = append(*p, binary.LittleEndian.Uint64(c.data[8*r:]))
			}
		case *typed:
			e8 := p.Column.(*proto.ColEnum8)
			for _, r := range perm {
				*e8 = append(*e8, proto.Enum8(c.data[r]))
			}
		case *proto.ColIPv6:
			for _, r := range perm {
				*p = append(*p, proto.IPv6(c.data[16*r:]))
			}
		case *proto.ColFixedStr:
			for _, r := range perm {
				p.Append(c.data[c.width*int(r) : c.width*int(r+1)])
			}
		case *proto.ColLowCardinality[string]:
			for _, r := range perm {
				p.Append(c.keyValue(binary.LittleEndian.Uint32(c.data[4*r:])))
			}
		case *proto.ColArr[uint32]:
			for _, r := range perm {
				w.u32 = w.u32[:0]
				for _, v := range c.rowElems(r, &w.elems) {
					w.u32 = append(w.u32, binary.LittleEndian.Uint32(v))
				}
				p.Append(w.u32)
			}
		case *proto.ColArr[uint64]:
			for _, r := range perm {
				w.u64 = w.u64[:0]
				for _, v := range c.rowElems(r, &w.elems) {
					w.u64 = append(w.u64, binary.LittleEndian.Uint64(v))
				}
				p.Append(w.u64)
			}
		case *proto.ColArr[proto.IPv6]:
			for _, r := range perm {
				w.ips = w.ips[:0]
				for _, v := range c.rowElems(r, &w.elems) {
					w.ips = append(w.ips, proto.IPv6(v))
				}
				p.Append(w.ips)
			}
		case *proto.ColArr[[]byte]:
			for _, r := range perm {
				w.fixed = append(w.fixed[:0], c.rowElems(r, &w.elems)...)
				p.Append(w.fixed)
			}
		}
		w.input = append(w.input, proto.InputColumn{Name: c.name, Data: col})
	}
	w.buf.Reset()
	if err := (proto.Block{Columns: ncols, Rows: rows}).EncodeRawBlock(&w.buf, 0, w.input); err != nil {
		panic(err)
	}
	e.done += rows
	e.forgetInterned()
	e.resetColumns()
	return w.buf.Buf
}

// rowElems returns the elements of an array column's row r (its offsets closed), each
// width bytes, in *scratch's memory.
func (c *column) rowElems(r uint32, scratch *[][]byte) [][]byte {
	start := uint64(0)
	if r > 0 {
		start = c.offsets[r-1]
	}
	out := (*scratch)[:0]
	for i := start; i < c.offsets[r]; i++ {
		out = append(out, c.data[int(i)*c.width:int(i+1)*c.width])
	}
	*scratch = out
	return out
}
