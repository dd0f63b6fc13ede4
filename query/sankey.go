package query

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// SankeyPoints is the number of points the table choice of a Sankey query aims at: it has
// no time axis, so a coarse table serves it.
const SankeyPoints = 20

// SankeyRequest is a Sankey diagram query (POST /api/v0/query/sankey): 2 to 4 dimensions.
type SankeyRequest struct {
	Common
}

// SankeyResult is its answer: each row's dimension values and value (the average over the
// range in the unit asked), and the diagram's nodes and links.
type SankeyResult struct {
	// Table is the coarsest table read, Tables every table read (a range split over
	// them).
	Table  string       `json:"table"`
	Tables []string     `json:"tables"`
	SQL    string       `json:"sql"`
	Rows   [][]string   `json:"rows"`
	Values []float64    `json:"values"`
	Nodes  []string     `json:"nodes"`
	Links  []SankeyLink `json:"links"`
}

// SankeyLink joins two nodes, "Dimension: value" each.
type SankeyLink struct {
	Source string  `json:"source"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
}

// Sankey runs a Sankey query. Each dimension's values outside the rows selected (by the
// limit and topBy, on the combinations of all dimensions) become Other.
func (s *Service) Sankey(ctx context.Context, req SankeyRequest) (*SankeyResult, error) {
	st, err := s.tables(ctx)
	if err != nil {
		return nil, err
	}
	cat := st.catalog
	c, err := req.Common.validate(cat, s.cfg, 2, 4)
	if err != nil {
		return nil, err
	}
	flowsOnly, needCount := c.needsFlowsTable(cat, false), c.units == UnitFps
	w := chooseWhole(cat, st.oldestFor(needCount), c.start, c.end, SankeyPoints, flowsOnly, needCount)
	q := &seriesQuery{cat: cat, c: c, e: exprs{cat: cat, t4: c.t4, t6: c.t6}, axes: []axis{{id: 1, w: w}}}
	first, last := w.start, w.end()
	var sql string
	if additive(c.units) {
		// The range split over the tables, grouped by raw values in each part, then over
		// the parts; those groups ranked (row_number) and each dimension's values in the
		// rows kept gathered (a window over every group), in the same read; the fold and
		// the values shown apply to the groups.
		q.rows = split(cat, st.oldestFor(needCount), c.start, c.end, flowsOnly, needCount)
		first, last = q.rows[0].start, q.rows[len(q.rows)-1].end
		var keys, group, sets, dims []string
		for i, d := range c.dims {
			k := fmt.Sprintf("k%d", i+1)
			keys = append(keys, q.e.key(d)+" AS "+k)
			group = append(group, k)
			sets = append(sets, fmt.Sprintf("groupArrayIf(%s, rk <= %d) OVER () AS s%d", k, c.limit, i+1))
			col := *d
			col.Name = k
			dims = append(dims, fmt.Sprintf("if(has(s%d, %s), %s, 'Other')", i+1, k, q.e.display(&col, k)))
		}
		g := strings.Join(group, ", ")
		sql = fmt.Sprintf("SELECT [%s] AS dims, sum(v) AS v\nFROM (\n SELECT %s, v, %s\n FROM (\n  SELECT %s, v, row_number() OVER (ORDER BY v DESC, %s) AS rk\n"+
			"  FROM (\n   SELECT %s, sum(v) AS v\n   FROM (\n%s\n   )\n   GROUP BY %s\n  )\n )\n)\nGROUP BY dims",
			strings.Join(dims, ", "), g, strings.Join(sets, ", "), g, g, g,
			q.splitSQL(q.rows, strings.Join(keys, ", "), g, c.filter.SQL(false), c.units), g)
	} else {
		var dims []string
		for i, d := range c.dims {
			k := q.e.key(d)
			dims = append(dims, fmt.Sprintf("if(%s IN (SELECT r%d FROM rows), %s, 'Other')", k, i+1, q.e.display(d, k)))
		}
		sql = fmt.Sprintf("WITH rows AS (\n%s\n)\nSELECT [%s] AS dims, %s AS v\nFROM %s\nWHERE %s\nGROUP BY dims",
			q.rowsCTE(), strings.Join(dims, ", "), unitExpr(c.units, w.table), quoteTable(cat, w.table),
			where(w.start, w.end(), c.filter.SQL(false)))
	}
	res, err := s.run(ctx, sql, 2, 0)
	if err != nil {
		return nil, err
	}
	seconds := last.Sub(first).Seconds()
	tables := q.tables()
	if q.rows != nil {
		tables = partTables(q.rows)
	}
	out := &SankeyResult{Table: tables[0], Tables: tables, SQL: sql, Rows: [][]string{}, Values: []float64{}, Nodes: []string{}, Links: []SankeyLink{}}
	type row struct {
		dims []string
		v    float64
	}
	var rows []row
	for _, r := range res.Data {
		rows = append(rows, row{cellStrings(r[0]), cellFloat(r[1]) / seconds})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].v != rows[j].v {
			return rows[i].v > rows[j].v
		}
		return slices.Compare(rows[i].dims, rows[j].dims) < 0
	})
	nodes := map[string]bool{}
	links := map[[2]string]int{}
	for _, r := range rows {
		out.Rows = append(out.Rows, r.dims)
		out.Values = append(out.Values, r.v)
		for i := range r.dims {
			node := c.dims[i].Name + ": " + r.dims[i]
			if !nodes[node] {
				nodes[node] = true
				out.Nodes = append(out.Nodes, node)
			}
			if i == 0 {
				continue
			}
			from := c.dims[i-1].Name + ": " + r.dims[i-1]
			if j, ok := links[[2]string{from, node}]; ok {
				out.Links[j].Value += r.v
				continue
			}
			links[[2]string{from, node}] = len(out.Links)
			out.Links = append(out.Links, SankeyLink{Source: from, Target: node, Value: r.v})
		}
	}
	sort.SliceStable(out.Links, func(i, j int) bool { return out.Links[i].Value > out.Links[j].Value })
	return out, nil
}
