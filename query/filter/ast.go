package filter

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"flowzero/query/catalog"
)

// Op is a comparison operator, as the filter language writes it.
type Op string

// The operators.
const (
	OpEq      Op = "="
	OpNe      Op = "!="
	OpLt      Op = "<"
	OpLe      Op = "<="
	OpGt      Op = ">"
	OpGe      Op = ">="
	OpIn      Op = "IN"
	OpNotIn   Op = "NOTIN"
	OpLike    Op = "LIKE"
	OpUnlike  Op = "UNLIKE"
	OpILike   Op = "ILIKE"
	OpIUnlike Op = "IUNLIKE"
	OpSub     Op = "<<"  // an address in a prefix
	OpNotSub  Op = "!<<" // an address outside a prefix
)

// Expr is a node of a parsed filter: *And, *Or, *Not or *Condition.
type Expr interface{ expr() }

// And holds when all its terms hold.
type And struct{ Terms []Expr }

// Or holds when one of its terms holds.
type Or struct{ Terms []Expr }

// Not holds when X does not.
type Not struct{ X Expr }

// Condition compares a column with values (one, or a list for IN and NOTIN) or with
// another column (Right).
type Condition struct {
	Column *catalog.Column
	Op     Op
	Values []Value
	Right  *catalog.Column
	// Pos is the byte offset of the column's name in the filter.
	Pos int
}

func (*And) expr()       {}
func (*Or) expr()        {}
func (*Not) expr()       {}
func (*Condition) expr() {}

// Value is one value of a condition, checked against its column's kind.
type Value struct {
	// Num is a number: an AS, a port, a protocol, an Ethernet type, a MAC address (48
	// bits), a community (ASN<<16 | value), an enum's index, a plain number.
	Num uint64
	// Str is a string, an enum's value or a protocol's name.
	Str string
	// Addr is an address; Prefix a prefix when IsPrefix (for address and prefix columns).
	Addr     netip.Addr
	Prefix   netip.Prefix
	IsPrefix bool
	// Large is a large community (global administrator, local data 1, local data 2); IsLarge
	// is set on a large community given to a communities column.
	Large   [3]uint32
	IsLarge bool
	// Time is a time.
	Time time.Time
	// Pos and End are the bytes of the filter the value was read from.
	Pos, End int
}

// format writes a value the way the filter language reads it back.
func (v Value) format(b *strings.Builder, col *catalog.Column, cat *catalog.Catalog) {
	switch kind := valueKind(col); kind {
	case catalog.KindAddress:
		if v.IsPrefix {
			b.WriteString(v.Prefix.String())
		} else {
			b.WriteString(v.Addr.String())
		}
	case catalog.KindPrefix:
		b.WriteString(v.Prefix.String())
	case catalog.KindAS, catalog.KindASPath:
		b.WriteString("AS")
		b.WriteString(strconv.FormatUint(v.Num, 10))
	case catalog.KindCommunities, catalog.KindLargeCommunities:
		if v.IsLarge || kind == catalog.KindLargeCommunities {
			b.WriteString(strconv.FormatUint(uint64(v.Large[0]), 10) + ":" +
				strconv.FormatUint(uint64(v.Large[1]), 10) + ":" + strconv.FormatUint(uint64(v.Large[2]), 10))
		} else {
			b.WriteString(strconv.FormatUint(v.Num>>16, 10) + ":" + strconv.FormatUint(v.Num&0xffff, 10))
		}
	case catalog.KindMAC:
		b.WriteString(formatMAC(v.Num))
	case catalog.KindProtocol:
		if name := cat.ProtocolName(v.Num); name != "" && v.Str != "" && isBareWord(name) {
			b.WriteString(name)
		} else if name != "" && v.Str != "" {
			writeQuoted(b, name)
		} else {
			b.WriteString(strconv.FormatUint(v.Num, 10))
		}
	case catalog.KindEType:
		switch v.Num {
		case etypeIPv4:
			b.WriteString("IPv4")
		case etypeIPv6:
			b.WriteString("IPv6")
		default:
			b.WriteString(strconv.FormatUint(v.Num, 10))
		}
	case catalog.KindEnum:
		b.WriteString(v.Str)
	case catalog.KindString:
		writeQuoted(b, v.Str)
	case catalog.KindTime:
		writeQuoted(b, v.Time.UTC().Format(time.RFC3339))
	default:
		b.WriteString(strconv.FormatUint(v.Num, 10))
	}
}

// valueKind is the kind of a column's values: an array's element kind.
func valueKind(col *catalog.Column) catalog.Kind {
	if col.Kind == catalog.KindArray {
		return col.Elem
	}
	return col.Kind
}

// writeQuoted writes s as a double-quoted string of the filter language.
func writeQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}

// Quote returns s as a double-quoted string of the filter language (for completions).
func Quote(s string) string {
	var b strings.Builder
	writeQuoted(&b, s)
	return b.String()
}

// isBareWord tells whether s reads back as one word (a protocol or enum name unquoted).
func isBareWord(s string) bool {
	if s == "" || strings.Contains(s, "--") || strings.Contains(s, "/*") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) {
			return false
		}
	}
	return true
}

func formatMAC(v uint64) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i := 5; i >= 0; i-- {
		x := byte(v >> (8 * i))
		b = append(b, digits[x>>4], digits[x&15])
		if i > 0 {
			b = append(b, ':')
		}
	}
	return string(b)
}

// format writes an expression in the filter language; parent is the precedence of the
// enclosing node (0 top, 1 OR, 2 AND, 3 NOT), to add the parentheses it needs.
func format(b *strings.Builder, e Expr, parent int, cat *catalog.Catalog) {
	switch e := e.(type) {
	case *Or:
		if parent > 1 {
			b.WriteByte('(')
		}
		for i, t := range e.Terms {
			if i > 0 {
				b.WriteString(" OR ")
			}
			format(b, t, 1, cat)
		}
		if parent > 1 {
			b.WriteByte(')')
		}
	case *And:
		if parent > 2 {
			b.WriteByte('(')
		}
		for i, t := range e.Terms {
			if i > 0 {
				b.WriteString(" AND ")
			}
			format(b, t, 2, cat)
		}
		if parent > 2 {
			b.WriteByte(')')
		}
	case *Not:
		b.WriteString("NOT ")
		format(b, e.X, 3, cat)
	case *Condition:
		b.WriteString(e.Column.Name)
		b.WriteByte(' ')
		b.WriteString(string(e.Op))
		b.WriteByte(' ')
		switch {
		case e.Right != nil:
			b.WriteString(e.Right.Name)
		case e.Op == OpIn || e.Op == OpNotIn:
			b.WriteByte('(')
			for i, v := range e.Values {
				if i > 0 {
					b.WriteString(", ")
				}
				v.format(b, e.Column, cat)
			}
			b.WriteByte(')')
		default:
			e.Values[0].format(b, e.Column, cat)
		}
	}
}
