package filter

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"

	"flowzero/query/catalog"
	"flowzero/query/chsql"
)

// SQL returns the filter as a ClickHouse boolean expression, "" for an empty filter. With
// reverse, each column is replaced by the one of the other direction (catalog.ReverseOf).
func (f *Filter) SQL(reverse bool) string {
	if f.Empty() {
		return ""
	}
	c := compiler{cat: f.cat, reverse: reverse}
	c.expr(f.root)
	return c.b.String()
}

// Columns returns the columns the filter's SQL reads, each once (with reverse, those of the
// other direction).
func (f *Filter) Columns(reverse bool) []*catalog.Column {
	if f.Empty() {
		return nil
	}
	c := compiler{cat: f.cat, reverse: reverse}
	c.expr(f.root)
	return c.used
}

type compiler struct {
	cat     *catalog.Catalog
	reverse bool
	b       strings.Builder
	used    []*catalog.Column
}

// col returns the name of a column as the SQL reads it, recording its use.
func (c *compiler) col(col *catalog.Column) string {
	if c.reverse {
		col = c.cat.ReverseOf(col)
	}
	for _, u := range c.used {
		if u == col {
			return col.Name
		}
	}
	c.used = append(c.used, col)
	return col.Name
}

func (c *compiler) expr(e Expr) {
	switch e := e.(type) {
	case *Or:
		c.join(e.Terms, " OR ")
	case *And:
		c.join(e.Terms, " AND ")
	case *Not:
		c.b.WriteString("NOT ")
		c.operand(e.X)
	case *Condition:
		c.condition(e)
	}
}

func (c *compiler) join(terms []Expr, sep string) {
	for i, t := range terms {
		if i > 0 {
			c.b.WriteString(sep)
		}
		c.operand(t)
	}
}

// operand writes a term of AND, OR or NOT in parentheses (conditions with several parts
// have their own).
func (c *compiler) operand(e Expr) {
	c.b.WriteByte('(')
	c.expr(e)
	c.b.WriteByte(')')
}

func (c *compiler) condition(e *Condition) {
	b := &c.b
	if e.Right != nil {
		b.WriteString(c.col(e.Column) + " " + sqlOp(e.Op) + " " + c.col(e.Right))
		return
	}
	kind := e.Column.Kind
	switch kind {
	case catalog.KindAddress:
		c.address(e)
	case catalog.KindASPath, catalog.KindArray, catalog.KindLargeCommunities:
		c.contains(e.Column, e.Op, e.Values)
	case catalog.KindCommunities:
		var std, large []Value
		for _, v := range e.Values {
			if v.IsLarge {
				large = append(large, v)
			} else {
				std = append(std, v)
			}
		}
		switch {
		case len(large) == 0:
			c.contains(e.Column, e.Op, std)
		case len(std) == 0:
			c.contains(c.cat.Column(largeName(e.Column)), e.Op, large)
		default:
			// A list of both: either column holds one of its values.
			if e.Op == OpNotIn {
				b.WriteString("NOT ")
			}
			b.WriteByte('(')
			c.contains(e.Column, OpIn, std)
			b.WriteString(" OR ")
			c.contains(c.cat.Column(largeName(e.Column)), OpIn, large)
			b.WriteByte(')')
		}
	default:
		name := c.col(e.Column)
		switch e.Op {
		case OpIn, OpNotIn:
			b.WriteString(name + " " + sqlOp(e.Op) + " (")
			for i, v := range e.Values {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(literal(e.Column, v))
			}
			b.WriteByte(')')
		default:
			b.WriteString(name + " " + sqlOp(e.Op) + " " + literal(e.Column, e.Values[0]))
		}
	}
}

// contains writes the condition on an array column: = has a value, != has not, IN has one
// of the values, NOTIN has none.
func (c *compiler) contains(col *catalog.Column, op Op, values []Value) {
	b := &c.b
	name := c.col(col)
	if op == OpNe || op == OpNotIn {
		b.WriteString("NOT ")
	}
	if op == OpEq || op == OpNe {
		b.WriteString("has(" + name + ", " + literal(col, values[0]) + ")")
		return
	}
	b.WriteString("hasAny(" + name + ", [")
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(literal(col, v))
	}
	b.WriteString("])")
}

// address writes the condition on an address column: equality with addresses, ranges for
// prefixes.
func (c *compiler) address(e *Condition) {
	b := &c.b
	name := c.col(e.Column)
	switch e.Op {
	case OpEq, OpNe:
		b.WriteString(name + " " + sqlOp(e.Op) + " " + ipv6(e.Values[0].Addr))
	case OpSub:
		b.WriteString(name + " BETWEEN " + prefixRange(e.Values[0].Prefix))
	case OpNotSub:
		b.WriteString(name + " NOT BETWEEN " + prefixRange(e.Values[0].Prefix))
	case OpIn, OpNotIn:
		var addrs []string
		var parts []string
		for _, v := range e.Values {
			if v.IsPrefix {
				parts = append(parts, name+" BETWEEN "+prefixRange(v.Prefix))
			} else {
				addrs = append(addrs, ipv6(v.Addr))
			}
		}
		if len(addrs) > 0 {
			parts = append([]string{name + " IN (" + strings.Join(addrs, ", ") + ")"}, parts...)
		}
		if e.Op == OpNotIn {
			b.WriteString("NOT ")
		}
		b.WriteString("(" + strings.Join(parts, " OR ") + ")")
	}
}

// sqlOp is an operator in ClickHouse.
func sqlOp(op Op) string {
	switch op {
	case OpNotIn:
		return "NOT IN"
	case OpUnlike:
		return "NOT LIKE"
	case OpIUnlike:
		return "NOT ILIKE"
	}
	return string(op)
}

// literal is a value as ClickHouse reads it for the column.
func literal(col *catalog.Column, v Value) string {
	switch valueKind(col) {
	case catalog.KindAddress:
		return ipv6(v.Addr)
	case catalog.KindPrefix:
		return chsql.String(v.Prefix.String())
	case catalog.KindEnum, catalog.KindString:
		return chsql.String(v.Str)
	case catalog.KindTime:
		return "toDateTime(" + strconv.FormatInt(v.Time.Unix(), 10) + ")"
	case catalog.KindCommunities, catalog.KindLargeCommunities:
		if v.IsLarge || valueKind(col) == catalog.KindLargeCommunities {
			var raw [12]byte
			for i, part := range v.Large {
				binary.BigEndian.PutUint32(raw[4*i:], part)
			}
			return "toFixedString(unhex(" + chsql.String(strings.ToUpper(hex.EncodeToString(raw[:]))) + "), 12)"
		}
	}
	return strconv.FormatUint(v.Num, 10)
}

// ipv6 is an address as the columns store it: IPv6, IPv4 mapped.
func ipv6(a netip.Addr) string {
	return "toIPv6(" + chsql.String(netip.AddrFrom16(a.As16()).String()) + ")"
}

// prefixRange is "low AND high", the first and last address of a prefix as stored.
func prefixRange(p netip.Prefix) string {
	first := p.Masked().Addr()
	raw := first.As16()
	bits := p.Bits()
	if first.Is4() {
		bits += 96
	}
	for i := bits; i < 128; i++ {
		raw[i/8] |= 1 << (7 - i%8)
	}
	return ipv6(first) + " AND " + ipv6(netip.AddrFrom16(raw))
}
