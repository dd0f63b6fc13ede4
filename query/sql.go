package query

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"flowzero/query/catalog"
	"flowzero/query/chsql"
)

// unitExpr is the aggregate a unit sums over a bucket (its value per bucket; the rate is
// that divided by the bucket's seconds): bits, packets, flows, or for the % units the L2
// bits × 100 / interface speed summed, divided by the number of distinct interfaces.
func unitExpr(u Unit, t catalog.Table) string {
	switch u {
	case UnitL2bps:
		return "sum((Bytes + 38 * Packets) * SamplingRate) * 8"
	case UnitPps:
		return "sum(Packets * SamplingRate)"
	case UnitFps:
		if t.Resolution == 0 {
			return "count()"
		}
		return "sum(Flows)"
	case UnitInL2Pct, UnitOutL2Pc:
		dir := "In"
		if u == UnitOutL2Pc {
			dir = "Out"
		}
		return fmt.Sprintf("ifNotFinite(sumIf((Bytes + 38 * Packets) * SamplingRate * 8 * 100 / (%[1]sIfSpeed * 1000000), %[1]sIfSpeed > 0)"+
			" / uniqExactIf((ExporterAddress, %[1]sIf), %[1]sIfSpeed > 0), 0)", dir)
	}
	return "sum(Bytes * SamplingRate) * 8"
}

// additive tells whether a unit's bucket values add up over buckets to its value over the
// range (the % units divide by a count of interfaces, which does not add).
func additive(u Unit) bool { return u != UnitInL2Pct && u != UnitOutL2Pc }

// reverseUnit is the unit of the other direction.
func reverseUnit(u Unit) Unit {
	switch u {
	case UnitInL2Pct:
		return UnitOutL2Pc
	case UnitOutL2Pc:
		return UnitInL2Pct
	}
	return u
}

// totalOf turns a unit's sum over a range into the total the API reports: bytes for bits,
// packets, flows.
func totalOf(u Unit, sum float64) float64 {
	if u == UnitL3bps || u == UnitL2bps {
		return sum / 8
	}
	return sum
}

// timeRange is the WHERE of a window: TimeReceived in [start, start + n × interval).
func timeRange(start, end time.Time) string {
	return fmt.Sprintf("TimeReceived >= toDateTime(%d) AND TimeReceived < toDateTime(%d)", start.Unix(), end.Unix())
}

// where is timeRange with a filter's SQL.
func where(start, end time.Time, filterSQL string) string {
	w := timeRange(start, end)
	if filterSQL != "" {
		w += " AND (" + filterSQL + ")"
	}
	return w
}

// bucket is the index of a row's bucket from start.
func bucket(start time.Time, interval time.Duration) string {
	return fmt.Sprintf("intDiv(toUnixTimestamp(TimeReceived) - %d, %d)", start.Unix(), int64(interval/time.Second))
}

// exprs writes the expressions of dimensions.
type exprs struct {
	cat    *catalog.Catalog
	t4, t6 int
}

// isIPv4 tells whether an address column holds an IPv4 address (IPv4-mapped).
func isIPv4(col string) string {
	return "IPv6CIDRToRange(" + col + ", 96).1 = toIPv6('::ffff:0.0.0.0')"
}

// truncated tells whether an address dimension is cut.
func (e exprs) truncated(col *catalog.Column) bool {
	return col.Truncatable && (e.t4 < 32 || e.t6 < 128)
}

// key is what a dimension groups by: the column, or its address cut to the prefix.
func (e exprs) key(col *catalog.Column) string {
	if !e.truncated(col) {
		return col.Name
	}
	return fmt.Sprintf("IPv6CIDRToRange(%s, if(%s, %d, %d)).1", col.Name, isIPv4(col.Name), 96+e.t4, e.t6)
}

// asName is the name of an AS number from the asns dictionary, or "".
func (e exprs) asName(x string) string {
	return fmt.Sprintf("dictGetOrDefault(%s, 'name', toUInt32(%s), '')", chsql.String(e.cat.Database+".asns"), x)
}

// addressText is an address as text, IPv4 without ::ffff:.
func addressText(x string) string {
	return "replaceRegexpOne(toString(" + x + "), '^::ffff:', '')"
}

// display is how a dimension's value (key k of column col) is shown, as a string.
func (e exprs) display(col *catalog.Column, k string) string {
	switch col.Kind {
	case catalog.KindAddress:
		if !e.truncated(col) {
			return addressText(k)
		}
		return fmt.Sprintf("concat(%s, if(%s, %s, %s))", addressText(k), isIPv4(col.Name),
			chsql.String(suffix(e.t4, 32)), chsql.String(suffix(e.t6, 128)))
	case catalog.KindAS:
		as := "concat('AS', toString(" + k + "))"
		if !e.cat.ASNames {
			return as
		}
		return fmt.Sprintf("if(empty(%[2]s), %[1]s, concat(%[1]s, ': ', %[2]s))", as, e.asName(k))
	case catalog.KindASPath, catalog.KindArray:
		elem := "toString(x)"
		if col.Elem == catalog.KindAddress {
			elem = addressText("x")
		}
		return "arrayStringConcat(arrayMap(x -> " + elem + ", " + k + "), ' ')"
	case catalog.KindCommunities:
		return "arrayStringConcat(arrayMap(c -> " + communityText("c") + ", " + k + "), ' ')"
	case catalog.KindLargeCommunities:
		return "arrayStringConcat(arrayMap(c -> " + largeCommunityText("c") + ", " + k + "), ' ')"
	case catalog.KindMAC:
		return "lower(MACNumToString(" + k + "))"
	case catalog.KindProtocol:
		return fmt.Sprintf("if(%[1]s < 256, dictGetOrDefault(%[2]s, 'name', toUInt8(%[1]s), toString(%[1]s)), toString(%[1]s))",
			k, chsql.String(e.cat.Database+".protocols"))
	case catalog.KindEType:
		return fmt.Sprintf("multiIf(%[1]s = 2048, 'IPv4', %[1]s = 34525, 'IPv6', toString(%[1]s))", k)
	case catalog.KindString:
		if col.FixedSize > 0 {
			return "replaceAll(toString(" + k + "), " + chsql.String("\x00") + ", '')"
		}
	}
	return "toString(" + k + ")"
}

func suffix(bits, all int) string {
	if bits >= all {
		return ""
	}
	return "/" + strconv.Itoa(bits)
}

// communityText is a community as ASN:value.
func communityText(c string) string {
	return fmt.Sprintf("concat(toString(bitShiftRight(%[1]s, 16)), ':', toString(bitAnd(%[1]s, 65535)))", c)
}

// largeCommunityText is a large community (12 bytes, big-endian) as ASN:data1:data2.
func largeCommunityText(c string) string {
	part := func(i int) string {
		return fmt.Sprintf("toString(reinterpretAsUInt32(reverse(substring(%s, %d, 4))))", c, 1+4*i)
	}
	return "concat(" + part(0) + ", ':', " + part(1) + ", ':', " + part(2) + ")"
}

// value is how the flows route and the last flow show a column: numbers as numbers, times as
// Unix seconds (the service formats them), addresses, MAC addresses and communities as text,
// arrays as arrays.
func (e exprs) value(col *catalog.Column) string {
	x := col.Name
	switch col.Kind {
	case catalog.KindAddress:
		return addressText(x)
	case catalog.KindMAC:
		return "lower(MACNumToString(" + x + "))"
	case catalog.KindTime:
		return "toUnixTimestamp(" + x + ")"
	case catalog.KindEnum:
		return "toString(" + x + ")"
	case catalog.KindCommunities:
		return "arrayMap(c -> " + communityText("c") + ", " + x + ")"
	case catalog.KindLargeCommunities:
		return "arrayMap(c -> " + largeCommunityText("c") + ", " + x + ")"
	case catalog.KindArray:
		if col.Elem == catalog.KindAddress {
			return "arrayMap(x -> " + addressText("x") + ", " + x + ")"
		}
	case catalog.KindString:
		if col.FixedSize > 0 {
			return "replaceAll(toString(" + x + "), " + chsql.String("\x00") + ", '')"
		}
	}
	return x
}

// tuple is a list of expressions as one: (a, b), or a alone.
func tuple(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return "(" + strings.Join(items, ", ") + ")"
}

// others is the dimensions of the Other row: ['Other', ...].
func others(n int) string {
	if n == 0 {
		return "emptyArrayString()"
	}
	return "[" + strings.TrimSuffix(strings.Repeat("'Other', ", n), ", ") + "]"
}

// quoteTable is a table qualified with the database, quoted.
func quoteTable(cat *catalog.Catalog, t catalog.Table) string {
	return chsql.Table(cat.Database, t.Name)
}
