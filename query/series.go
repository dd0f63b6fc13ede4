package query

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"flowzero/query/catalog"
)

// axis is one set of series of a query: 1 the direct direction, 2 the reverse one
// (bidirectional), 3 the previous period, 4 the previous period reversed.
type axis struct {
	id      int
	w       window
	reverse bool
}

// seriesQuery is the SQL of the line and table queries: for each axis, bucket and row
// (dimension values, or Other), the unit's value; with totals, the bytes, packets and
// flows too.
type seriesQuery struct {
	cat    *catalog.Catalog
	c      common
	e      exprs
	axes   []axis
	totals bool
	// rows is what the rows CTE reads when it ranks by an additive unit's sum: the direct
	// axis's range split over the tables (split); nil: the direct axis's window.
	rows []part
}

// splitRows tells whether the rows CTE may read a split range: a ranking by the sum of an
// additive unit, which the buckets of any table add up to.
func (q *seriesQuery) splitRows() bool {
	return q.c.topBy == TopByAvg && additive(q.c.units)
}

// dims returns the dimensions of an axis (those of the other direction when reversed).
func (q *seriesQuery) dims(a axis) []*catalog.Column {
	if !a.reverse {
		return q.c.dims
	}
	out := make([]*catalog.Column, len(q.c.dims))
	for i, d := range q.c.dims {
		out[i] = q.cat.ReverseOf(d)
	}
	return out
}

func (q *seriesQuery) unit(a axis) Unit {
	if a.reverse {
		return reverseUnit(q.c.units)
	}
	return q.c.units
}

// rowsCTE selects the rows shown: the limit's first dimension values of the direct axis,
// ranked by topBy.
func (q *seriesQuery) rowsCTE() string {
	a := q.axes[0]
	var keys, names []string
	for i, d := range q.c.dims {
		keys = append(keys, fmt.Sprintf("%s AS r%d", q.e.key(d), i+1))
		names = append(names, fmt.Sprintf("r%d", i+1))
	}
	group := strings.Join(names, ", ")
	if q.rows != nil && q.splitRows() {
		return fmt.Sprintf("SELECT %s\nFROM (\n%s\n)\nGROUP BY %s\nORDER BY sum(v) DESC, %s\nLIMIT %d",
			group, q.splitSQL(q.rows, strings.Join(keys, ", "), group, q.c.filter.SQL(false), q.c.units), group, group, q.c.limit)
	}
	w := where(a.w.start, a.w.end(), q.c.filter.SQL(false))
	from := quoteTable(q.cat, a.w.table)
	unit := unitExpr(q.c.units, a.w.table)
	if q.splitRows() {
		return fmt.Sprintf("SELECT %s\nFROM %s\nWHERE %s\nGROUP BY %s\nORDER BY %s DESC, %s\nLIMIT %d",
			strings.Join(keys, ", "), from, w, group, unit, group, q.c.limit)
	}
	var measure string
	switch q.c.topBy {
	case TopByAvg:
		measure = "sum(v)"
	case TopByMax:
		measure = "max(v)"
	case TopByLast:
		measure = fmt.Sprintf("sumIf(v, b = %d)", a.w.n-1)
	case TopByP95:
		measure = fmt.Sprintf("arrayReduce('quantileExactInclusive(0.95)', arrayResize(groupArray(v), %d))", a.w.n)
	}
	return fmt.Sprintf("SELECT %s\nFROM (\n  SELECT %s, %s AS b, %s AS v\n  FROM %s\n  WHERE %s\n  GROUP BY %s, b\n)\nGROUP BY %s\nORDER BY %s DESC, %s\nLIMIT %d",
		group, strings.Join(keys, ", "), bucket(a.w.start, a.w.interval), unit, from, w, group, group, measure, group, q.c.limit)
}

// axisSQL is the SELECT of one axis. For an additive unit, the table's rows are grouped by
// bucket and raw dimension values first, and the fold into Other and the values shown
// (dictionary lookups, address text) apply to those groups only.
func (q *seriesQuery) axisSQL(a axis) string {
	if additive(q.unit(a)) {
		return q.axisSQLGrouped(a)
	}
	dims := "emptyArrayString()"
	if len(q.c.dims) > 0 && a.id <= 2 {
		var keys, shown, names []string
		for i, d := range q.dims(a) {
			k := q.e.key(d)
			keys = append(keys, k)
			shown = append(shown, q.e.display(d, k))
			names = append(names, fmt.Sprintf("r%d", i+1))
		}
		dims = fmt.Sprintf("if(%s IN (SELECT %s FROM rows), [%s], %s)",
			tuple(keys), strings.Join(names, ", "), strings.Join(shown, ", "), others(len(keys)))
	}
	cols := fmt.Sprintf("%d AS axis, %s AS b, %s AS dims, %s AS v", a.id, bucket(a.w.start, a.w.interval), dims, unitExpr(q.unit(a), a.w.table))
	if q.totals {
		flows := "NULL"
		if a.w.table.FlowCount {
			flows = unitExpr(UnitFps, a.w.table)
		}
		cols += fmt.Sprintf(", sum(Bytes * SamplingRate) AS bytes, sum(Packets * SamplingRate) AS packets, %s AS flows", flows)
	}
	return fmt.Sprintf("SELECT %s\nFROM %s\nWHERE %s\nGROUP BY b, dims",
		cols, quoteTable(q.cat, a.w.table), where(a.w.start, a.w.end(), q.c.filter.SQL(a.reverse)))
}

// axisSQLGrouped is axisSQL in two steps: group by raw values (k1, k2, ...), then fold.
func (q *seriesQuery) axisSQLGrouped(a axis) string {
	inner := []string{bucket(a.w.start, a.w.interval) + " AS b"}
	group := []string{"b"}
	dims := "emptyArrayString()"
	if len(q.c.dims) > 0 && a.id <= 2 {
		var keys, shown, names []string
		for i, d := range q.dims(a) {
			k := fmt.Sprintf("k%d", i+1)
			inner = append(inner, q.e.key(d)+" AS "+k)
			group = append(group, k)
			keys = append(keys, k)
			// The value shown, from the group's key: the column renamed to it.
			col := *d
			col.Name = k
			shown = append(shown, q.e.display(&col, k))
			names = append(names, fmt.Sprintf("r%d", i+1))
		}
		dims = fmt.Sprintf("if(%s IN (SELECT %s FROM rows), [%s], %s)",
			tuple(keys), strings.Join(names, ", "), strings.Join(shown, ", "), others(len(keys)))
		if q.ranked() {
			dims = fmt.Sprintf("if(rk <= %d, [%s], %s)", q.c.limit, strings.Join(shown, ", "), others(len(keys)))
		}
	}
	inner = append(inner, unitExpr(q.unit(a), a.w.table)+" AS sv")
	vals := []string{"b", "sv"}
	outer := fmt.Sprintf("%d AS axis, b, %s AS dims, sum(sv) AS v", a.id, dims)
	if q.totals {
		inner = append(inner, "sum(Bytes * SamplingRate) AS sbytes", "sum(Packets * SamplingRate) AS spackets")
		vals = append(vals, "sbytes", "spackets")
		flows := "NULL"
		if a.w.table.FlowCount {
			inner = append(inner, unitExpr(UnitFps, a.w.table)+" AS sflows")
			vals = append(vals, "sflows")
			flows = "sum(sflows)"
		}
		outer += fmt.Sprintf(", sum(sbytes) AS bytes, sum(spackets) AS packets, %s AS flows", flows)
	}
	from := fmt.Sprintf("(\n  SELECT %s\n  FROM %s\n  WHERE %s\n  GROUP BY %s\n)",
		strings.Join(inner, ", "), quoteTable(q.cat, a.w.table), where(a.w.start, a.w.end(), q.c.filter.SQL(a.reverse)),
		strings.Join(group, ", "))
	if q.ranked() && a.id == 1 {
		// Each row's groups gathered with its sum over the range, ranked (a window over the
		// rows, not over every group), then spread back.
		keys := strings.Join(group[1:], ", ")
		var spread []string
		for i, v := range vals {
			spread = append(spread, fmt.Sprintf("p.%d AS %s", i+1, v))
		}
		from = fmt.Sprintf("(\n SELECT %[1]s, rk, %[2]s\n FROM (\n  SELECT %[1]s, pts, row_number() OVER (ORDER BY rsum DESC, %[1]s) AS rk\n"+
			"  FROM (\n   SELECT %[1]s, groupArray((%[3]s)) AS pts, sum(sv) AS rsum\n   FROM %[4]s\n   GROUP BY %[1]s\n  )\n )\n ARRAY JOIN pts AS p\n)",
			keys, strings.Join(spread, ", "), strings.Join(vals, ", "), from)
	}
	return fmt.Sprintf("SELECT %s\nFROM %s\nGROUP BY b, dims", outer, from)
}

// ranked tells whether the direct axis ranks its rows itself in one read of the table
// (a window function over its rows' sums) rather than through the rows CTE: for the ranking
// by an additive unit's sum, without a reverse axis (which needs the direct axis's rows).
func (q *seriesQuery) ranked() bool {
	if len(q.c.dims) == 0 || q.c.topBy != TopByAvg || !additive(q.c.units) {
		return false
	}
	for _, a := range q.axes {
		if a.id == 2 {
			return false
		}
	}
	return true
}

// splitSQL is the rows of parts grouped by group (the keys cols names), with the unit's
// value as v: one sub-select per part, each on its own table and range, joined by UNION
// ALL.
func (q *seriesQuery) splitSQL(parts []part, cols, group, filterSQL string, u Unit) string {
	var subs []string
	for _, p := range parts {
		subs = append(subs, fmt.Sprintf("  SELECT %s, %s AS v\n  FROM %s\n  WHERE %s\n  GROUP BY %s",
			cols, unitExpr(u, p.table), quoteTable(q.cat, p.table), where(p.start, p.end, filterSQL), group))
	}
	return strings.Join(subs, "\n  UNION ALL\n")
}

// tables names the tables the query reads: the axes' and the rows CTE's, each once.
func (q *seriesQuery) tables() []string {
	var names []string
	for _, a := range q.axes {
		if !slices.Contains(names, a.w.table.Name) {
			names = append(names, a.w.table.Name)
		}
	}
	for _, n := range partTables(q.rows) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

func (q *seriesQuery) sql() string {
	var b strings.Builder
	if len(q.c.dims) > 0 && !q.ranked() {
		b.WriteString("WITH rows AS (\n" + q.rowsCTE() + "\n)\n")
	}
	b.WriteString("SELECT * FROM (\n")
	for i, a := range q.axes {
		if i > 0 {
			b.WriteString("\nUNION ALL\n")
		}
		b.WriteString(q.axisSQL(a))
	}
	b.WriteString("\n)")
	return b.String()
}

// series is one row of a result: its dimension values and its value per bucket.
type series struct {
	axis   int
	dims   []string
	values []float64 // per bucket, in the unit's sum (divide by the interval for a rate)
	// bytes, packets and flows over the range (totals only; flows -1 when not counted).
	bytes, packets uint64
	flows          int64
	// rank is what topBy ranks the series by.
	rank float64
}

func (s *series) other() bool { return len(s.dims) > 0 && s.dims[0] == "Other" }

// readSeries gathers the engine's rows into series, in the order of the axes and, in each,
// by the rank topBy gives (Other last); the reverse axis follows the direct one's order.
func readSeries(res *result, n int, topBy TopBy, totals bool) []*series {
	byKey := map[string]*series{}
	var all []*series
	for _, row := range res.Data {
		ax := int(cellInt(row[0]))
		b := int(cellInt(row[1]))
		dims := cellStrings(row[2])
		key := fmt.Sprintf("%d\x00%s", ax, strings.Join(dims, "\x00"))
		s := byKey[key]
		if s == nil {
			s = &series{axis: ax, dims: dims, values: make([]float64, n)}
			byKey[key] = s
			all = append(all, s)
		}
		if b >= 0 && b < n {
			s.values[b] += cellFloat(row[3])
		}
		if totals {
			s.bytes += cellUint(row[4])
			s.packets += cellUint(row[5])
			if row[6] == nil {
				s.flows = -1
			} else if s.flows >= 0 {
				s.flows += cellInt(row[6])
			}
		}
	}
	for _, s := range all {
		s.rank = measure(s.values, topBy)
	}
	direct := map[string]int{}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.axis != b.axis {
			return a.axis < b.axis
		}
		if a.other() != b.other() {
			return b.other()
		}
		if a.rank != b.rank {
			return a.rank > b.rank
		}
		return slices.Compare(a.dims, b.dims) < 0
	})
	for i, s := range all {
		if s.axis == 1 {
			direct[strings.Join(s.dims, "\x00")] = i
		}
	}
	// The reverse axis in the order of the direct one, so that a row and its reverse pair.
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.axis != b.axis || a.axis != 2 {
			return false
		}
		ia, oka := direct[strings.Join(a.dims, "\x00")]
		ib, okb := direct[strings.Join(b.dims, "\x00")]
		return oka && (!okb || ia < ib)
	})
	return all
}

// measure is what topBy ranks a series by.
func measure(values []float64, topBy TopBy) float64 {
	st := statsOf(values)
	switch topBy {
	case TopByMax:
		return st.max
	case TopByLast:
		return st.last
	case TopByP95:
		return st.p95
	}
	return st.sum
}

// stats are the statistics of a series' values.
type stats struct {
	min, max, avg, p95, last, sum float64
}

// statsOf computes them: min ignores empty buckets (it is 0 only when all are), avg is over
// every bucket, p95 interpolates linearly between the two nearest ranks (as ClickHouse's
// quantileExactInclusive), last is the last bucket.
func statsOf(values []float64) stats {
	var st stats
	n := len(values)
	if n == 0 {
		return st
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	for _, v := range sorted {
		st.sum += v
		if st.min == 0 && v > 0 {
			st.min = v
		}
	}
	st.max = sorted[n-1]
	st.avg = st.sum / float64(n)
	st.last = values[n-1]
	pos := 0.95 * float64(n-1)
	i := int(math.Floor(pos))
	st.p95 = sorted[i]
	if i+1 < n {
		st.p95 += (pos - float64(i)) * (sorted[i+1] - sorted[i])
	}
	return st
}

// times returns the start of each bucket.
func times(w window) []time.Time {
	out := make([]time.Time, w.n)
	for i := range out {
		out[i] = w.start.Add(time.Duration(i) * w.interval)
	}
	return out
}
