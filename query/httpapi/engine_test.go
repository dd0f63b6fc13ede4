//go:build chdb

package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/testutil"
	"flowzero/query"
	"flowzero/query/internal/querytest"
)

var theEnv *querytest.Env

func TestMain(m *testing.M) {
	code := m.Run()
	if theEnv != nil {
		theEnv.Close()
	}
	os.Exit(code)
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// TestEngine runs every route over HTTP on the real engine holding the data set, and
// checks the answers against the data set's sums.
func TestEngine(t *testing.T) {
	var err error
	theEnv, err = querytest.Start(testutil.Now().Truncate(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e := theEnv
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := e.Anchor.Add(30 * time.Second)
	// As long as a loaded machine (or faketime, make test-future) needs.
	cfg := query.DefaultConfiguration()
	cfg.Timeout, cfg.CompletionTimeout = 5*time.Minute, 5*time.Minute
	svc, err := query.New(cfg, e.Catalog, e.Engine, fixedClock{now}, log)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(prometheus.NewRegistry(), svc, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	call := func(t *testing.T, method, path, body string, out any) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, data)
		}
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return res
	}
	start, end := e.Anchor.Add(-querytest.Recent), e.Anchor
	rng := fmt.Sprintf(`"start": %q, "end": %q`, start.Format(time.RFC3339), end.Format(time.RFC3339))
	var bytes, external float64
	for _, f := range e.Flows {
		if !f.Time.Before(start) && f.Time.Before(end) {
			bytes += float64(f.Bytes * f.SamplingRate)
			if f.InBoundary == 1 {
				external += float64(f.Bytes * f.SamplingRate)
			}
		}
	}
	near := func(a, b float64) bool { return a > b*(1-1e-9) && a < b*(1+1e-9) }

	t.Run("line", func(t *testing.T) {
		var out query.LineResult
		res := call(t, "POST", "/api/v0/query/line", `{`+rng+`, "dimensions": ["InIfBoundary"], "points": 360, "bidirectional": true, "previousPeriod": true}`, &out)
		if res.Header.Get("X-Flowzero-Table") != "flows_1m" || res.Header.Get("X-Flowzero-Tables") != "flows_1m, flows_1h" ||
			!strings.HasPrefix(res.Header.Get("X-SQL-Query"), "WITH rows AS ( SELECT r1 FROM (   SELECT InIfBoundary AS r1") {
			t.Errorf("headers %v", res.Header)
		}
		var total float64
		for i, r := range out.Rows {
			if out.Axis[i] == 1 {
				total += out.Total[i]
			}
			if out.Axis[i] == 1 && r[0] == "external" && !near(out.Total[i], external) {
				t.Errorf("external: %v bytes, want %v", out.Total[i], external)
			}
		}
		if !near(total, bytes) || out.AxisNames[3] != "Previous day" || len(out.Time) != 360 {
			t.Errorf("total %v bytes, want %v; axes %v", total, bytes, out.AxisNames)
		}
	})
	t.Run("sankey", func(t *testing.T) {
		var out query.SankeyResult
		call(t, "POST", "/api/v0/query/sankey", `{`+rng+`, "dimensions": ["InIfBoundary", "OutIfBoundary"]}`, &out)
		var sum float64
		for _, v := range out.Values {
			sum += v
		}
		if !near(sum, bytes*8/querytest.Recent.Seconds()) || len(out.Links) != 2 || len(out.Nodes) != 4 {
			t.Errorf("sankey %v b/s, want %v; %+v", sum, bytes*8/querytest.Recent.Seconds(), out)
		}
	})
	t.Run("table", func(t *testing.T) {
		var out query.TableResult
		call(t, "POST", "/api/v0/query/table", `{`+rng+`, "dimensions": ["ExporterName"], "table": "flows"}`, &out)
		var sum, flows float64
		for _, r := range out.Rows {
			sum += float64(r.Bytes)
			flows += float64(*r.Flows)
		}
		n := 0
		for _, f := range e.Flows {
			if !f.Time.Before(start) && f.Time.Before(end) {
				n++
			}
		}
		if sum != bytes || int(flows) != n || out.Table != "flows" {
			t.Errorf("table %v bytes %v flows, want %v %d", sum, flows, bytes, n)
		}
	})
	t.Run("flows", func(t *testing.T) {
		var out query.FlowsResult
		call(t, "POST", "/api/v0/query/flows", `{`+rng+`, "filter": "SrcAS = AS64504", "limit": 3, "columns": ["TimeReceived", "SrcAS", "Bytes"]}`, &out)
		if len(out.Rows) != 3 || fmt.Sprint(out.Rows[0]) != fmt.Sprintf("[%s 64504 6000]", end.Add(-time.Second).UTC().Format(time.RFC3339)) {
			t.Errorf("flows %v", out.Rows)
		}
	})
	t.Run("widgets", func(t *testing.T) {
		var rate query.FlowRate
		call(t, "GET", "/api/v0/query/widgets/flow-rate", "", &rate)
		var ex query.Exporters
		call(t, "GET", "/api/v0/query/widgets/exporters", "", &ex)
		var last struct {
			Flow map[string]any `json:"flow"`
		}
		call(t, "GET", "/api/v0/query/widgets/last-flow", "", &last)
		var top query.Top
		call(t, "GET", "/api/v0/query/widgets/top?dimension=ExporterName&filter=Proto+%3D+TCP", "", &top)
		var graph query.LineResult
		call(t, "GET", "/api/v0/query/widgets/graph?points=100&filter=InIfBoundary+%3D+external", "", &graph)
		if rate.Rate != 0.1 || ex.Count != 2 || last.Flow["SrcAS"] != 64504.0 || len(top.Top) != 1 || top.Top[0].Name != "edge1" ||
			top.Top[0].Percent != 100 || graph.Table != "flows_5m" || graph.Interval != 600 {
			t.Errorf("rate %+v, exporters %+v, last %v, top %+v, graph %s/%d", rate, ex, last.Flow["SrcAS"], top, graph.Table, graph.Interval)
		}
	})
	t.Run("filter", func(t *testing.T) {
		var v ValidateResult
		call(t, "POST", "/api/v0/query/filter/validate", `{"filter": "srcas = 64500 and inifname like 'et-%'"}`, &v)
		if !v.Valid || v.Normalized != `SrcAS = AS64500 AND InIfName LIKE "et-%"` {
			t.Errorf("validate %+v", v)
		}
		var c query.CompleteResult
		call(t, "POST", "/api/v0/query/filter/complete", `{"filter": "SrcAS = alp", "offset": 11}`, &c)
		if len(c.Completions) != 1 || c.Completions[0].Label != "AS64500" || c.Completions[0].Detail != "ALPHA-NET" || c.From != 8 {
			t.Errorf("complete %+v", c)
		}
	})
	t.Run("config", func(t *testing.T) {
		var c query.ConfigInfo
		call(t, "GET", "/api/v0/query/config", "", &c)
		if len(c.Tables) != 4 || c.Tables[1].Name != "flows_1m" || c.Tables[1].Oldest == nil || c.DimensionsLimit != 50 {
			t.Errorf("config %+v", c)
		}
	})
}
