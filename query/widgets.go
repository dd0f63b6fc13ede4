package query

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"flowzero/query/catalog"
	"flowzero/query/filter"
)

// Home page widgets: what a collector receives now.

// Windows of the widgets.
const (
	// RecentWindow is the window of the exporters seen and the top widgets.
	RecentWindow = 5 * time.Minute
	// RateWindow is the window of the flow rate.
	RateWindow = time.Minute
	// GraphWindow is the range of the home graph.
	GraphWindow = 24 * time.Hour
	// TopLimit is the number of rows of a top widget (then Other).
	TopLimit = 5
)

// FlowRate is the flow rate widget.
type FlowRate struct {
	Rate   float64 `json:"rate"`   // flows per second
	Period int     `json:"period"` // over so many seconds
	SQL    string  `json:"sql"`
}

// FlowRate returns the flows per second over the minute ending at the newest flow of the
// last RecentWindow (the sink writes flows every few seconds: the last ones are not stored
// yet), 0 without flows in that window.
func (s *Service) FlowRate(ctx context.Context) (*FlowRate, error) {
	cat := s.base
	now := s.clock.Now()
	table := quoteTable(cat, cat.Flows)
	recent := timeRange(now.Add(-RecentWindow), now.Add(time.Second))
	sql := fmt.Sprintf("WITH (SELECT max(TimeReceived) FROM %[1]s WHERE %[2]s) AS newest\n"+
		"SELECT count() FROM %[1]s WHERE %[2]s AND TimeReceived > newest - %[3]d AND TimeReceived <= newest",
		table, recent, int(RateWindow/time.Second))
	res, err := s.run(ctx, sql, 1, 0)
	if err != nil {
		return nil, err
	}
	out := &FlowRate{Period: int(RateWindow / time.Second), SQL: sql}
	if len(res.Data) == 1 {
		out.Rate = float64(cellUint(res.Data[0][0])) / RateWindow.Seconds()
	}
	return out, nil
}

// Exporters is the exporters widget.
type Exporters struct {
	Exporters []string `json:"exporters"`
	Count     int      `json:"count"`
	Table     string   `json:"table"`
	SQL       string   `json:"sql"`
}

// Exporters returns the exporters seen over the last RecentWindow, by address.
func (s *Service) Exporters(ctx context.Context) (*Exporters, error) {
	st, err := s.tables(ctx)
	if err != nil {
		return nil, err
	}
	cat := st.catalog
	out := &Exporters{Exporters: []string{}}
	col := cat.Column("ExporterAddress")
	if col == nil {
		return out, nil
	}
	now := s.clock.Now()
	w := choose(cat, st.oldest, now.Add(-RecentWindow), now, int(RecentWindow/time.Minute), !col.Aggregated, false)
	out.Table = w.table.Name
	out.SQL = fmt.Sprintf("SELECT DISTINCT %s AS e\nFROM %s\nWHERE %s\nORDER BY e",
		addressText(col.Name), quoteTable(cat, w.table), timeRange(now.Add(-RecentWindow), now.Add(time.Second)))
	res, err := s.run(ctx, out.SQL, 1, 0)
	if err != nil {
		return nil, err
	}
	for _, row := range res.Data {
		out.Exporters = append(out.Exporters, cellString(row[0]))
	}
	out.Count = len(out.Exporters)
	return out, nil
}

// LastFlow is the last flow widget: every column of the newest flow (nil without flows).
type LastFlow struct {
	Flow map[string]any `json:"flow"`
	SQL  string         `json:"sql"`
}

// LastFlow returns the newest flow: it looks in the last RecentWindow first, then in the
// whole table (a collector that stopped receiving).
func (s *Service) LastFlow(ctx context.Context) (*LastFlow, error) {
	cat := s.base
	cols := cat.Columns()
	now := s.clock.Now().Unix()
	out := &LastFlow{}
	for _, where := range []string{
		fmt.Sprintf("TimeReceived <= toDateTime(%d) AND TimeReceived > toDateTime(%d)", now+1, now-int64(RecentWindow/time.Second)),
		fmt.Sprintf("TimeReceived <= toDateTime(%d)", now+1),
	} {
		out.SQL = lastFlowSQL(cat, cols, where)
		res, err := s.run(ctx, out.SQL, len(cols), 0)
		if err != nil {
			return nil, err
		}
		if len(res.Data) == 1 {
			out.Flow = map[string]any{}
			for i, v := range flowValues(cols, res.Data[0]) {
				out.Flow[cols[i].Name] = v
			}
			return out, nil
		}
	}
	return out, nil
}

// lastFlowSQL selects the newest record matching where (the last written among those of
// the newest second). The subquery finds its position reading the time alone; the values
// are then read from its granule only (the flows table is sorted by 5-minute buckets, so
// a second's records spread over every granule of its bucket).
func lastFlowSQL(cat *catalog.Catalog, cols []*catalog.Column, where string) string {
	e := exprs{cat: cat, t4: 32, t6: 128}
	var sel []string
	for i, c := range cols {
		sel = append(sel, fmt.Sprintf("%s AS c%d", e.value(c), i))
	}
	table := quoteTable(cat, cat.Flows)
	return fmt.Sprintf("SELECT %s\nFROM %s\nWHERE %s\n  AND (_part, _part_offset) IN (SELECT _part, _part_offset FROM %s WHERE %s ORDER BY TimeReceived DESC, _part DESC, _part_offset DESC LIMIT 1)\n"+
		"ORDER BY TimeReceived DESC\nLIMIT 1",
		strings.Join(sel, ", "), table, where, table, where)
}

// Top is a top widget: the first TopLimit values of a dimension over the last
// RecentWindow by L3 bits per second, and Other, each with its share of the traffic.
type Top struct {
	Top   []TopItem `json:"top"`
	Table string    `json:"table"`
	SQL   string    `json:"sql"`
}

// TopItem is one value of a top widget.
type TopItem struct {
	Name    string  `json:"name"`
	Percent float64 `json:"percent"`
}

// Top returns the top widget of a dimension, with a filter.
func (s *Service) Top(ctx context.Context, dimension, filterText string) (*Top, error) {
	st, err := s.tables(ctx)
	if err != nil {
		return nil, err
	}
	cat := st.catalog
	now := s.clock.Now()
	req := Common{Start: now.Add(-RecentWindow), End: now, Dimensions: []string{dimension}, Limit: min(TopLimit, s.cfg.DimensionsLimit), Filter: filterText}
	c, err := req.validate(cat, s.cfg, 1, 1)
	if err != nil {
		if re, ok := err.(*RequestError); ok && re.Field == "dimensions[0]" {
			re.Field = "dimension"
		}
		return nil, err
	}
	w := choose(cat, st.oldest, c.start, c.end, int(RecentWindow/time.Minute), c.needsFlowsTable(cat, false), false)
	t, err := s.table(ctx, cat, c, w)
	if err != nil {
		return nil, err
	}
	var total uint64
	for _, r := range t.Rows {
		total += r.Bytes
	}
	out := &Top{Top: []TopItem{}, Table: t.Table, SQL: t.SQL}
	for _, r := range t.Rows {
		item := TopItem{Name: r.Dimensions[0]}
		if total > 0 {
			item.Percent = float64(r.Bytes) * 100 / float64(total)
		}
		out.Top = append(out.Top, item)
	}
	sort.SliceStable(out.Top, func(i, j int) bool {
		if (out.Top[i].Name == "Other") != (out.Top[j].Name == "Other") {
			return out.Top[j].Name == "Other"
		}
		return out.Top[i].Percent > out.Top[j].Percent
	})
	return out, nil
}

// Graph returns the home graph: the L3 bits per second over the last GraphWindow, with a
// filter, on about points points (0: the configuration's).
func (s *Service) Graph(ctx context.Context, points int, filterText string) (*LineResult, error) {
	now := s.clock.Now()
	return s.Line(ctx, LineRequest{Common: Common{Start: now.Add(-GraphWindow), End: now, Filter: filterText}, Points: points})
}

// ValidateFilter parses a filter: its canonical form, or the error.
func (s *Service) ValidateFilter(ctx context.Context, text string) (*filter.Filter, error) {
	return filter.Parse(s.Catalog(ctx), text)
}

// ConfigInfo is what the console needs to build its forms (GET /api/v0/query/config).
type ConfigInfo struct {
	Version         string       `json:"version"`
	DefaultFilter   string       `json:"defaultFilter"`
	DimensionsLimit int          `json:"dimensionsLimit"`
	Points          int          `json:"points"`
	Columns         []ColumnInfo `json:"columns"`
	Tables          []TableInfo  `json:"tables"`
	Units           []Unit       `json:"units"`
}

// ColumnInfo is a column as the console sees it.
type ColumnInfo struct {
	Name        string       `json:"name"`
	Type        string       `json:"type"`
	Kind        catalog.Kind `json:"kind"`
	Dimension   bool         `json:"dimension"`
	Filter      bool         `json:"filter"`
	Aggregated  bool         `json:"aggregated"`
	Truncatable bool         `json:"truncatable"`
	Values      []string     `json:"values"`
	Reverse     string       `json:"reverse,omitempty"`
}

// Config returns the configuration the console reads. version is the collector's.
func (s *Service) Config(ctx context.Context, version string) (*ConfigInfo, error) {
	tables, err := s.Tables(ctx)
	if err != nil {
		tables = []TableInfo{}
		for _, t := range append([]catalog.Table{s.base.Flows}, s.base.Aggregated...) {
			tables = append(tables, TableInfo{Name: t.Name, Resolution: int64(t.Resolution / time.Second), TTL: int64(t.TTL / time.Second)})
		}
	}
	out := &ConfigInfo{Version: version, DefaultFilter: s.cfg.DefaultFilter, DimensionsLimit: s.cfg.DimensionsLimit,
		Points: s.cfg.Points, Tables: tables, Units: Units}
	for _, c := range s.base.Columns() {
		ci := ColumnInfo{Name: c.Name, Type: c.Type, Kind: c.Kind, Dimension: c.Dimension, Filter: c.Filter,
			Aggregated: c.Aggregated, Truncatable: c.Truncatable, Values: c.Enum, Reverse: c.Reverse}
		switch c.Kind {
		case catalog.KindEType:
			ci.Values = []string{"IPv4", "IPv6"}
		case catalog.KindProtocol:
			for _, p := range s.Catalog(ctx).Protocols {
				ci.Values = append(ci.Values, p.Name)
			}
		}
		if ci.Values == nil {
			ci.Values = []string{}
		}
		out.Columns = append(out.Columns, ci)
	}
	return out, nil
}
