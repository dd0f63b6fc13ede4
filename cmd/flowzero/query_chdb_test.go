//go:build chdb

package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowzero/app"
	"flowzero/demo"
	"flowzero/internal/testutil"
)

// TestQueryCLI runs `flowzero query` end to end against a collector storing the demo
// exporters' flows in its embedded store: top, series, sankey and flows in each format, and
// `store query` through the collector's API while it holds the store; then, the collector
// stopped, the same commands reading the store directly.
func TestQueryCLI(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "chdb")
	path := writeConfig(t, fmt.Sprintf(`collector:
  listeners:
    - {protocol: netflow, address: "127.0.0.1:0", workers: 1}
    - {protocol: sflow, address: "127.0.0.1:0", workers: 1}
  http: {listen: "127.0.0.1:0"}
  batch-interval: 20ms
outputs:
  file: {enabled: false}
  store:
    enabled: true
    embedded: {path: %s, flush-interval: 100ms, max-threads: 2, pre-aggregate-interval: 0s}
query:
  cache-duration: 0s
`, data))
	cfg, err := app.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Enrich.Exporters = app.DemoMetadata()
	a, err := app.New(cfg, app.Dependencies{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: testutil.Clock(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	d := demo.DefaultConfiguration()
	d.FlowsPerSecond = 300
	a.Demo = &d
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			a.Stop()
		}
	}()
	server := "http://" + a.Collector().HTTPAddr()
	cli := func(args ...string) (string, error) {
		t.Helper()
		var out, errb bytes.Buffer
		err := runQueryAt(args, &out, &errb, testutil.Now())
		if err != nil {
			return out.String(), fmt.Errorf("%v: %w (%s)", args, err, errb.String())
		}
		return out.String(), nil
	}
	// Wait for flows in the aggregated table the top of the last 10 minutes reads.
	var csvTop string
	testutil.WaitUntil(t, "query top to list the demo's source AS", func() bool {
		out, err := cli("top", "--config", path, "--server", server, "--by", "SrcAS,DstAS", "--since", "10m", "--limit", "5", "--format", "csv")
		if err != nil {
			t.Fatal(err)
		}
		csvTop = out
		return strings.Count(out, "\n") >= 3
	})
	recs, err := csv.NewReader(strings.NewReader(csvTop)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(recs[0], ","); got != "SrcAS,DstAS,Avg bps,Max bps,P95 bps,Share,Bytes,Packets,Flows" {
		t.Errorf("csv header %s", got)
	}
	var share float64
	for _, r := range recs[1:] {
		if r[8] == "" {
			t.Errorf("row %v: no flow count from a table that counted every flow", r)
		}
		if !strings.HasPrefix(r[0], "AS") && r[0] != "Other" {
			t.Errorf("row %v: SrcAS %q", r, r[0])
		}
		for _, c := range r[2:] {
			if _, err := strconv.ParseFloat(c, 64); err != nil {
				t.Errorf("row %v: %q is not a number", r, c)
			}
		}
		s, _ := strconv.ParseFloat(r[5], 64)
		share += s
	}
	if share < 99 || share > 101 {
		t.Errorf("shares sum to %.1f %%:\n%s", share, csvTop)
	}

	// The table format: aligned, SI units, the explanation first.
	out, err := cli("top", "--config", path, "--server", server, "--by", "SrcAS", "--since", "10m", "--unit", "pps", "--explain")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "-- table: ") || !strings.Contains(lines[0], ", interval: ") || !strings.Contains(out, "\nSELECT") {
		t.Errorf("explain:\n%s", out)
	}
	head := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "SrcAS") {
			head = i
		}
	}
	if head < 0 || head+1 >= len(lines) || !strings.Contains(lines[head], "Avg pps") {
		t.Fatalf("table:\n%s", out)
	}
	// Numbers are right-aligned: every row ends at the header's end.
	for _, l := range lines[head+1:] {
		if len(l) != len(lines[head]) {
			t.Errorf("row %q not aligned with %q", l, lines[head])
		}
	}

	// Series: one column per row, JSON as the API answers.
	// Whole intervals only: 10 s ones on the flows table, the first complete one soon.
	series := []string{"series", "--config", path, "--server", server, "--by", "Proto", "--since", "2m", "--points", "12", "--table", "flows"}
	var line struct {
		Table  string
		T      []time.Time
		Rows   [][]string
		Points [][]float64
	}
	testutil.WaitUntil(t, "a series with rows", func() bool {
		out, err = cli(append(series, "--format", "json")...)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &line); err != nil || len(line.T) < 5 {
			t.Fatalf("series json: %v\n%s", err, out)
		}
		return len(line.Rows) > 0
	})
	out, err = cli(series...)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != len(line.T)+1 || !strings.HasPrefix(lines[0], "Time") ||
		!strings.Contains(lines[0], strings.Join(line.Rows[0], " / ")) {
		t.Errorf("series table (%d times):\n%s", len(line.T), out)
	}

	out, err = cli("sankey", "--config", path, "--server", server, "--by", "SrcAS,Proto,DstAS", "--since", "10m", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "SrcAS,Proto,DstAS,Avg bps\n") || strings.Count(out, "\n") < 2 {
		t.Errorf("sankey:\n%s", out)
	}

	out, err = cli("flows", "--config", path, "--server", server, "--filter", "Proto = UDP OR Proto = TCP", "--limit", "7", "--columns", "TimeReceived,SrcAddr,DstAddr,Proto,Bytes")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 8 || !strings.HasPrefix(lines[0], "TimeReceived") {
		t.Errorf("flows:\n%s", out)
	}
	// A bad filter names the position.
	if _, err := cli("flows", "--config", path, "--server", server, "--filter", "SrcPort = 70000"); err == nil ||
		!strings.Contains(err.Error(), "line 1, column") {
		t.Errorf("bad filter: %v", err)
	}

	// store query while the collector holds the store: through its API, SELECT only.
	var sq, sqErr bytes.Buffer
	if code := run([]string{"store", "query", "--config", path, "--server", server, "--format", "TSV", "SELECT count() > 0 FROM flowzero.flows"}, &sq, &sqErr); code != 0 || sq.String() != "1\n" {
		t.Errorf("store query through the collector: code %d %q %s", code, sq.String(), sqErr.String())
	}
	sq.Reset()
	sqErr.Reset()
	if code := run([]string{"store", "query", "--config", path, "--server", server, "DROP TABLE flowzero.flows"}, &sq, &sqErr); code == 0 ||
		!strings.Contains(sqErr.String(), "only SELECT") {
		t.Errorf("DROP through the collector: code %d %s", code, sqErr.String())
	}

	// The collector stopped: the CLI opens the store itself.
	before, err := cli("flows", "--config", path, "--server", server, "--limit", "3", "--format", "csv", "--columns", "TimeReceived,SrcAddr,Bytes")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	// The flows table: its 3 s intervals hold flows whatever the minute (flows_1m's only
	// minute may still be partial, which a range leaves out).
	out, err = cli("top", "--config", path, "--server", server, "--by", "SrcAS", "--since", "10m", "--table", "flows", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "\n") < 2 {
		t.Errorf("top on the store read directly:\n%s", out)
	}
	after, err := cli("flows", "--config", path, "--server", server, "--limit", "3", "--format", "csv", "--columns", "TimeReceived,SrcAddr,Bytes")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(before, "\n") != 4 || strings.Count(after, "\n") != 4 {
		t.Errorf("flows read directly:\n%s\nthrough the collector:\n%s", after, before)
	}
}
