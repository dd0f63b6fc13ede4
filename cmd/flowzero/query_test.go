package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"flowzero/app"
	"flowzero/internal/testutil"
	"flowzero/query"
)

func TestParseWhen(t *testing.T) {
	now := testutil.Now().Truncate(time.Second)
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"now", now},
		{"NOW", now},
		{"1h", now.Add(-time.Hour)},
		{"90m", now.Add(-90 * time.Minute)},
		{"1h30m", now.Add(-90 * time.Minute)},
		{"7d", now.Add(-7 * 24 * time.Hour)},
		{"2w", now.Add(-14 * 24 * time.Hour)},
		{"1d12h", now.Add(-36 * time.Hour)},
		{"1.5d", now.Add(-36 * time.Hour)},
		{"2026-11-26T10:00:00Z", time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)},
		{"2026-11-26T10:00:00+01:00", time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)},
		{"2026-11-26T10:00", time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)},
		{"2026-11-26 10:00:05", time.Date(2026, 11, 26, 10, 0, 5, 0, time.UTC)},
		{"2026-11-26", time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)},
	} {
		got, err := parseWhen(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseWhen(%q) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "1x", "h", "-1h", "0s", "2026-13-01", "1h-"} {
		if got, err := parseWhen(bad, now); err == nil {
			t.Errorf("parseWhen(%q) = %s, want an error", bad, got)
		}
	}
}

func TestSI(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{0, "bps", "0 bps"},
		{7, "", "7"},
		{999, "pps", "999 pps"},
		{999.6, "pps", "1.00 kpps"},
		{1234, "bps", "1.23 kbps"},
		{12345, "bps", "12.3 kbps"},
		{123456, "bps", "123 kbps"},
		{1.5e9, "bps", "1.50 Gbps"},
		{2.5e15, "B", "2.50 PB"},
		{0.25, "fps", "0.25 fps"},
	} {
		if got := si(c.v, c.unit); got != c.want {
			t.Errorf("si(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

func TestTopTable(t *testing.T) {
	flows := int64(1200)
	res := &query.TableResult{Rows: []query.TableRow{
		{Dimensions: []string{"AS64500: ALPHA", "TCP"}, Bytes: 3e9, Packets: 2e6, Flows: &flows, Avg: 3e6, Max: 9e6, P95: 8.5e6},
		{Dimensions: []string{"Other", "Other"}, Bytes: 1e9, Packets: 1e6, Avg: 1e6, Max: 2e6, P95: 1.9e6},
	}}
	c := query.Common{Dimensions: []string{"SrcAS", "Proto"}, Units: query.UnitL3bps}
	var out bytes.Buffer
	if err := topTable(res, c, false).write(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", out.String())
	}
	// Every line as long as the header: text left, numbers right.
	for _, l := range lines {
		if len(l) != len(lines[0]) {
			t.Errorf("not aligned:\n%s", out.String())
			break
		}
	}
	for _, s := range []string{"AS64500: ALPHA", "3.00 Mbps", "9.00 Mbps", "75.0 %", "3.00 GB", "2.00 M", "1.20 k"} {
		if !strings.Contains(lines[1], s) {
			t.Errorf("row %q lacks %q", lines[1], s)
		}
	}
	if !strings.HasSuffix(lines[2], "  -") || !strings.HasPrefix(lines[2], "Other ") {
		t.Errorf("Other row %q: no flow count is -", lines[2])
	}
	out.Reset()
	if err := topTable(res, c, true).writeCSV(&out); err != nil {
		t.Fatal(err)
	}
	if want := "SrcAS,Proto,Avg bps,Max bps,P95 bps,Share,Bytes,Packets,Flows\n" +
		"AS64500: ALPHA,TCP,3000000,9000000,8500000,75.0,3000000000,2000000,1200\n" +
		"Other,Other,1000000,2000000,1900000,25.0,1000000000,1000000,\n"; out.String() != want {
		t.Errorf("csv:\n%s\nwant\n%s", out.String(), want)
	}
}

func TestSeriesTable(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	res := &query.LineResult{Time: []time.Time{t0, t0.Add(time.Minute)}, Rows: [][]string{{"TCP"}, {}}, Axis: []int{1, 3},
		Points: [][]float64{{1500, 2500}, {100, 0}}, AxisNames: map[int]string{1: "Direct", 3: "Previous hour"}}
	var out bytes.Buffer
	if err := seriesTable(res, query.Common{Units: query.UnitPps}, false).write(&out); err != nil {
		t.Fatal(err)
	}
	want := "Time                       TCP  Previous hour: Total\n" +
		"2026-11-26 10:00:00  1.50 kpps               100 pps\n" +
		"2026-11-26 10:01:00  2.50 kpps                 0 pps\n"
	if out.String() != want {
		t.Errorf("series:\n%s\nwant\n%s", out.String(), want)
	}
}

func TestFlowsTable(t *testing.T) {
	res := &query.FlowsResult{Columns: []string{"TimeReceived", "SrcAddr", "Bytes", "DstASPath"},
		Rows: [][]any{{"2026-11-26T10:00:00Z", "192.0.2.1", float64(1500), []any{float64(64500), float64(1299)}}, {"2026-11-26T10:00:00Z", "2001:db8::1", float64(40), nil}}}
	var out bytes.Buffer
	if err := flowsTable(res, false).write(&out); err != nil {
		t.Fatal(err)
	}
	want := "TimeReceived          SrcAddr      Bytes  DstASPath\n" +
		"2026-11-26T10:00:00Z  192.0.2.1     1500  64500 1299\n" +
		"2026-11-26T10:00:00Z  2001:db8::1     40\n"
	if out.String() != want {
		t.Errorf("flows:\n%q\nwant\n%q", out.String(), want)
	}
}

// TestQueryServerErrors: the CLI reports the API's errors with their field and position,
// and the server's 503 when it has nothing to query.
func TestQueryServerErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v0/query/config":
			w.Write([]byte(`{}`))
		case "/api/v0/query/table":
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"message": "filter: expected a port, found 70000", "field": "filter",
				"position": map[string]int{"offset": 10, "line": 1, "column": 11}})
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]string{"message": app.NoQueryEngineMessage})
		}
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	err := runQueryAt([]string{"top", "--server", srv.URL, "--by", "SrcAS", "--filter", "SrcPort = 70000"}, &out, &errb, testutil.Now())
	if err == nil || err.Error() != "filter: expected a port, found 70000 (line 1, column 11)" {
		t.Errorf("bad filter: %v", err)
	}
	err = runQueryAt([]string{"flows", "--server", srv.URL}, &out, &errb, testutil.Now())
	if err == nil || err.Error() != app.NoQueryEngineMessage {
		t.Errorf("no engine: %v", err)
	}
	for _, args := range [][]string{
		{"top", "--server", srv.URL, "--since", "yesterday"},
		{"top", "--server", srv.URL, "--since", "now", "--until", "1h"},
		{"top", "--server", srv.URL, "--format", "xml"},
	} {
		if err := runQueryAt(args, &out, &errb, testutil.Now()); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestAlsoRead(t *testing.T) {
	for _, c := range []struct {
		table  string
		tables []string
		want   string
	}{
		{"flows_1m", nil, "flows_1m"},
		{"flows_1m", []string{"flows_1m"}, "flows_1m"},
		{"flows_5m", []string{"flows_5m", "flows_1h", "flows"}, "flows_5m (also read: flows_1h, flows)"},
	} {
		if got := alsoRead(c.table, c.tables); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.table, c.tables, got, c.want)
		}
	}
}
