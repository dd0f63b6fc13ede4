package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"flowzero/app"
	"flowzero/query"
)

func init() {
	register("query", "ask the stored flows: top talkers, time series, Sankey, flow records", runQuery)
}

// queryFlags are the flags of every `flowzero query` command.
type queryFlags struct {
	config, server      string
	since, until        string
	filter, format      string
	table               string
	explain             bool
	by, unit, topBy     string
	limit, points       int
	bidirectional, prev bool
	columns             string
}

func runQuery(args []string, stdout, stderr io.Writer) error {
	return runQueryAt(args, stdout, stderr, time.Now())
}

// runQueryAt runs a query command with now as the current time (--since and --until).
func runQueryAt(args []string, stdout, stderr io.Writer, now time.Time) error {
	fs := newFlagSet("query", stderr)
	var f queryFlags
	fs.StringVar(&f.config, "config", "", "the collector's YAML configuration `file` (its collector.http.listen, schema: and outputs.store: keys)")
	fs.StringVar(&f.server, "server", "", "the running collector's `URL` (default: from collector.http.listen); without one answering, the embedded store is read directly")
	fs.StringVar(&f.since, "since", "1h", "start of the range: a duration before now (`1h`, 30m, 7d, 2w), RFC 3339 or now")
	fs.StringVar(&f.since, "start", "1h", "same as --since")
	fs.StringVar(&f.until, "until", "now", "end of the range: a duration before now, RFC 3339 or `now`")
	fs.StringVar(&f.until, "end", "now", "same as --until")
	fs.StringVar(&f.filter, "filter", "", "flow `filter` (docs/filter.md), for example 'InIfBoundary = external AND Proto = TCP'")
	fs.StringVar(&f.format, "format", "table", "output `format`: table, json or csv")
	fs.StringVar(&f.table, "table", "auto", "`table` to read: auto (the coarsest that fits) or flows (the raw records)")
	fs.BoolVar(&f.explain, "explain", false, "print the table chosen and the SQL run")
	fs.StringVar(&f.by, "by", "", "dimensions, comma-separated (`SrcAS,DstAS`): top, series, sankey")
	fs.StringVar(&f.unit, "unit", "l3bps", "`unit`: l3bps, l2bps, pps, fps, inl2% or outl2%")
	fs.StringVar(&f.topBy, "top-by", "avg", "what ranks the rows: avg, max, last or p95")
	fs.IntVar(&f.limit, "limit", 0, "rows: top and series fold the others into Other (default 10); flows: records (default 20)")
	fs.IntVar(&f.points, "points", 0, "series: number of points (default query.points); top: how finely max and p95 cut the range")
	fs.BoolVar(&f.bidirectional, "bidirectional", false, "series: add the reverse direction (Src and Dst, In and Out swapped)")
	fs.BoolVar(&f.prev, "previous-period", false, "series: add the total of the period before")
	fs.StringVar(&f.columns, "columns", "", "flows: columns to show, comma-separated (default: the usual ones)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n"+
			"  flowzero query top --by SrcAS,DstAS [--since 1h] [--filter F] [--limit 20] [--unit l3bps]\n"+
			"      the dimensions' values carrying the most traffic, with their rate and totals\n"+
			"  flowzero query series [--by DIMS] [--since 24h] [--points 24] ...\n"+
			"      the traffic over time, one column per value (and Other)\n"+
			"  flowzero query sankey --by SrcAS,InIfName,DstAS ...\n"+
			"      the traffic between the values of 2 to 4 dimensions\n"+
			"  flowzero query flows [--filter F] [--limit 50] [--columns C1,C2]\n"+
			"      the flow records, newest first\n\n"+
			"It asks the collector running at --server; when none answers, it reads the embedded store\n"+
			"of --config itself. Times: a duration before now (1h, 7d), RFC 3339 or now.\n\n")
		fs.PrintDefaults()
	}
	var action string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		action, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch action {
	case "top", "series", "sankey", "flows":
	default:
		fs.Usage()
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags come as --name value)", fs.Arg(0))
	}
	switch f.format {
	case "table", "json", "csv":
	default:
		return fmt.Errorf("--format: %q is not table, json or csv", f.format)
	}
	start, err := parseWhen(f.since, now)
	if err != nil {
		return fmt.Errorf("--since: %w", err)
	}
	end, err := parseWhen(f.until, now)
	if err != nil {
		return fmt.Errorf("--until: %w", err)
	}
	if !start.Before(end) {
		return fmt.Errorf("--since %s is not before --until %s", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	cfg, err := app.Load(f.config)
	if err != nil {
		return err
	}
	server := f.server
	if server == "" {
		server = defaultServer(cfg)
	}
	ctx := context.Background()
	c, err := connect(ctx, cfg, server, stderr)
	if err != nil {
		return err
	}
	defer c.close()

	common := query.Common{Start: start, End: end, Dimensions: splitList(f.by), Limit: f.limit,
		TopBy: query.TopBy(f.topBy), Units: query.Unit(f.unit), Filter: f.filter, Table: f.table}
	csv := f.format == "csv"
	switch action {
	case "top":
		var res query.TableResult
		b, err := c.post(ctx, "table", query.TableRequest{Common: common, Points: f.points}, &res)
		return finish(stdout, stderr, f, b, err, tableAnswer{&res}, func() *textTable { return topTable(&res, common, csv) })
	case "series":
		var res query.LineResult
		req := query.LineRequest{Common: common, Points: f.points, Bidirectional: f.bidirectional, PreviousPeriod: f.prev}
		b, err := c.post(ctx, "line", req, &res)
		return finish(stdout, stderr, f, b, err, lineAnswer{&res}, func() *textTable { return seriesTable(&res, common, csv) })
	case "sankey":
		var res query.SankeyResult
		b, err := c.post(ctx, "sankey", query.SankeyRequest{Common: common}, &res)
		return finish(stdout, stderr, f, b, err, sankeyAnswer{&res}, func() *textTable { return sankeyTable(&res, common, csv) })
	default: // flows
		limit := f.limit
		if limit == 0 {
			limit = 20
		}
		var res query.FlowsResult
		req := query.FlowsRequest{Start: start, End: end, Filter: f.filter, Limit: limit, Columns: splitList(f.columns)}
		b, err := c.post(ctx, "flows", req, &res)
		return finish(stdout, stderr, f, b, err, flowsAnswer{&res}, func() *textTable { return flowsTable(&res, csv) })
	}
}

// finish writes the answer body (or its table) in the format asked, and the explanation.
func finish(stdout, stderr io.Writer, f queryFlags, body []byte, err error, out interface {
	explain() (string, int64, string)
}, tab func() *textTable) error {
	if err != nil {
		return err
	}
	explain := func(w io.Writer) {
		table, interval, sql := out.explain()
		fmt.Fprintf(w, "-- table: %s", table)
		if interval > 0 {
			fmt.Fprintf(w, ", interval: %s", time.Duration(interval)*time.Second)
		}
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(sql))
	}
	switch f.format {
	case "json":
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			return err
		}
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		if f.explain {
			explain(stderr)
		}
		return nil
	case "csv":
		if err := tab().writeCSV(stdout); err != nil {
			return err
		}
		if f.explain {
			explain(stderr)
		}
		return nil
	}
	if f.explain {
		explain(stdout)
		fmt.Fprintln(stdout)
	}
	return tab().write(stdout)
}

type tableAnswer struct{ r *query.TableResult }

func (a tableAnswer) explain() (string, int64, string) {
	return alsoRead(a.r.Table, a.r.Tables), a.r.Interval, a.r.SQL
}

// alsoRead is the table chosen, with the other tables a query read (its rows ranked over
// a range split across the tables): "flows_5m (also read: flows_1h, flows_1m)".
func alsoRead(table string, tables []string) string {
	var others []string
	for _, t := range tables {
		if t != table {
			others = append(others, t)
		}
	}
	if len(others) == 0 {
		return table
	}
	return table + " (also read: " + strings.Join(others, ", ") + ")"
}

type lineAnswer struct{ r *query.LineResult }

func (a lineAnswer) explain() (string, int64, string) {
	return alsoRead(a.r.Table, a.r.Tables), a.r.Interval, a.r.SQL
}

type sankeyAnswer struct{ r *query.SankeyResult }

func (a sankeyAnswer) explain() (string, int64, string) {
	return alsoRead(a.r.Table, a.r.Tables), 0, a.r.SQL
}

type flowsAnswer struct{ r *query.FlowsResult }

func (a flowsAnswer) explain() (string, int64, string) { return a.r.Table, 0, a.r.SQL }
