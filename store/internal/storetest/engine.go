package storetest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/engine"
)

// The engine holds one data directory per process: tests using it never run in parallel and
// close what they open.

// OpenEngine opens the embedded engine on path (created if needed) with two threads per
// query, without creating anything in it. The connection is closed at the end of the test if
// it was not before, so that a failed test leaves the engine free for the next one.
func OpenEngine(t testing.TB, path string) *chdb.Conn {
	t.Helper()
	c, err := chdb.Open(path, append(engine.Args(), "--max_threads=2")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Query runs sql and returns its TSVRaw output without the last newline.
func Query(t testing.TB, c *chdb.Conn, sql string) string {
	t.Helper()
	out, err := c.Query(sql, "TSVRaw")
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.TrimRight(string(out), "\n")
}

// EngineNow returns the engine's clock as a Unix time. The engine reads the time through its
// own clock_gettime, which neither Go's test clock nor faketime moves: the tests whose
// outcome depends on the engine's idea of now (TTL) take it from there.
func EngineNow(t testing.TB, c *chdb.Conn) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(Query(t, c, "SELECT toUnixTimestamp(now())"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// EngineEvent returns the engine's counter of event (system.events), 0 before it happens.
func EngineEvent(t testing.TB, c *chdb.Conn, event string) int {
	t.Helper()
	n, err := strconv.Atoi(Query(t, c, "SELECT sum(value) FROM system.events WHERE event = '"+event+"'"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// chValue formats a decoded value as ClickHouse prints the column in TSVRaw.
func chValue(c *schema.Column, v any) string {
	switch x := v.(type) {
	case netip.Addr:
		if x.Is4() {
			return "::ffff:" + x.String()
		}
		return x.String()
	case uint64:
		if c.Kind == schema.KindEnum {
			return c.EnumName(x)
		}
		return fmt.Sprint(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// CheckStoredFlows checks that flowzero.flows holds exactly the messages msgs (length-
// delimited, of schema s): one row per message, whose every scalar and integer-array column
// on the wire reads back as the decoded value (or the column's default when absent).
func CheckStoredFlows(t testing.TB, conn *chdb.Conn, s *schema.Schema, msgs [][]byte) {
	t.Helper()
	// The columns compared, and the expression reading each back.
	var cols []*schema.Column
	var exprs []string
	for _, c := range s.WireColumns() {
		switch {
		case c.Kind == schema.KindArrayLargeCommunity || c.Kind == schema.KindBytes:
			continue
		case c.ClickHouseType == "DateTime":
			exprs = append(exprs, "toUnixTimestamp("+c.Name+")")
		case strings.HasPrefix(c.ClickHouseType, "FixedString"):
			exprs = append(exprs, "trimRight(toString("+c.Name+"), '\\0')")
		case c.Kind == schema.KindArrayIP:
			exprs = append(exprs, "arrayStringConcat(arrayMap(a -> toString(a), "+c.Name+"), ',')")
		case c.Kind == schema.KindArrayUint32 || c.Kind == schema.KindArrayUint64:
			exprs = append(exprs, "arrayStringConcat("+c.Name+", ',')")
		default:
			exprs = append(exprs, c.Name)
		}
		cols = append(cols, c)
	}
	want := make([]string, 0, len(msgs))
	for _, framed := range msgs {
		n, w := binary.Uvarint(framed)
		vals := map[string][]string{}
		if err := s.DecodeMessage(framed[w:w+int(n)], func(c *schema.Column, v any) {
			vals[c.Name] = append(vals[c.Name], chValue(c, v))
		}); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, c := range cols {
			v, ok := vals[c.Name]
			switch {
			case ok:
				row[i] = strings.Join(v, ",")
			case c.Kind == schema.KindIP:
				row[i] = "::"
			case c.Kind == schema.KindEnum:
				row[i] = c.EnumName(0)
			case c.Kind == schema.KindString || c.Kind.Repeated():
				row[i] = ""
			default:
				row[i] = "0"
			}
		}
		want = append(want, strings.Join(row, "\t"))
	}

	got := strings.Split(Query(t, conn, "SELECT "+strings.Join(exprs, ", ")+" FROM flowzero.flows"), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if len(got) != len(want) {
		t.Fatalf("%d rows stored, %d flows sent", len(got), len(want))
	}
	bad := 0
	for i := range want {
		if got[i] != want[i] && bad < 3 {
			bad++
			g, w := strings.Split(got[i], "\t"), strings.Split(want[i], "\t")
			for j := range w {
				if j < len(g) && g[j] != w[j] {
					t.Errorf("row %d column %s: stored %q, sent %q", i, cols[j].Name, g[j], w[j])
				}
			}
		}
	}
}

// Aggregated is an aggregated table and its time bucket.
type Aggregated struct {
	Table    string
	Interval time.Duration
}

// CheckAggregates checks that every aggregated table of flowzero holds exactly the flows
// table's bytes, packets and flows per time bucket and per value of every dimension (dims, the
// aggregated tables' dimension columns), with and without FINAL (merged).
func CheckAggregates(t testing.TB, c *chdb.Conn, dims []string, tables []Aggregated) {
	t.Helper()
	dims = slices.DeleteFunc(slices.Clone(dims), func(d string) bool { return d == "TimeReceived" })
	list := strings.Join(dims, ", ")
	for _, a := range tables {
		sec := fmt.Sprint(int64(a.Interval / time.Second))
		for _, final := range []string{"", " FINAL"} {
			// Every group counts at least one flow: SummingMergeTree, which drops the rows
			// whose sums are all 0 when it merges them, keeps them all.
			want := Query(t, c, "SELECT toStartOfInterval(TimeReceived, toIntervalSecond("+sec+")) AS t, "+list+", sum(Bytes), sum(Packets), count() FROM flowzero.flows GROUP BY ALL ORDER BY ALL")
			if want == "" {
				t.Fatal("no flows")
			}
			got := Query(t, c, "SELECT TimeReceived AS t, "+list+", sum(Bytes), sum(Packets), sum(Flows) FROM flowzero."+a.Table+final+" GROUP BY ALL ORDER BY ALL")
			if got != want {
				g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
				i := 0
				for i < len(g) && i < len(w) && g[i] == w[i] {
					i++
				}
				t.Errorf("%s%s does not sum to the flows table (%d rows, want %d); first difference at row %d:\n%s\nwant\n%s",
					a.Table, final, len(g), len(w), i, g[min(i, len(g)-1)], w[min(i, len(w)-1)])
			}
		}
	}
}
