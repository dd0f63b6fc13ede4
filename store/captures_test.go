//go:build chdb

package store

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"flowzero/schema"
	"flowzero/store/chdb"
)

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

// TestCaptureFlowsThroughSink stores every flow the decoders produce from the real captures,
// with every column enabled, and reads each one back from the engine: the rows are exactly
// the decoded messages (checkStoredFlows), and the aggregated tables sum to them for every
// dimension, with flows_1m pre-aggregated by the sink and then fed by its view.
func TestCaptureFlowsThroughSink(t *testing.T) {
	s := allColumnsSchema(t)
	msgs := captureMessages(t, s)
	if len(msgs) < 100 {
		t.Fatalf("only %d flows decoded from the captures", len(msgs))
	}
	sink := storeCaptureFlows(t, s, msgs, true)
	if _, ok := sink.DDL().PreAggregated(); !ok || sink.agg == nil {
		t.Fatal("every column enabled: the sink does not pre-aggregate")
	}
	// The aggregated tables sum to the flows, for every dimension.
	checkAggregates(t, sink.Conn(), sink.DDL())
	checkStoredFlows(t, sink.Conn(), s, msgs)
	t.Logf("%d flows from the captures stored and read back", len(msgs))

	// The same flows with the view grouping flows_1m (embedded.pre-aggregate off).
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	sink = storeCaptureFlows(t, s, msgs, false)
	if sink.agg != nil {
		t.Fatal("pre-aggregate off: the sink pre-aggregates")
	}
	checkAggregates(t, sink.Conn(), sink.DDL())
}

// checkStoredFlows checks that the flows table holds exactly the messages msgs (length-
// delimited, of schema s): one row per message, whose every scalar and integer-array column
// on the wire reads back as the decoded value (or the column's default when absent).
func checkStoredFlows(t *testing.T, conn *chdb.Conn, s *schema.Schema, msgs [][]byte) {
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

	got := strings.Split(query(t, conn, "SELECT "+strings.Join(exprs, ", ")+" FROM flowzero.flows"), "\n")
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

// storeCaptureFlows stores msgs through a new sink, pre-aggregating or not, and flushes it.
func storeCaptureFlows(t *testing.T, s *schema.Schema, msgs [][]byte, preAggregate bool) *Sink {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 256 << 10
	cfg.Embedded.PreAggregate = preAggregate
	sink := startSink(t, cfg, s)
	for _, m := range msgs {
		sink.Write(m)
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	return sink
}
