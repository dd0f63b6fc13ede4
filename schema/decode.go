package schema

import (
	"errors"
	"fmt"
	"net/netip"

	"flowzero/pbwire"
)

// ErrBadField is returned by DecodeMessage for a known field whose wire type or length does
// not match its column.
var ErrBadField = errors.New("field does not match its column")

// fieldColumns maps a protobuf field number to its column, for every column of the table.
var fieldColumns = func() []ColumnKey {
	last := 0
	for _, c := range columnTable {
		last = max(last, c.Field)
	}
	out := make([]ColumnKey, last+1)
	for _, c := range columnTable {
		if c.Field > 0 {
			out[c.Field] = c.Key
		}
	}
	return out
}()

// ColumnByField returns the column with protobuf field number num.
func ColumnByField(num int) (ColumnKey, bool) {
	if num <= 0 || num >= len(fieldColumns) || fieldColumns[num] == 0 {
		return 0, false
	}
	return fieldColumns[num], true
}

// DecodeMessage decodes one FlowMessage (without its length prefix; cut it with
// pbwire.SplitDelimited) and calls fn for each value, in wire order. It is the reader used by
// tests and by sinks that print flows (stdout, JSON); it is not on the collector's hot path.
//
// Fields are matched by number against the whole column table, not only the columns enabled
// in s, so messages written with another configuration decode as well; unknown field numbers
// are skipped. Values passed to fn:
//
//   - uint64 for KindUint64, KindUint32, KindEnum (see Column.EnumName) and KindMAC;
//   - string for KindString, []byte for KindBytes (sub-slices of b);
//   - netip.Addr for KindIP, and for each element of KindArrayIP (IPv4-mapped addresses are
//     unmapped);
//   - uint64 for each element of KindArrayUint32 and KindArrayUint64, packed or not;
//   - LargeCommunity for each element of KindArrayLargeCommunity.
//
// Repeated columns call fn once per element. A malformed message, or a known field whose wire
// type or size does not fit its column, returns an error (values before it were reported).
func (s *Schema) DecodeMessage(b []byte, fn func(col *Column, value any)) error {
	r := pbwire.NewReader(b)
	for r.Next() {
		f := r.Field()
		k, ok := ColumnByField(int(f.Num))
		if !ok {
			continue
		}
		c := &columns[k]
		if err := decodeField(c, &f, fn); err != nil {
			return fmt.Errorf("schema: field %d (%s): %w", f.Num, c.Name, err)
		}
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}

func decodeField(c *Column, f *pbwire.Field, fn func(col *Column, value any)) error {
	switch c.Kind {
	case KindUint64, KindUint32, KindEnum, KindMAC:
		if f.Type != pbwire.Varint {
			return fmt.Errorf("wire type %s: %w", f.Type, ErrBadField)
		}
		v := f.Varint
		if c.Kind == KindUint32 {
			v = uint64(uint32(v))
		}
		fn(c, v)
	case KindString:
		if f.Type != pbwire.Bytes {
			return fmt.Errorf("wire type %s: %w", f.Type, ErrBadField)
		}
		fn(c, string(f.Bytes))
	case KindBytes:
		if f.Type != pbwire.Bytes {
			return fmt.Errorf("wire type %s: %w", f.Type, ErrBadField)
		}
		fn(c, f.Bytes)
	case KindIP, KindArrayIP:
		if f.Type != pbwire.Bytes || len(f.Bytes) != 16 {
			return fmt.Errorf("address of %d bytes: %w", len(f.Bytes), ErrBadField)
		}
		fn(c, netip.AddrFrom16([16]byte(f.Bytes)).Unmap())
	case KindArrayUint32, KindArrayUint64:
		switch f.Type {
		case pbwire.Varint:
			v := f.Varint
			if c.Kind == KindArrayUint32 {
				v = uint64(uint32(v))
			}
			fn(c, v)
		case pbwire.Bytes:
			p := f.Packed(pbwire.Varint)
			for p.Next() {
				v := p.Value()
				if c.Kind == KindArrayUint32 {
					v = uint64(uint32(v))
				}
				fn(c, v)
			}
			if err := p.Err(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("wire type %s: %w", f.Type, ErrBadField)
		}
	case KindArrayLargeCommunity:
		if f.Type != pbwire.Bytes || len(f.Bytes) != 12 {
			return fmt.Errorf("large community of %d bytes: %w", len(f.Bytes), ErrBadField)
		}
		b := f.Bytes
		fn(c, LargeCommunity{
			ASN:        be32(b[0:4]),
			LocalData1: be32(b[4:8]),
			LocalData2: be32(b[8:12]),
		})
	}
	return nil
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// EnumName returns the name of value v of an enum column, or its number as text.
func (c *Column) EnumName(v uint64) string {
	for _, e := range c.Enum {
		if uint64(e.Value) == v {
			return e.Name
		}
	}
	return fmt.Sprint(v)
}
