package query

import (
	"slices"
	"time"

	"flowzero/query/catalog"
)

// window is where and how a query reads: a table, an interval, and a range of n buckets
// starting at start, aligned on the table's resolution.
type window struct {
	table    catalog.Table
	interval time.Duration
	start    time.Time
	n        int
}

func (w window) end() time.Time { return w.start.Add(time.Duration(w.n) * w.interval) }

// resolution is the time bucket of a table: 1 s for the flows table.
func resolution(t catalog.Table) time.Duration {
	if t.Resolution == 0 {
		return time.Second
	}
	return t.Resolution
}

// alignDown rounds t down to a multiple of d since the Unix epoch.
func alignDown(t time.Time, d time.Duration) time.Time {
	s := int64(d / time.Second)
	u := t.Unix()
	return time.Unix(u-((u%s)+s)%s, 0).UTC()
}

// choose picks the table and interval of a query over [start, end) with about points
// points:
//   - the target interval is (end − start) / points, at least 1 s;
//   - the candidates are the aggregated tables (those counting flows when needCount) and
//     the flows table, or the flows table alone when flowsOnly;
//   - a candidate reaches back when its oldest row is at most one target interval after
//     start (or after the data begins, when start is older than all data: a collector
//     started an hour ago still gets its 24 h graph from the right table), and comes
//     before the end of its window, which holds whole intervals only (a collector started
//     a minute ago has all its data in the 5-minute table's last bucket, still open);
//   - among those, the coarsest whose resolution is at most the target (an aggregated
//     table's up to 5/4 of it: 4/5 of the points asked, 7 days of 200 points from
//     flows_1h), or the finest aggregated one whose resolution is at most coarsen times
//     the target, or the finest;
//   - the interval is the target rounded down to a multiple of the table's resolution, at
//     least the resolution; the range starts at start rounded down to the resolution and
//     holds whole intervals (at least one).
func choose(cat *catalog.Catalog, oldest map[string]time.Time, start, end time.Time, points int, flowsOnly, needCount bool) window {
	target := max((end.Sub(start) / time.Duration(points)).Truncate(time.Second), time.Second)
	candidates := []catalog.Table{cat.Flows}
	if !flowsOnly {
		for _, t := range cat.Aggregated {
			if t.FlowCount || !needCount {
				candidates = append(candidates, t)
			}
		}
	}
	slices.SortStableFunc(candidates, func(a, b catalog.Table) int { return int(resolution(a) - resolution(b)) })
	from := start
	// earliest is when the data begins at the latest: an aggregated table's oldest row is
	// the start of its bucket, and its first flow may come up to a resolution later (an
	// hour's table started at 13:00 for a collector started at 13:48).
	var earliest time.Time
	for _, t := range candidates {
		if o, ok := oldest[t.Name]; ok && (earliest.IsZero() || o.Add(resolution(t)).Before(earliest)) {
			earliest = o.Add(resolution(t))
		}
	}
	if earliest.After(from) {
		from = earliest
	}
	var reaching []catalog.Table
	for _, t := range candidates {
		o, ok := oldest[t.Name]
		if earliest.IsZero() || (ok && !o.After(from.Add(target)) && o.Before(windowOn(t, start, end, target).end())) {
			reaching = append(reaching, t)
		}
	}
	if len(reaching) == 0 {
		reaching = candidates[:1]
	}
	chosen := reaching[0]
	for _, t := range reaching {
		if resolution(t) <= target || (t.Resolution != 0 && 4*t.Resolution <= 5*target) {
			chosen = t
		}
	}
	if chosen.Resolution == 0 && !earliest.IsZero() {
		// Fewer points from an aggregated table rather than the flows table, when its
		// resolution is at most coarsen times the target. Not without the tables' oldest
		// rows (no data yet, or a state read before any): the flows table is the first to
		// have a collector's flows.
		for _, t := range reaching {
			if t.Resolution != 0 && t.Resolution <= coarsen*target {
				chosen = t
				break
			}
		}
	}
	return windowOn(chosen, start, end, target)
}

// coarsen is how much coarser than the target interval an aggregated table may be for a
// graph to take it over the flows table (1 h at 200 points: 60 points from flows_1m).
const coarsen = 4

// chooseWhole picks the table of a query without a time axis (Sankey) over
// [start, end): the coarsest candidate whose resolution divides both edges (so its
// buckets cover the range exactly), which holds rows and reaches back to start, else the
// choice of choose for points.
func chooseWhole(cat *catalog.Catalog, oldest map[string]time.Time, start, end time.Time, points int, flowsOnly, needCount bool) window {
	if !flowsOnly {
		tables := slices.Clone(cat.Aggregated)
		slices.SortStableFunc(tables, func(a, b catalog.Table) int { return int(resolution(b) - resolution(a)) })
		for _, t := range tables {
			res := resolution(t)
			if _, ok := oldest[t.Name]; !ok || (needCount && !t.FlowCount) || !alignDown(start, res).Equal(start) || !alignDown(end, res).Equal(end) || end.Sub(start) < res {
				continue
			}
			w := choose(cat, oldest, start, end, int(end.Sub(start)/res), false, needCount)
			if w.table.Name == t.Name {
				return w
			}
		}
	}
	return choose(cat, oldest, start, end, points, flowsOnly, needCount)
}

// windowOn aligns [start, end) on table t for a target interval.
func windowOn(t catalog.Table, start, end time.Time, target time.Duration) window {
	res := resolution(t)
	interval := max(target.Truncate(res), res)
	w := window{table: t, interval: interval, start: alignDown(start, res)}
	w.n = max(int(end.Sub(w.start)/interval), 1)
	return w
}

// previousWindow is w moved back by shift, on the table among the candidates whose
// resolution divides w's interval and which reaches back to the moved start: w's own when
// it does, else the coarsest that does, else w's.
func previousWindow(cat *catalog.Catalog, oldest map[string]time.Time, w window, shift time.Duration, flowsOnly, needCount bool) window {
	p := w
	p.start = w.start.Add(-shift)
	reaches := func(t catalog.Table) bool {
		o, ok := oldest[t.Name]
		return ok && !o.After(p.start.Add(w.interval))
	}
	if reaches(w.table) {
		return p
	}
	candidates := []catalog.Table{cat.Flows}
	if !flowsOnly {
		for _, t := range cat.Aggregated {
			if t.FlowCount || !needCount {
				candidates = append(candidates, t)
			}
		}
	}
	for _, t := range candidates {
		if w.interval%resolution(t) == 0 && reaches(t) && (p.table == w.table || resolution(t) > resolution(p.table)) {
			p.table = t
		}
	}
	return p
}

// previousPeriod is how far back the previous period of a range is: an hour for a range
// under 2 hours, a day under 2 days, a week under 2 weeks, 4 weeks under 8 weeks, else a
// year (from start: 365 or 366 days). name says which.
func previousPeriod(start, end time.Time) (shift time.Duration, name string) {
	d := end.Sub(start)
	switch {
	case d < 2*time.Hour:
		return time.Hour, "hour"
	case d < 2*24*time.Hour:
		return 24 * time.Hour, "day"
	case d < 2*7*24*time.Hour:
		return 7 * 24 * time.Hour, "week"
	case d < 8*7*24*time.Hour:
		return 4 * 7 * 24 * time.Hour, "4 weeks"
	}
	return start.Sub(start.AddDate(-1, 0, 0)), "year"
}

// part is a piece of a range read from one table: [start, end), whole buckets of it.
type part struct {
	table      catalog.Table
	start, end time.Time
}

// split cuts [start, end) into parts for a query without a time axis, so that it reads as
// few rows as the tables allow and sums exactly what [start, end) holds: the whole buckets
// of the coarsest table that has rows from their start (flows_1h), the edges before and
// after them from the finer tables in the same way (flows_5m, flows_1m), what is left
// (less than a minute at each edge) from the flows table. An aggregated table's bucket
// holds every flow of its interval, so an end on a bucket boundary (the current bucket
// still open or not) needs no finer table. Candidates as for choose; flowsOnly gives the
// flows table alone. An edge that no table holds at a fine enough resolution (older than
// the finer tables' data) is read from the finest table that reaches back, whole buckets
// of it, as choose would.
func split(cat *catalog.Catalog, oldest map[string]time.Time, start, end time.Time, flowsOnly, needCount bool) []part {
	tables := []catalog.Table{cat.Flows}
	if !flowsOnly {
		for _, t := range cat.Aggregated {
			if t.FlowCount || !needCount {
				tables = append(tables, t)
			}
		}
	}
	slices.SortStableFunc(tables, func(a, b catalog.Table) int { return int(resolution(b) - resolution(a)) })
	start, end = start.Truncate(time.Second), end.Truncate(time.Second)
	var parts []part
	for _, p := range cover(tables, tables, oldest, start, end, true) {
		if n := len(parts); n > 0 && parts[n-1].table.Name == p.table.Name && parts[n-1].end.Equal(p.start) {
			parts[n-1].end = p.end // one read of a table for two parts that follow each other
			continue
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return []part{{table: tables[len(tables)-1], start: start, end: end}}
	}
	return parts
}

// cover is split over tables, coarsest first: [s, e)'s whole buckets of the first table
// holding rows from their start, the rest recursively from the finer ones. left says
// whether [s, e) is the range's start edge (the only one that can be older than a table's
// data), all is every candidate (for that edge).
func cover(all, tables []catalog.Table, oldest map[string]time.Time, s, e time.Time, left bool) []part {
	if !s.Before(e) {
		return nil
	}
	for i, t := range tables {
		o, ok := oldest[t.Name]
		if !ok {
			continue
		}
		res := resolution(t)
		a := alignUp(s, res)
		if o.After(a) {
			a = alignUp(o, res)
		}
		b := alignDown(e, res)
		if !a.Before(b) {
			continue
		}
		parts := cover(all, tables[i+1:], oldest, s, a, left)
		parts = append(parts, part{table: t, start: a, end: b})
		return append(parts, cover(all, tables[i+1:], oldest, b, e, false)...)
	}
	if left {
		// Older than every finer table's data: the buckets of the finest table that has
		// rows from their start (e, where the next part starts, is on its buckets).
		for i := len(all) - 1; i >= 0; i-- {
			t := all[i]
			if o, ok := oldest[t.Name]; ok && !o.After(alignDown(s, resolution(t))) && alignDown(e, resolution(t)).Equal(e) {
				return []part{{table: t, start: alignDown(s, resolution(t)), end: e}}
			}
		}
	}
	if len(tables) == 0 {
		return nil
	}
	return []part{{table: tables[len(tables)-1], start: s, end: e}}
}

// alignUp rounds t up to a multiple of d since the Unix epoch.
func alignUp(t time.Time, d time.Duration) time.Time {
	down := alignDown(t, d)
	if down.Before(t) {
		return down.Add(d)
	}
	return down
}

// partTables names the tables parts read, coarsest first, each once.
func partTables(parts []part) []string {
	var names []string
	for _, p := range slices.SortedStableFunc(slices.Values(parts), func(a, b part) int {
		return int(resolution(b.table) - resolution(a.table))
	}) {
		if !slices.Contains(names, p.table.Name) {
			names = append(names, p.table.Name)
		}
	}
	return names
}
