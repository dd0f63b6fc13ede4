package query

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"flowzero/internal/config"
	"flowzero/internal/testutil"
	"flowzero/query/catalog"
	"flowzero/query/filter"
	"flowzero/schema"
	"flowzero/store"
)

func testCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	cfg := store.DefaultConfiguration()
	cat, err := catalog.FromStore(s, cfg, store.NewDDL(cfg, s, ""))
	if err != nil {
		t.Fatal(err)
	}
	return cat.WithProtocols([]catalog.Protocol{{Number: 6, Name: "TCP"}, {Number: 17, Name: "UDP"}})
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestConfigurationValidate(t *testing.T) {
	if err := DefaultConfiguration().Validate(); err != nil {
		t.Fatal(err)
	}
	for key, change := range map[string]func(*Configuration){
		"dimensions-limit":   func(c *Configuration) { c.DimensionsLimit = 0 },
		"points":             func(c *Configuration) { c.Points = 4 },
		"timeout":            func(c *Configuration) { c.Timeout = 1500 * time.Millisecond },
		"max-memory":         func(c *Configuration) { c.MaxMemory = 1 << 20 },
		"max-concurrent":     func(c *Configuration) { c.MaxConcurrent = 0 },
		"max-queued":         func(c *Configuration) { c.MaxQueued = -1 },
		"cache-duration":     func(c *Configuration) { c.CacheDuration = -time.Second },
		"cache-size":         func(c *Configuration) { c.CacheSize = -1 },
		"tables-refresh":     func(c *Configuration) { c.TablesRefresh = 0 },
		"completion-timeout": func(c *Configuration) { c.CompletionTimeout = 500 * time.Millisecond },
	} {
		c := DefaultConfiguration()
		change(&c)
		var ke *config.KeyError
		if err := c.Validate(); !errors.As(err, &ke) || ke.Key != key {
			t.Errorf("%s: %v", key, err)
		}
	}
	cfg := DefaultConfiguration()
	cfg.DefaultFilter = "Foo = 1"
	_, err := New(cfg, testCatalog(t), nil, nil, nil)
	var ke *config.KeyError
	if !errors.As(err, &ke) || ke.Key != "default-filter" {
		t.Errorf("default filter: %v", err)
	}
}

func TestChoose(t *testing.T) {
	cat := testCatalog(t)
	now := time.Date(2026, 11, 26, 10, 7, 23, 0, time.UTC)
	full := map[string]time.Time{
		"flows": now.Add(-15 * 24 * time.Hour), "flows_1m": now.Add(-7 * 24 * time.Hour),
		"flows_5m": now.Add(-90 * 24 * time.Hour), "flows_1h": now.Add(-365 * 24 * time.Hour),
	}
	young := map[string]time.Time{ // a collector started 7 minutes ago
		"flows": now.Add(-7 * time.Minute), "flows_1m": alignDown(now.Add(-7*time.Minute), time.Minute),
		"flows_5m": alignDown(now.Add(-7*time.Minute), 5*time.Minute), "flows_1h": alignDown(now, time.Hour),
	}
	// A collector started late in the hour: the hour's table has a row at the top of the
	// hour, minutes before the first flow.
	late := map[string]time.Time{
		"flows": now.Add(-3 * time.Minute), "flows_1m": alignDown(now.Add(-3*time.Minute), time.Minute),
		"flows_5m": alignDown(now.Add(-3*time.Minute), 5*time.Minute), "flows_1h": alignDown(now, time.Hour),
	}
	// A collector started 20 s ago: its aggregated tables hold only buckets still open,
	// which the windows, made of whole intervals, leave out.
	started := map[string]time.Time{
		"flows": now.Add(-20 * time.Second), "flows_1m": alignDown(now, time.Minute),
		"flows_5m": alignDown(now, 5*time.Minute), "flows_1h": alignDown(now, time.Hour),
	}
	withoutCount := testCatalog(t) // tables that do not count flows
	for i := range withoutCount.Aggregated {
		withoutCount.Aggregated[i].FlowCount = false
	}
	for _, c := range []struct {
		name      string
		cat       *catalog.Catalog
		oldest    map[string]time.Time
		rng       time.Duration
		points    int
		flowsOnly bool
		needCount bool
		table     string
		interval  time.Duration
		n         int
	}{
		{"1h/200: 60 points from flows_1m", cat, full, time.Hour, 200, false, false, "flows_1m", time.Minute, 60},
		{"1h/2000: flows_1m is too coarse", cat, full, time.Hour, 2000, false, false, "flows", time.Second, 3600},
		{"30m/200: flows_1m is too coarse", cat, full, 30 * time.Minute, 200, false, false, "flows", 9 * time.Second, 200},
		{"6h/200", cat, full, 6 * time.Hour, 200, false, false, "flows_1m", time.Minute, 360},
		{"24h/200", cat, full, 24 * time.Hour, 200, false, false, "flows_5m", 5 * time.Minute, 288},
		{"7d/200: 168 points from flows_1h", cat, full, 7 * 24 * time.Hour, 200, false, false, "flows_1h", time.Hour, 168},
		{"7d/250", cat, full, 7 * 24 * time.Hour, 250, false, false, "flows_5m", 40 * time.Minute, 252},
		{"30d/200: flows_1m is too young", cat, full, 30 * 24 * time.Hour, 200, false, false, "flows_1h", 3 * time.Hour, 240},
		{"20d/200: the flows table too", cat, full, 20 * 24 * time.Hour, 2000, false, false, "flows_5m", 10 * time.Minute, 2880},
		{"24h/200 flows only", cat, full, 24 * time.Hour, 200, true, false, "flows", 432 * time.Second, 200},
		{"24h/200 counting flows, without Flows", withoutCount, full, 24 * time.Hour, 200, false, true, "flows", 432 * time.Second, 200},
		{"24h/200 counting flows", cat, full, 24 * time.Hour, 200, false, true, "flows_5m", 5 * time.Minute, 288},
		{"24h/200, young", cat, young, 24 * time.Hour, 200, false, false, "flows_5m", 5 * time.Minute, 288},
		{"1h/60, young", cat, young, time.Hour, 60, false, false, "flows_1m", time.Minute, 60},
		{"6h/200, started late in the hour", cat, late, 6 * time.Hour, 200, false, false, "flows_1m", time.Minute, 360},
		{"24h/200, started late in the hour", cat, late, 24 * time.Hour, 200, false, false, "flows_5m", 5 * time.Minute, 288},
		{"24h/200, started 20 s ago", cat, started, 24 * time.Hour, 200, false, false, "flows", 432 * time.Second, 200},
		{"5m/5, started 20 s ago", cat, started, 5 * time.Minute, 5, false, false, "flows", time.Minute, 5},
		{"24h/200, empty", cat, map[string]time.Time{}, 24 * time.Hour, 200, false, false, "flows_5m", 5 * time.Minute, 288},
		{"1h/200, empty", cat, map[string]time.Time{}, time.Hour, 200, false, false, "flows", 18 * time.Second, 200},
		{"2s/5", cat, full, 2 * time.Second, 5, false, false, "flows", time.Second, 2},
	} {
		w := choose(c.cat, c.oldest, now.Add(-c.rng), now, c.points, c.flowsOnly, c.needCount)
		if w.table.Name != c.table || w.interval != c.interval || w.n != c.n {
			t.Errorf("%s: %s every %s, %d points", c.name, w.table.Name, w.interval, w.n)
		}
		if !w.start.Equal(alignDown(now.Add(-c.rng), resolution(w.table))) || w.end().After(now) {
			t.Errorf("%s: from %s to %s", c.name, w.start, w.end())
		}
	}
	// Without a time axis, the coarsest table whose buckets cover the range exactly.
	hour := alignDown(now, time.Hour)
	for _, c := range []struct {
		name       string
		start, end time.Time
		oldest     map[string]time.Time
		table      string
	}{
		{"6h on whole hours", hour.Add(-6 * time.Hour), hour, full, "flows_1h"},
		{"6h on whole hours, flows_1h from 3h ago", hour.Add(-6 * time.Hour), hour, map[string]time.Time{
			"flows": full["flows"], "flows_1m": full["flows_1m"], "flows_5m": full["flows_5m"], "flows_1h": hour.Add(-3 * time.Hour)}, "flows_5m"},
		{"6h on 5 minutes", hour.Add(-6*time.Hour + 5*time.Minute), hour.Add(5 * time.Minute), full, "flows_5m"},
		{"6h on minutes", hour.Add(-6*time.Hour + time.Minute), hour.Add(time.Minute), full, "flows_1m"},
		{"6h to now", now.Add(-6 * time.Hour), now, full, "flows_5m"},
		{"30 min on whole hours", hour.Add(-30 * time.Minute), hour, full, "flows_5m"},
		{"6h on whole hours, no state: as for 20 points", hour.Add(-6 * time.Hour), hour, map[string]time.Time{}, "flows_5m"},
	} {
		w := chooseWhole(cat, c.oldest, c.start, c.end, 20, false, false)
		if w.table.Name != c.table {
			t.Errorf("%s: %s", c.name, w.table.Name)
		}
		if c.name != "6h to now" { // edges on whole buckets
			if !w.start.Equal(c.start) || !w.end().Equal(c.end) {
				t.Errorf("%s: from %s to %s", c.name, w.start, w.end())
			}
		}
	}
	if w := chooseWhole(cat, full, hour.Add(-6*time.Hour), hour, 20, true, false); w.table.Name != "flows" {
		t.Errorf("flows only: %s", w.table.Name)
	}
	// The previous period moves to a coarser table whose resolution divides the interval
	// when the chosen one does not reach back.
	w := choose(cat, full, now.Add(-6*24*time.Hour), now, 2500, false, false) // flows_1m, 3 min
	p := previousWindow(cat, full, w, 7*24*time.Hour, false, false)
	if w.table.Name != "flows_1m" || p.table.Name != "flows" || !p.start.Equal(w.start.Add(-7*24*time.Hour)) || p.n != w.n {
		t.Errorf("previous of %s/%s: %s from %s", w.table.Name, w.interval, p.table.Name, p.start)
	}
	w = choose(cat, full, now.Add(-6*time.Hour), now, 72, false, false) // flows_5m
	if p := previousWindow(cat, full, w, 24*time.Hour, false, false); p.table.Name != "flows_5m" {
		t.Errorf("previous day on %s", p.table.Name)
	}
}

func TestPreviousPeriod(t *testing.T) {
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		rng   time.Duration
		shift time.Duration
		name  string
	}{
		{time.Hour, time.Hour, "hour"},
		{2 * time.Hour, 24 * time.Hour, "day"},
		{3 * 24 * time.Hour, 7 * 24 * time.Hour, "week"},
		{3 * 7 * 24 * time.Hour, 28 * 24 * time.Hour, "4 weeks"},
		{10 * 7 * 24 * time.Hour, 366 * 24 * time.Hour, "year"}, // 2023-03-01 to 2024-03-01 holds 29 February
	} {
		shift, name := previousPeriod(start, start.Add(c.rng))
		if shift != c.shift || name != c.name {
			t.Errorf("%s: %s %s", c.rng, shift, name)
		}
	}
}

func TestStats(t *testing.T) {
	st := statsOf([]float64{0, 3, 0, 1, 2})
	if st.min != 1 || st.max != 3 || st.avg != 1.2 || st.last != 2 || st.sum != 6 || st.p95 != 2.8 {
		t.Errorf("%+v", st)
	}
	if st := statsOf([]float64{0, 0}); st.min != 0 || st.p95 != 0 {
		t.Errorf("%+v", st)
	}
	if st := statsOf([]float64{5}); st.min != 5 || st.p95 != 5 || st.last != 5 {
		t.Errorf("%+v", st)
	}
}

func TestClassify(t *testing.T) {
	for msg, kind := range map[string]string{
		"Code: 159. DB::Exception: Timeout exceeded: elapsed 30.1 seconds, maximum: 30. (TIMEOUT_EXCEEDED)":                   EngineTimeout,
		"clickhouse: HTTP 500, code 241: Code: 241. DB::Exception: Memory limit (for query) exceeded (MEMORY_LIMIT_EXCEEDED)": EngineMemory,
		"Code: 60. DB::Exception: Unknown table expression identifier 'flowzero.flows'. (UNKNOWN_TABLE)":                      EngineFailed,
	} {
		var ee *EngineError
		if err := classify(errors.New(msg)); !errors.As(err, &ee) || ee.Kind != kind {
			t.Errorf("%s: %v", msg, err)
		}
	}
	var ee *EngineError
	if err := classify(fmt.Errorf("x: %w", context.DeadlineExceeded)); !errors.As(err, &ee) || ee.Kind != EngineTimeout {
		t.Errorf("deadline: %v", err)
	}
}

func TestValidate(t *testing.T) {
	cat := testCatalog(t)
	cfg := DefaultConfiguration()
	now := testutil.Now()
	ok := Common{Start: now.Add(-time.Hour), End: now}
	for _, c := range []struct {
		change func(*Common)
		field  string
		msg    string
	}{
		{func(c *Common) { c.Start = time.Time{} }, "start", "missing (an RFC 3339 time)"},
		{func(c *Common) { c.End = c.Start }, "end", "must be after start"},
		{func(c *Common) { c.Start = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC) }, "start", "1960-01-01T00:00:00Z is out of the range of stored times (1970 to 2105)"},
		{func(c *Common) { c.Dimensions = []string{"Foo"} }, "dimensions[0]", `unknown column "Foo"`},
		{func(c *Common) { c.Dimensions = []string{"SrcAS", "srcas"} }, "dimensions[1]", "SrcAS is given twice"},
		{func(c *Common) { c.Dimensions = []string{"Bytes"} }, "dimensions[0]", "Bytes cannot be a dimension"},
		{func(c *Common) { c.Dimensions = make([]string, 11) }, "dimensions", "takes 0 to 10 columns, not 11"},
		{func(c *Common) { c.Limit = 51 }, "limit", "must be in 1..50, not 51"},
		{func(c *Common) { c.Limit = -1 }, "limit", "must be in 1..50, not -1"},
		{func(c *Common) { c.TopBy = "min" }, "topBy", `must be avg, max, last or p95, not "min"`},
		{func(c *Common) { c.Units = "bps" }, "units", `must be one of l3bps, l2bps, pps, fps, inl2%, outl2%, not "bps"`},
		{func(c *Common) { c.Truncate4 = 33 }, "truncate4", "must be in 1..32 (0 for no truncation), not 33"},
		{func(c *Common) { c.Truncate6 = -1 }, "truncate6", "must be in 1..128 (0 for no truncation), not -1"},
		{func(c *Common) { c.Table = "flows_1m" }, "table", `must be auto or flows, not "flows_1m"`},
	} {
		r := ok
		c.change(&r)
		_, err := r.validate(cat, cfg, 0, MaxDimensions)
		var re *RequestError
		if !errors.As(err, &re) || re.Field != c.field || re.Message != c.msg {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	r := ok
	r.Filter = "SrcAS = "
	var fe *filter.Error
	if _, err := r.validate(cat, cfg, 0, MaxDimensions); !errors.As(err, &fe) || fe.Position.Offset != 8 {
		t.Errorf("filter: %v", err)
	}
	c, err := ok.validate(cat, cfg, 0, MaxDimensions)
	if err != nil || c.limit != 10 || c.topBy != TopByAvg || c.units != UnitL3bps || c.t4 != 32 || c.t6 != 128 || c.forceFlows {
		t.Errorf("defaults %+v, %v", c, err)
	}
	s, _ := New(cfg, cat, &fakeEngine{}, testutil.Clock(), quietLogger())
	if _, err := s.Sankey(context.Background(), SankeyRequest{Common{Start: ok.Start, End: ok.End, Dimensions: []string{"SrcAS"}}}); err == nil ||
		err.Error() != "dimensions: takes 2 to 4 columns, not 1" {
		t.Errorf("sankey: %v", err)
	}
	if _, err := s.Line(context.Background(), LineRequest{Common: ok, Points: 2001}); err == nil || err.Error() != "points: must be in 5..2000, not 2001" {
		t.Errorf("line: %v", err)
	}
	if _, err := s.Flows(context.Background(), FlowsRequest{Start: ok.Start, End: ok.End, Limit: 10001}); err == nil ||
		err.Error() != "limit: must be in 1..10000, not 10001" {
		t.Errorf("flows: %v", err)
	}
	if _, err := s.Flows(context.Background(), FlowsRequest{Start: ok.Start, End: ok.End, Columns: []string{"x"}}); err == nil ||
		err.Error() != `columns[0]: unknown column "x"` {
		t.Errorf("flows: %v", err)
	}
}

// fakeEngine answers every query with answer (or err) and records the statements.
type fakeEngine struct {
	mu     sync.Mutex
	answer string
	tables string // the answer to the tables' oldest rows, when not the default

	err     error
	queries []string
}

func (f *fakeEngine) Query(_ context.Context, sql, _ string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, sql)
	if f.err != nil {
		return nil, f.err
	}
	if strings.Contains(sql, "min(TimeReceived)") && f.tables != "" {
		return []byte(f.tables), nil
	}
	if strings.Contains(sql, "min(TimeReceived)") {
		return []byte(`{"meta":[{"name":"name","type":"String"},{"name":"oldest","type":"UInt32"},{"name":"n","type":"UInt64"},{"name":"counted","type":"UInt32"},{"name":"nc","type":"UInt64"}],"data":[["flows",1,1,1,1],["flows_1m",1,1,1,1]]}`), nil
	}
	return []byte(f.answer), nil
}

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestRun checks the settings every statement carries, the tables' state cached for
// TablesRefresh, and kept when the engine fails.
func TestRun(t *testing.T) {
	eng := &fakeEngine{answer: `{"meta":[{"name":"e","type":"String"}],"data":[["192.0.2.1"]]}`}
	clk := &stepClock{t: testutil.Now()}
	cfg := DefaultConfiguration()
	s, err := New(cfg, testCatalog(t), eng, clk, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Exporters(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exporters(ctx); err != nil {
		t.Fatal(err)
	}
	// The tables, the protocols, then two queries.
	if len(eng.queries) != 4 {
		t.Fatalf("%d statements: %q", len(eng.queries), eng.queries)
	}
	for _, q := range eng.queries {
		if !strings.HasSuffix(q, "\nSETTINGS max_execution_time = 30, max_memory_usage = 2147483648, "+
			"output_format_json_quote_64bit_integers = 0, output_format_json_quote_denormals = 0\nFORMAT JSONCompact") {
			t.Errorf("statement without its settings: %s", q)
		}
	}
	clk.add(cfg.TablesRefresh)
	eng.err = errors.New("Code: 159. (TIMEOUT_EXCEEDED)")
	_, err = s.Exporters(ctx)
	var ee *EngineError
	if !errors.As(err, &ee) || ee.Kind != EngineTimeout {
		t.Errorf("error %v", err)
	}
	if tables, err := s.Tables(ctx); err != nil || tables[1].Oldest == nil {
		t.Errorf("tables not kept: %v %v", tables, err)
	}
	eng.err = nil
	eng.answer = `{"meta": [{"name": "e", "type": "String"}], "data": [[1, 2]]}`
	if _, err := s.Exporters(ctx); err == nil || !strings.Contains(err.Error(), "row 0 has 2 values for 1 columns") {
		t.Errorf("bad answer: %v", err)
	}
	eng.answer = `not json`
	if _, err := s.Exporters(ctx); err == nil || !strings.Contains(err.Error(), "reading the engine's answer") {
		t.Errorf("bad answer: %v", err)
	}
}

// TestTablesEmpty checks that the state of tables all empty is read again within
// tablesRetry, not TablesRefresh: a collector's first flows are seen early.
func TestTablesEmpty(t *testing.T) {
	eng := &fakeEngine{answer: `{"meta":[],"data":[]}`, tables: `{"meta":[{"name":"name","type":"String"},{"name":"oldest","type":"UInt32"},{"name":"n","type":"UInt64"},{"name":"counted","type":"UInt32"},{"name":"nc","type":"UInt64"}],"data":[["flows",0,0,0,0],["flows_1m",0,0,0,0]]}`}
	clk := &stepClock{t: testutil.Now()}
	s, err := New(DefaultConfiguration(), testCatalog(t), eng, clk, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Tables(ctx); err != nil {
		t.Fatal(err)
	}
	n := len(eng.queries)
	if _, err := s.Tables(ctx); err != nil || len(eng.queries) != n {
		t.Fatalf("read again at once: %d statements, %v", len(eng.queries)-n, err)
	}
	clk.add(tablesRetry)
	if _, err := s.Tables(ctx); err != nil || len(eng.queries) == n {
		t.Fatalf("not read again after %s: %v", tablesRetry, err)
	}
}

// fakeValues proposes fixed values.
type fakeValues struct{ asked []string }

func (f *fakeValues) Values(_ context.Context, col *catalog.Column, prefix string, limit int) ([]Completion, error) {
	f.asked = append(f.asked, col.Name+":"+prefix)
	if col.Name == "InIfDescription" {
		return []Completion{{Label: `transit: "Cogent"`, Kind: "value", Apply: applyValue(col, `transit: "Cogent"`)}}, nil
	}
	return nil, errors.New("no values")
}

func TestCompleteValues(t *testing.T) {
	cat := testCatalog(t)
	vs := &fakeValues{}
	ctx := context.Background()
	show := func(r CompleteResult) string {
		var out []string
		for _, c := range r.Completions {
			out = append(out, c.Kind+":"+c.Apply)
		}
		return strings.TrimSpace(fmt.Sprintf("%d-%d %s", r.From, r.To, strings.Join(out, " ")))
	}
	for _, c := range []struct{ text, want string }{
		{`InIfDescription = "tr`, `18-21 value:"transit: \"Cogent\""`},
		{"InIfBoundary != ex", "16-18 value:external"},
		{"Proto = ", "8-8 value:TCP value:UDP"},
		{"SrcAS IN (AS1, ", "15-15"},
		{"SrcAS ", "6-6 operator:= operator:!= operator:< operator:<= operator:> operator:>= operator:IN ( operator:NOTIN ("},
		{"Src", "0-3 value:SrcAddr value:SrcAS value:SrcPort value:SrcNetMask value:SrcNetName"},
		{"", "0-0"},
	} {
		r := Complete(ctx, cat, vs, c.text, len(c.text))
		got := show(r)
		if c.text == "Src" {
			// Columns: only check the first ones and the kind.
			if !strings.HasPrefix(got, "0-3 column:SrcAddr column:SrcAS") {
				t.Errorf("%q: %s", c.text, got)
			}
			continue
		}
		if c.text == "" {
			if len(r.Completions) != len(cat.Columns())+1 || r.Completions[len(r.Completions)-1].Apply != "NOT" {
				t.Errorf("empty: %d completions", len(r.Completions))
			}
			continue
		}
		if got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.text, got, c.want)
		}
	}
	if strings.Join(vs.asked, ",") != "InIfDescription:tr,SrcAS:" {
		t.Errorf("asked %v", vs.asked)
	}
}

// TestCountedRows: rows an aggregated table got before it had its Flows column count no
// flows. Flows per second read a table from its oldest row that counts flows, and the table
// route gives no flow count for a range its table did not count.
func TestCountedRows(t *testing.T) {
	now := testutil.Now().Truncate(time.Hour)
	day, hour := now.Add(-24*time.Hour).Unix(), now.Add(-time.Hour).Unix()
	eng := &fakeEngine{
		tables: fmt.Sprintf(`{"meta":[{"name":"name","type":"String"},{"name":"oldest","type":"UInt32"},{"name":"n","type":"UInt64"},`+
			`{"name":"counted","type":"UInt32"},{"name":"nc","type":"UInt64"}],"data":[["flows",%[1]d,1,%[1]d,1],["flows_1m",%[1]d,1,%[2]d,1]]}`, day, hour),
		answer: `{"meta":[{"name":"axis","type":"UInt8"},{"name":"b","type":"Int64"},{"name":"dims","type":"Array(String)"},` +
			`{"name":"v","type":"Float64"},{"name":"bytes","type":"UInt64"},{"name":"packets","type":"UInt64"},{"name":"flows","type":"Nullable(UInt64)"}],` +
			`"data":[[1,0,["AS64500"],8000,1000,10,3]]}`,
	}
	s, err := New(DefaultConfiguration(), testCatalog(t), eng, &stepClock{t: now}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		since time.Duration
		units Unit
		table string
		flows bool
	}{
		{6 * time.Hour, UnitL3bps, "flows_1m", false},
		{6 * time.Hour, UnitFps, "flows", true},
		{30 * time.Minute, UnitFps, "flows_1m", true},
		{30 * time.Minute, UnitL3bps, "flows_1m", true},
	} {
		req := TableRequest{Common: Common{Start: now.Add(-c.since), End: now, Units: c.units, Dimensions: []string{"SrcAS"}}, Points: 30}
		res, err := s.Table(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Table != c.table || len(res.Rows) != 1 || (res.Rows[0].Flows != nil) != c.flows {
			t.Errorf("%s in %s over %s: table %s, rows %+v, want %s with flows counted: %v", c.units, "table", c.since, res.Table, res.Rows, c.table, c.flows)
		}
		line, err := s.Line(ctx, LineRequest{Common: req.Common, Points: 30})
		if err != nil {
			t.Fatal(err)
		}
		if line.Table != c.table {
			t.Errorf("%s in line over %s: table %s, want %s", c.units, c.since, line.Table, c.table)
		}
	}
}

// TestSplit checks how a range without a time axis is cut over the tables: whole buckets
// of the coarsest table that holds them, the edges from the finer ones, and parts that
// follow each other from start to end.
func TestSplit(t *testing.T) {
	cat := testCatalog(t)
	now := time.Date(2026, 11, 26, 10, 7, 23, 0, time.UTC)
	hour := alignDown(now, time.Hour)
	full := map[string]time.Time{
		"flows": now.Add(-15 * 24 * time.Hour), "flows_1m": now.Add(-7 * 24 * time.Hour),
		"flows_5m": now.Add(-90 * 24 * time.Hour), "flows_1h": now.Add(-365 * 24 * time.Hour),
	}
	with := func(table string, oldest time.Time) map[string]time.Time {
		m := maps.Clone(full)
		m[table] = oldest
		return m
	}
	withoutCount := testCatalog(t)
	for i := range withoutCount.Aggregated {
		withoutCount.Aggregated[i].FlowCount = false
	}
	at := func(d time.Duration) time.Time { return hour.Add(d) }
	day := now.Add(-24 * time.Hour) // 10:07:23 the day before
	young := maps.Clone(full)       // the finer tables' TTL has dropped the start
	young["flows"], young["flows_1m"] = at(-2*time.Hour), at(-2*time.Hour)
	type p struct {
		table      string
		start, end time.Time
	}
	for _, c := range []struct {
		name       string
		cat        *catalog.Catalog
		oldest     map[string]time.Time
		start, end time.Time
		flowsOnly  bool
		needCount  bool
		want       []p
	}{
		{"whole hours", cat, full, at(-6 * time.Hour), hour, false, false, []p{{"flows_1h", at(-6 * time.Hour), hour}}},
		{"24 h to now", cat, full, day, now, false, false, []p{
			{"flows", day, day.Add(37 * time.Second)},
			{"flows_1m", day.Add(37 * time.Second), at(-24*time.Hour + 10*time.Minute)},
			{"flows_5m", at(-24*time.Hour + 10*time.Minute), at(-23 * time.Hour)},
			{"flows_1h", at(-23 * time.Hour), hour},
			{"flows_5m", hour, at(5 * time.Minute)},
			{"flows_1m", at(5 * time.Minute), at(7 * time.Minute)},
			{"flows", at(7 * time.Minute), now},
		}},
		{"inside one hour", cat, full, at(12*time.Minute + 30*time.Second), at(48*time.Minute + 10*time.Second), false, false, []p{
			{"flows", at(12*time.Minute + 30*time.Second), at(13 * time.Minute)},
			{"flows_1m", at(13 * time.Minute), at(15 * time.Minute)},
			{"flows_5m", at(15 * time.Minute), at(45 * time.Minute)},
			{"flows_1m", at(45 * time.Minute), at(48 * time.Minute)},
			{"flows", at(48 * time.Minute), at(48*time.Minute + 10*time.Second)},
		}},
		{"inside one minute", cat, full, at(12*time.Minute + 30*time.Second), at(12*time.Minute + 40*time.Second), false, false, []p{
			{"flows", at(12*time.Minute + 30*time.Second), at(12*time.Minute + 40*time.Second)},
		}},
		{"flows_1h from 3 h ago", cat, with("flows_1h", at(-3*time.Hour)), at(-6 * time.Hour), hour, false, false, []p{
			{"flows_5m", at(-6 * time.Hour), at(-3 * time.Hour)},
			{"flows_1h", at(-3 * time.Hour), hour},
		}},
		{"flows_1m and flows younger than the start: flows_5m's bucket", cat, young, at(-6*time.Hour + 7*time.Minute), hour, false, false, []p{
			{"flows_5m", at(-6*time.Hour + 5*time.Minute), at(-5 * time.Hour)},
			{"flows_1h", at(-5 * time.Hour), hour},
		}},
		{"before any data", cat, map[string]time.Time{"flows": at(-90 * time.Second), "flows_1m": at(-2 * time.Minute), "flows_5m": at(-5 * time.Minute), "flows_1h": at(-time.Hour)},
			at(-2 * time.Hour), at(30 * time.Second), false, false, []p{
				{"flows", at(-2 * time.Hour), at(-time.Hour)},
				{"flows_1h", at(-time.Hour), hour},
				{"flows", hour, at(30 * time.Second)},
			}},
		{"flows only", cat, full, at(-6 * time.Hour), hour, true, false, []p{{"flows", at(-6 * time.Hour), hour}}},
		{"counting flows, without Flows", withoutCount, full, at(-6 * time.Hour), hour, false, true, []p{{"flows", at(-6 * time.Hour), hour}}},
		{"no state", cat, map[string]time.Time{}, at(-6 * time.Hour), hour, false, false, []p{{"flows", at(-6 * time.Hour), hour}}},
	} {
		want := c.want
		var got []p
		for _, x := range split(c.cat, c.oldest, c.start, c.end, c.flowsOnly, c.needCount) {
			got = append(got, p{x.table.Name, x.start, x.end})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, want)
		}
	}
}

// TestRequestsWithinQuerySize: what the API accepts makes statements the engine parses.
// A flows request names each column once and at most the catalog's columns (20,000 ×
// "Bytes" made a 478 kB statement); a filter whose statement would pass the engine's
// max_query_size (a 60 kB IN list repeated per axis and period made 781 kB) is refused
// naming the filter, before the engine sees it.
func TestRequestsWithinQuerySize(t *testing.T) {
	eng := &fakeEngine{answer: `{"meta":[],"data":[]}`}
	cat := testCatalog(t)
	s, err := New(DefaultConfiguration(), cat, eng, testutil.Clock(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := testutil.Now()
	many := make([]string, 20000)
	for i := range many {
		many[i] = "Bytes"
	}
	for _, c := range []struct {
		columns    []string
		field, msg string
	}{
		{many, "columns", fmt.Sprintf("20000 columns, at most %d", len(cat.Columns()))},
		{[]string{"SrcAS", "Bytes", "bytes"}, "columns[2]", "Bytes is already columns[1]"},
	} {
		_, err := s.Flows(ctx, FlowsRequest{Start: now.Add(-time.Hour), End: now, Columns: c.columns})
		var re *RequestError
		if !errors.As(err, &re) || re.Field != c.field || !strings.Contains(re.Message, c.msg) {
			t.Errorf("%d columns: %v, want %s: %s", len(c.columns), err, c.field, c.msg)
		}
	}
	for _, q := range eng.queries {
		if strings.Contains(q, "Bytes AS c1") {
			t.Errorf("a refused request reached the engine: %.200s", q)
		}
	}
	// Every column once is a statement well within the bound.
	var all []string
	for _, c := range cat.Columns() {
		all = append(all, c.Name)
	}
	eng.queries = nil
	if _, err := s.Flows(ctx, FlowsRequest{Start: now.Add(-time.Hour), End: now, Columns: all}); err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			t.Errorf("every column: %v", err)
		}
	}
	for _, q := range eng.queries {
		if len(q) > MaxStatementBytes/4 {
			t.Errorf("every column makes a %d-byte statement", len(q))
		}
	}

	f := "SrcAddr IN (" + strings.TrimSuffix(strings.Repeat("1.1.1.1,", 7500), ",") + ")"
	eng.queries = nil
	_, err = s.Line(ctx, LineRequest{Common: Common{Start: now.Add(-time.Hour), End: now, Filter: f},
		Bidirectional: true, PreviousPeriod: true})
	var re *RequestError
	if !errors.As(err, &re) || re.Field != "filter" || !strings.Contains(re.Message, "max_query_size") {
		t.Errorf("%d-byte filter: %v, want an error on filter", len(f), err)
	}
	for _, q := range eng.queries {
		if len(q) > MaxStatementBytes {
			t.Errorf("a %d-byte statement reached the engine", len(q))
		}
	}
}
