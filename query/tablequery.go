package query

import (
	"context"
	"time"

	"flowzero/query/catalog"
)

// TableRequest is a query of totals per row (POST /api/v0/query/table).
type TableRequest struct {
	Common
	// Points is how finely the range is cut for min, max, p95 and last (0: the
	// configuration's), as for a time series.
	Points int `json:"points"`
}

// TableResult is its answer.
type TableResult struct {
	// Table is the table read, Tables the same as a list (as for a line or a Sankey).
	Table    string     `json:"table"`
	Tables   []string   `json:"tables"`
	Interval int64      `json:"interval"`
	SQL      string     `json:"sql"`
	Rows     []TableRow `json:"rows"`
}

// TableRow is one row: its dimension values, the sampled totals scaled by the sampling
// rate (Flows is null on an aggregated table that does not count flows), and the
// statistics of its series in the unit asked (Total as for a time series).
type TableRow struct {
	Dimensions []string `json:"dimensions"`
	Bytes      uint64   `json:"bytes"`
	Packets    uint64   `json:"packets"`
	Flows      *int64   `json:"flows"`
	Min        float64  `json:"min"`
	Max        float64  `json:"max"`
	Avg        float64  `json:"avg"`
	P95        float64  `json:"p95"`
	Last       float64  `json:"last"`
	Total      float64  `json:"total"`
}

// Table runs a totals query.
func (s *Service) Table(ctx context.Context, req TableRequest) (*TableResult, error) {
	st, err := s.tables(ctx)
	if err != nil {
		return nil, err
	}
	cat := st.catalog
	c, err := req.Common.validate(cat, s.cfg, 0, MaxDimensions)
	if err != nil {
		return nil, err
	}
	points := req.Points
	if points == 0 {
		points = s.cfg.Points
	}
	if points < 1 || points > MaxPoints {
		return nil, fieldError("points", "must be in 1..%d, not %d", MaxPoints, req.Points)
	}
	w := choose(cat, st.oldestFor(c.units == UnitFps), c.start, c.end, points, c.needsFlowsTable(cat, false), c.units == UnitFps)
	res, err := s.table(ctx, cat, c, w)
	if err == nil && !st.countsFrom(w) {
		// Rows written before the table counted flows would make the count short: no count.
		for i := range res.Rows {
			res.Rows[i].Flows = nil
		}
	}
	return res, err
}

func (s *Service) table(ctx context.Context, cat *catalog.Catalog, c common, w window) (*TableResult, error) {
	q := &seriesQuery{cat: cat, c: c, e: exprs{cat: cat, t4: c.t4, t6: c.t6}, axes: []axis{{id: 1, w: w}}, totals: true}
	sql := q.sql()
	res, err := s.run(ctx, sql, 7, 0)
	if err != nil {
		return nil, err
	}
	out := &TableResult{Table: w.table.Name, Tables: q.tables(), Interval: int64(w.interval / time.Second), SQL: sql, Rows: []TableRow{}}
	seconds := w.interval.Seconds()
	for _, sr := range readSeries(res, w.n, c.topBy, true) {
		st := statsOf(sr.values)
		row := TableRow{Dimensions: sr.dims, Bytes: sr.bytes, Packets: sr.packets,
			Min: st.min / seconds, Max: st.max / seconds, Avg: st.avg / seconds, P95: st.p95 / seconds, Last: st.last / seconds,
			Total: totalOf(c.units, st.sum)}
		if !additive(c.units) {
			row.Total = row.Avg
		}
		if sr.flows >= 0 {
			f := sr.flows
			row.Flows = &f
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}
