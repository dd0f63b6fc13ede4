package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"flowzero/query"
)

// parseWhen reads a time of --since or --until: now, a duration before now (Go's 1h30m,
// with d for days and w for weeks: 7d, 2w), or RFC 3339 (2026-11-26T10:00:00Z, or without
// seconds or zone, or a date alone, in UTC).
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("empty time (a duration before now, RFC 3339 or now)")
	}
	if strings.EqualFold(s, "now") {
		return now, nil
	}
	if d, ok := parseAgo(s); ok {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration before now (1h, 30m, 7d, 2w), RFC 3339 (2006-01-02T15:04:05Z) nor now", s)
}

// parseAgo reads a positive duration, with d (24 h) and w (7 d) units besides Go's.
func parseAgo(s string) (time.Duration, bool) {
	var total time.Duration
	rest := s
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		j := i
		for j < len(rest) && (rest[j] < '0' || rest[j] > '9') && rest[j] != '.' {
			j++
		}
		if i == 0 || j == i {
			return 0, false
		}
		n, unit := rest[:i], rest[i:j]
		var d time.Duration
		switch unit {
		case "d", "w":
			v, err := strconv.ParseFloat(n, 64)
			if err != nil {
				return 0, false
			}
			day := 24 * time.Hour
			if unit == "w" {
				day *= 7
			}
			d = time.Duration(v * float64(day))
		default:
			var err error
			if d, err = time.ParseDuration(n + unit); err != nil {
				return 0, false
			}
		}
		total += d
		rest = rest[j:]
	}
	return total, total > 0
}

// si writes v with an SI prefix and three significant digits: 1.23 G, 456 M, 12.0 k.
func si(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	prefixes := []string{"", "k", "M", "G", "T", "P", "E"}
	i := 0
	a := math.Abs(v)
	for a >= 999.5 && i < len(prefixes)-1 {
		a /= 1000
		v /= 1000
		i++
	}
	var num string
	switch {
	case v == 0:
		num = "0"
	case i == 0 && v == math.Trunc(v):
		num = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 99.95:
		num = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 9.995:
		num = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		num = strconv.FormatFloat(v, 'f', 2, 64)
	}
	if unit == "" && prefixes[i] == "" {
		return num
	}
	return num + " " + prefixes[i] + unit
}

// unitSymbol is how a rate in unit u is written.
func unitSymbol(u query.Unit) string {
	switch u {
	case "", query.UnitL3bps, query.UnitL2bps:
		return "bps"
	case query.UnitPps:
		return "pps"
	case query.UnitFps:
		return "fps"
	}
	return "%"
}

// rate writes a value in unit u: SI for rates, two decimals for percents.
func rate(v float64, u query.Unit, raw bool) string {
	if raw {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	if unitSymbol(u) == "%" {
		return strconv.FormatFloat(v, 'f', 2, 64) + " %"
	}
	return si(v, unitSymbol(u))
}

// count writes a total: SI in a table, the number in CSV.
func count(v float64, unit string, raw bool) string {
	if raw {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return si(v, unit)
}

// textTable is a result as rows of text, written aligned (numbers on the right, as nfdump
// does) or as CSV.
type textTable struct {
	header []string
	right  []bool // columns aligned right
	rows   [][]string
}

func (t *textTable) write(w io.Writer) error {
	width := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	line := func(r []string) {
		var l strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				l.WriteString("  ")
			}
			if t.right[i] {
				l.WriteString(pad + c)
			} else {
				l.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteString("\n")
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
	if len(t.rows) == 0 {
		b.WriteString("(no flows in the range)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (t *textTable) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(t.header)
	cw.WriteAll(t.rows)
	return cw.Error()
}

// dimensionHeader names the dimension columns (the total when there are none).
func dimensionHeader(c query.Common) []string {
	if len(c.Dimensions) == 0 {
		return []string{"Total"}
	}
	return c.Dimensions
}

func dims(values []string, n int) []string {
	out := make([]string, n)
	copy(out, values)
	if len(values) == 0 && n == 1 {
		out[0] = "Total"
	}
	return out
}

// topTable is `query top`: per row, its dimensions, its rate (avg, max, p95) and share, its
// totals.
func topTable(res *query.TableResult, c query.Common, raw bool) *textTable {
	sym := unitSymbol(c.Units)
	head := dimensionHeader(c)
	t := &textTable{header: append(head, "Avg "+sym, "Max "+sym, "P95 "+sym, "Share", "Bytes", "Packets", "Flows")}
	for i := range t.header {
		t.right = append(t.right, i >= len(head))
	}
	var sum float64
	for _, r := range res.Rows {
		sum += r.Avg
	}
	for _, r := range res.Rows {
		share := "-"
		if sum > 0 && sym != "%" {
			share = strconv.FormatFloat(100*r.Avg/sum, 'f', 1, 64)
			if !raw {
				share += " %"
			}
		}
		flows := "-"
		if r.Flows != nil {
			flows = count(float64(*r.Flows), "", raw)
		} else if raw {
			flows = ""
		}
		row := append(dims(r.Dimensions, len(head)), rate(r.Avg, c.Units, raw), rate(r.Max, c.Units, raw), rate(r.P95, c.Units, raw),
			share, count(float64(r.Bytes), "B", raw), count(float64(r.Packets), "", raw), flows)
		t.rows = append(t.rows, row)
	}
	return t
}

// seriesTable is `query series`: one row per time, one column per series.
func seriesTable(res *query.LineResult, c query.Common, raw bool) *textTable {
	t := &textTable{header: []string{"Time"}, right: []bool{false}}
	for i, r := range res.Rows {
		name := strings.Join(r, " / ")
		if len(r) == 0 {
			name = "Total"
		}
		if a := res.Axis[i]; a != 1 {
			name = res.AxisNames[a] + ": " + name
		}
		t.header = append(t.header, name)
		t.right = append(t.right, true)
	}
	for j, tm := range res.Time {
		row := []string{tm.UTC().Format(time.RFC3339)}
		if !raw {
			row[0] = tm.UTC().Format("2006-01-02 15:04:05")
		}
		for i := range res.Rows {
			row = append(row, rate(res.Points[i][j], c.Units, raw))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// sankeyTable is `query sankey`: per combination of the dimensions' values, its rate.
func sankeyTable(res *query.SankeyResult, c query.Common, raw bool) *textTable {
	sym := unitSymbol(c.Units)
	t := &textTable{header: append(dimensionHeader(c), "Avg "+sym)}
	for i := range t.header {
		t.right = append(t.right, i == len(t.header)-1)
	}
	for i, r := range res.Rows {
		t.rows = append(t.rows, append(dims(r, len(t.header)-1), rate(res.Values[i], c.Units, raw)))
	}
	return t
}

// flowsTable is `query flows`: the records, one per row.
func flowsTable(res *query.FlowsResult, raw bool) *textTable {
	t := &textTable{header: res.Columns, right: make([]bool, len(res.Columns))}
	for _, r := range res.Rows {
		row := make([]string, len(r))
		for i, v := range r {
			row[i] = cellText(v)
			if _, num := v.(float64); num && !raw {
				t.right[i] = true
			}
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// cellText writes a value of the flows route: numbers whole, arrays space-separated.
func cellText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case json.Number:
		return string(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = cellText(x)
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprint(v)
}
