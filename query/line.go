package query

import (
	"context"
	"time"
)

// LineRequest is a time series query (POST /api/v0/query/line).
type LineRequest struct {
	Common
	// Points is about how many points the series have (MinPoints..MaxPoints; 0: the
	// configuration's).
	Points int `json:"points"`
	// Bidirectional adds the series of the other direction (axis 2): Src and Dst, In and
	// Out swapped in the dimensions and the filter, for the same rows.
	Bidirectional bool `json:"bidirectional"`
	// PreviousPeriod adds the total of the period before (axis 3, and 4 reversed), shifted
	// onto the same times.
	PreviousPeriod bool `json:"previousPeriod"`
}

// LineResult is a time series answer.
type LineResult struct {
	// Table is the table of the direct axis, Tables every table read (those of the rows
	// ranked first, the previous period's), Interval the seconds between points.
	Table    string   `json:"table"`
	Tables   []string `json:"tables"`
	Interval int64    `json:"interval"`
	SQL      string   `json:"sql"`
	// Time holds the start of each point.
	Time []time.Time `json:"t"`
	// Rows are the dimension values of each series (["Other", ...] for the fold, [] for a
	// total); Axis the axis of each.
	Rows [][]string `json:"rows"`
	Axis []int      `json:"axis"`
	// Points are each series' values at each time, in the unit asked.
	Points [][]float64 `json:"points"`
	// Statistics of each series over the range, in the unit asked; Total is the bytes (bit
	// units), packets or flows over the range, or the average for % units.
	Min   []float64 `json:"min"`
	Max   []float64 `json:"max"`
	Avg   []float64 `json:"avg"`
	P95   []float64 `json:"p95"`
	Last  []float64 `json:"last"`
	Total []float64 `json:"total"`
	// AxisNames names the axes present.
	AxisNames map[int]string `json:"axisNames"`
}

// Line runs a time series query.
func (s *Service) Line(ctx context.Context, req LineRequest) (*LineResult, error) {
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
	if points < MinPoints || points > MaxPoints {
		return nil, fieldError("points", "must be in %d..%d, not %d", MinPoints, MaxPoints, req.Points)
	}
	flowsOnly := c.needsFlowsTable(cat, req.Bidirectional)
	needCount := c.units == UnitFps
	w := choose(cat, st.oldestFor(needCount), c.start, c.end, points, flowsOnly, needCount)
	axes := []axis{{id: 1, w: w}}
	names := map[int]string{1: "Direct"}
	if req.Bidirectional {
		axes = append(axes, axis{id: 2, w: w, reverse: true})
		names[2] = "Reverse"
	}
	if req.PreviousPeriod {
		shift, name := previousPeriod(w.start, w.end())
		pw := previousWindow(cat, st.oldestFor(needCount), w, shift, flowsOnly, needCount)
		axes = append(axes, axis{id: 3, w: pw})
		names[3] = "Previous " + name
		if req.Bidirectional {
			axes = append(axes, axis{id: 4, w: pw, reverse: true})
			names[4] = "Previous " + name + ", reverse"
		}
	}
	q := &seriesQuery{cat: cat, c: c, e: exprs{cat: cat, t4: c.t4, t6: c.t6}, axes: axes}
	if len(c.dims) > 0 && q.splitRows() && !q.ranked() {
		// The rows ranked apart (for the reverse axis): over the window split across the
		// tables.
		q.rows = split(cat, st.oldestFor(needCount), w.start, w.end(), flowsOnly, needCount)
	}
	sql := q.sql()
	res, err := s.run(ctx, sql, 4, 0)
	if err != nil {
		return nil, err
	}
	out := &LineResult{Table: w.table.Name, Tables: q.tables(), Interval: int64(w.interval / time.Second), SQL: sql, Time: times(w), AxisNames: map[int]string{}}
	seconds := w.interval.Seconds()
	for _, sr := range readSeries(res, w.n, c.topBy, false) {
		st := statsOf(sr.values)
		pts := make([]float64, len(sr.values))
		for i, v := range sr.values {
			pts[i] = v / seconds
		}
		out.Rows = append(out.Rows, sr.dims)
		out.Axis = append(out.Axis, sr.axis)
		out.Points = append(out.Points, pts)
		out.Min = append(out.Min, st.min/seconds)
		out.Max = append(out.Max, st.max/seconds)
		out.Avg = append(out.Avg, st.avg/seconds)
		out.P95 = append(out.P95, st.p95/seconds)
		out.Last = append(out.Last, st.last/seconds)
		total := totalOf(c.units, st.sum)
		if !additive(c.units) {
			total = st.avg / seconds
		}
		out.Total = append(out.Total, total)
		out.AxisNames[sr.axis] = names[sr.axis]
	}
	if out.Rows == nil {
		out.Rows, out.Axis, out.Points = [][]string{}, []int{}, [][]float64{}
		out.Min, out.Max, out.Avg, out.P95, out.Last, out.Total = []float64{}, []float64{}, []float64{}, []float64{}, []float64{}, []float64{}
	}
	return out, nil
}
