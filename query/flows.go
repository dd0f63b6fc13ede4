package query

import (
	"context"
	"fmt"
	"strings"
	"time"

	"flowzero/query/catalog"
	"flowzero/query/filter"
)

// DefaultFlowColumns are the columns of a flows query that does not name its own (the
// enabled ones among them).
var DefaultFlowColumns = []string{"TimeReceived", "ExporterName", "ExporterAddress", "InIfName", "OutIfName",
	"SrcAddr", "DstAddr", "Proto", "SrcPort", "DstPort", "SrcAS", "DstAS", "Bytes", "Packets", "SamplingRate"}

// FlowsRequest asks for the flow records matching a filter (POST /api/v0/query/flows),
// newest first, as nfdump lists them.
type FlowsRequest struct {
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Filter string    `json:"filter"`
	// Limit is the number of records (1..MaxFlowsLimit, 0: 100); Offset skips as many
	// first, for paging with the same Start, End (or Before) and filter.
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
	// Columns are the columns to return (any case), each once; none: DefaultFlowColumns.
	Columns []string `json:"columns"`
	// Before keeps the records strictly older than it, After those strictly newer (the
	// live tail). Flow times are whole seconds.
	Before *time.Time `json:"before,omitempty"`
	After  *time.Time `json:"after,omitempty"`
}

// FlowsResult holds the records: one row per flow, one value per column (numbers as
// numbers, times as RFC 3339, addresses as text, arrays as arrays).
type FlowsResult struct {
	Table   string   `json:"table"`
	SQL     string   `json:"sql"`
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

// Flows lists flow records.
func (s *Service) Flows(ctx context.Context, req FlowsRequest) (*FlowsResult, error) {
	cat := s.Catalog(ctx)
	if err := validTime("start", req.Start); err != nil {
		return nil, err
	}
	if err := validTime("end", req.End); err != nil {
		return nil, err
	}
	if !req.Start.Before(req.End) {
		return nil, fieldError("end", "must be after start")
	}
	limit := req.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > MaxFlowsLimit {
		return nil, fieldError("limit", "must be in 1..%d, not %d", MaxFlowsLimit, req.Limit)
	}
	if req.Offset < 0 || req.Offset > MaxFlowsOffset {
		return nil, fieldError("offset", "must be in 0..%d, not %d", MaxFlowsOffset, req.Offset)
	}
	var cols []*catalog.Column
	if len(req.Columns) == 0 {
		for _, name := range DefaultFlowColumns {
			if c := cat.Column(name); c != nil {
				cols = append(cols, c)
			}
		}
	}
	if n := len(cat.Columns()); len(req.Columns) > n {
		return nil, fieldError("columns", "%d columns, at most %d (each column once)", len(req.Columns), n)
	}
	seen := map[*catalog.Column]int{}
	for i, name := range req.Columns {
		c := cat.Column(name)
		if c == nil {
			return nil, fieldError(fmt.Sprintf("columns[%d]", i), "unknown column %q", name)
		}
		if j, ok := seen[c]; ok {
			return nil, fieldError(fmt.Sprintf("columns[%d]", i), "%s is already columns[%d]", c.Name, j)
		}
		seen[c] = i
		cols = append(cols, c)
	}
	f, err := filter.Parse(cat, req.Filter)
	if err != nil {
		return nil, err
	}
	w := where(req.Start, req.End, f.SQL(false))
	for _, b := range []struct {
		field string
		t     *time.Time
		op    string
	}{{"before", req.Before, "<"}, {"after", req.After, ">"}} {
		if b.t == nil {
			continue
		}
		if err := validTime(b.field, *b.t); err != nil {
			return nil, err
		}
		sec := b.t.Unix()
		if b.op == "<" && b.t.Nanosecond() > 0 {
			sec++ // strictly older than a time within a second: up to that second included
		}
		w += fmt.Sprintf(" AND TimeReceived %s toDateTime(%d)", b.op, sec)
	}
	sql := flowsSQL(cat, cols, w, limit, req.Offset)
	res, err := s.run(ctx, sql, len(cols), 0)
	if err != nil {
		return nil, err
	}
	out := &FlowsResult{Table: cat.Flows.Name, SQL: sql, Rows: [][]any{}}
	for _, c := range cols {
		out.Columns = append(out.Columns, c.Name)
	}
	for _, row := range res.Data {
		out.Rows = append(out.Rows, flowValues(cols, row))
	}
	return out, nil
}

// flowsSQL selects columns of the flows matching where, newest first; rows of the same
// second are ordered by their values, so that pages follow each other.
func flowsSQL(cat *catalog.Catalog, cols []*catalog.Column, where string, limit, offset int) string {
	e := exprs{cat: cat, t4: 32, t6: 128}
	var sel, order []string
	for i, c := range cols {
		sel = append(sel, fmt.Sprintf("%s AS c%d", e.value(c), i))
		order = append(order, fmt.Sprintf("c%d", i))
	}
	// The records listed are among those of the seconds of the offset+limit newest: the
	// subquery finds the oldest of those seconds reading the time and the filter's columns
	// only, so that the values to show and sort by are computed for those seconds alone.
	table := quoteTable(cat, cat.Flows)
	return fmt.Sprintf("SELECT %s\nFROM %s\nWHERE %s\n  AND TimeReceived >= (SELECT min(t) FROM (SELECT TimeReceived AS t FROM %s WHERE %s ORDER BY TimeReceived DESC LIMIT %d))\n"+
		"ORDER BY TimeReceived DESC, %s\nLIMIT %d OFFSET %d",
		strings.Join(sel, ", "), table, where, table, where, limit+offset, strings.Join(order, ", "), limit, offset)
}

// flowValues turns a row of flowsSQL into JSON values.
func flowValues(cols []*catalog.Column, row []any) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		if c.Kind == catalog.KindTime {
			out[i] = time.Unix(cellInt(row[i]), 0).UTC().Format(time.RFC3339)
			continue
		}
		out[i] = row[i]
	}
	return out
}
