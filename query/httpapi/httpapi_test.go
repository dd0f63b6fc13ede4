package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/testutil"
	"flowzero/query"
	"flowzero/query/catalog"
	"flowzero/schema"
	"flowzero/store"
)

// fakeEngine answers the tables' and protocols' queries, and the others with answer (or
// err); block, when set, holds each query until it is closed.
type fakeEngine struct {
	mu      sync.Mutex
	answer  string
	err     error
	block   chan struct{}
	started chan struct{}
	queries atomic.Int64
}

func (f *fakeEngine) Query(ctx context.Context, sql, _ string) ([]byte, error) {
	switch {
	case strings.Contains(sql, "min(TimeReceived)"):
		return []byte(`{"meta":[{"name":"name","type":"String"},{"name":"oldest","type":"UInt32"},{"name":"n","type":"UInt64"},{"name":"counted","type":"UInt32"},{"name":"nc","type":"UInt64"}],"data":[["flows",1,1,1,1],["flows_1m",1,1,1,1],["flows_5m",1,1,1,1],["flows_1h",1,1,1,1]]}`), nil
	case strings.Contains(sql, "SELECT proto, name"):
		return []byte(`{"meta":[{"name":"proto","type":"UInt8"},{"name":"name","type":"String"}],"data":[[6,"TCP"],[17,"UDP"]]}`), nil
	}
	f.queries.Add(1)
	f.mu.Lock()
	answer, err, block, started := f.answer, f.err, f.block, f.started
	f.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return []byte(answer), nil
}

const exportersAnswer = `{"meta":[{"name":"e","type":"String"}],"data":[["192.0.2.1"]]}`

func testHandler(t *testing.T, cfg query.Configuration, eng query.Engine) (*Handler, *prometheus.Registry) {
	t.Helper()
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	scfg := store.DefaultConfiguration()
	cat, err := catalog.FromStore(s, scfg, store.NewDDL(scfg, s, ""))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := query.New(cfg, cat, eng, testutil.Clock(), log)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h, err := New(reg, svc, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	return h, reg
}

// do sends a request to h and returns the answer and its decoded body.
func do(h http.Handler, method, path, contentType, body string) (*http.Response, map[string]any) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	var out map[string]any
	json.Unmarshal(rec.Body.Bytes(), &out)
	return res, out
}

func lineBody(filter string) string {
	now := testutil.Now().UTC()
	b, _ := json.Marshal(map[string]any{"start": now.Add(-time.Hour), "end": now, "filter": filter})
	return string(b)
}

func TestErrors(t *testing.T) {
	eng := &fakeEngine{answer: exportersAnswer}
	h, reg := testHandler(t, query.DefaultConfiguration(), eng)
	const js = "application/json"
	for _, c := range []struct {
		name, method, path, ct, body string
		status                       int
		message                      string
		field                        string
	}{
		{"method", "GET", "/api/v0/query/line", "", "", 405, "use POST", ""},
		{"not found", "GET", "/api/v0/query/nothing", "", "", 404, "no such query route: /api/v0/query/nothing", ""},
		{"content type", "POST", "/api/v0/query/line", "text/plain", lineBody(""), 415, "send the body as JSON, with Content-Type: application/json", ""},
		{"too large", "POST", "/api/v0/query/line", js, `{"filter": "` + strings.Repeat("a", MaxBody) + `"}`, 413, "the body is larger than 1048576 bytes", ""},
		{"bad JSON", "POST", "/api/v0/query/line", js, `{"start": `, 400, "invalid JSON body: unexpected EOF", ""},
		{"unknown field", "POST", "/api/v0/query/line", js, `{"strat": "2026-01-01T00:00:00Z"}`, 400, `invalid JSON body: json: unknown field "strat"`, ""},
		{"two values", "POST", "/api/v0/query/line", js, `{} {}`, 400, "invalid JSON body: more than one JSON value", ""},
		{"bad time", "POST", "/api/v0/query/line", js, `{"start": "yesterday"}`, 400, `invalid JSON body: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`, ""},
		{"field", "POST", "/api/v0/query/line", js, `{"start": "2026-01-01T00:00:00Z", "end": "2025-01-01T00:00:00Z"}`, 400, "end: must be after start", "end"},
		{"filter", "POST", "/api/v0/query/line", js, lineBody("SrcAS = foo"), 400, `filter: expected an AS number (AS13335 or 13335, at most 4294967295), found "foo"`, "filter"},
		{"top without dimension", "GET", "/api/v0/query/widgets/top", "", "", 400, "dimension: missing (a column name)", "dimension"},
		{"graph points", "GET", "/api/v0/query/widgets/graph?points=many", "", "", 400, `points: "many" is not a number`, "points"},
		{"complete offset", "POST", "/api/v0/query/filter/complete", js, `{"filter": "SrcAS", "offset": 6}`, 400, "offset: must be in 0..5 (a byte offset in the filter), not 6", "offset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, body := do(h, c.method, c.path, c.ct, c.body)
			if res.StatusCode != c.status || body["message"] != c.message || (c.field != "" && body["field"] != c.field) {
				t.Errorf("%d %v", res.StatusCode, body)
			}
			if res.Header.Get("Content-Type") != "application/json" {
				t.Errorf("content type %q", res.Header.Get("Content-Type"))
			}
			if c.status == 405 && res.Header.Get("Allow") != "POST" {
				t.Errorf("Allow %q", res.Header.Get("Allow"))
			}
		})
	}
	_, body := do(h, "POST", "/api/v0/query/line", js, lineBody("SrcAS = foo"))
	pos, _ := body["position"].(map[string]any)
	if fmt.Sprint(pos["offset"], pos["line"], pos["column"]) != "8 1 9" || fmt.Sprint(body["expected"]) != "[an AS number (AS13335 or 13335) a column name]" {
		t.Errorf("filter error %v", body)
	}
	if eng.queries.Load() != 0 {
		t.Errorf("%d queries for requests that were all refused", eng.queries.Load())
	}
	if n := promtest.ToFloat64(mustVec(t, reg, "flowzero_query_errors_total", "bad-request", "line")); n != 8 {
		t.Errorf("line bad requests: %v", n)
	}
	// Engine errors.
	for msg, status := range map[string]int{
		"Code: 159. DB::Exception: Timeout exceeded (TIMEOUT_EXCEEDED)":  504,
		"Code: 241. DB::Exception: Memory limit (MEMORY_LIMIT_EXCEEDED)": 503,
		"Code: 47. DB::Exception: Unknown identifier":                    500,
	} {
		eng.mu.Lock()
		eng.err = errors.New(msg)
		eng.mu.Unlock()
		res, body := do(h, "GET", "/api/v0/query/widgets/exporters?"+fmt.Sprint(status), "", "")
		if res.StatusCode != status || !strings.Contains(body["message"].(string), msg) {
			t.Errorf("%s: %d %v", msg, res.StatusCode, body)
		}
	}
}

// mustVec returns the metric of a registered vector with these label values (in the order
// of the labels' names).
func mustVec(t *testing.T, reg *prometheus.Registry, name string, labels ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetValue())
			}
			if strings.Join(got, ",") == strings.Join(labels, ",") {
				v := m.GetCounter().GetValue()
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, func() float64 { return v })
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return nil
}

// TestCache checks that the same request within cache-duration runs once, spaces in its
// body aside, and that it carries the SQL and the table.
func TestCache(t *testing.T) {
	eng := &fakeEngine{answer: exportersAnswer}
	h, reg := testHandler(t, query.DefaultConfiguration(), eng)
	res, body := do(h, "GET", "/api/v0/query/widgets/exporters", "", "")
	if res.StatusCode != 200 || fmt.Sprint(body["exporters"]) != "[192.0.2.1]" || res.Header.Get("X-Flowzero-Cache") != "miss" {
		t.Fatalf("%d %v", res.StatusCode, body)
	}
	if sql := res.Header.Get("X-SQL-Query"); !strings.HasPrefix(sql, "SELECT DISTINCT replaceRegexpOne(toString(ExporterAddress), '^::ffff:', '') AS e FROM `flowzero`.`flows_1m` WHERE") ||
		strings.Contains(sql, "\n") || res.Header.Get("X-Flowzero-Table") != "flows_1m" {
		t.Errorf("headers %v", res.Header)
	}
	res, _ = do(h, "GET", "/api/v0/query/widgets/exporters", "", "")
	if res.Header.Get("X-Flowzero-Cache") != "hit" || eng.queries.Load() != 1 {
		t.Errorf("second request: %s, %d queries", res.Header.Get("X-Flowzero-Cache"), eng.queries.Load())
	}
	// The same validation with other spacing.
	do(h, "POST", "/api/v0/query/filter/validate", "application/json", `{"filter": "SrcAS = 1"}`)
	res, body = do(h, "POST", "/api/v0/query/filter/validate", "application/json", "{\n  \"filter\":   \"SrcAS = 1\"\n}")
	if res.Header.Get("X-Flowzero-Cache") != "hit" || body["valid"] != true || body["normalized"] != "SrcAS = AS1" {
		t.Errorf("validate: %v %v", res.Header, body)
	}
	if n := promtest.ToFloat64(mustVec(t, reg, "flowzero_query_cache_hits_total", "widgets/exporters")); n != 1 {
		t.Errorf("cache hits %v", n)
	}
}

// TestCacheShared checks that concurrent identical requests share one query. It runs in a
// testing/synctest bubble: the first request's query is let go once every request runs it or
// waits for it (each durably blocked), not once each is counted, which a request does before
// it joins the query.
func TestCacheShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &fakeEngine{answer: exportersAnswer, block: make(chan struct{}), started: make(chan struct{}, 10)}
		h, reg := testHandler(t, query.DefaultConfiguration(), eng)
		var wg sync.WaitGroup
		statuses := make([]string, 3)
		for i := range statuses {
			wg.Go(func() {
				res, _ := do(h, "GET", "/api/v0/query/widgets/exporters?shared", "", "")
				statuses[i] = res.Header.Get("X-Flowzero-Cache")
			})
		}
		synctest.Wait()
		if n := promtest.ToFloat64(mustVec(t, reg, "flowzero_query_requests_total", "widgets/exporters")); n != 3 || eng.queries.Load() != 1 {
			t.Errorf("%v requests running %d queries, want 3 sharing 1", n, eng.queries.Load())
		}
		close(eng.block)
		wg.Wait()
		if eng.queries.Load() != 1 || strings.Count(strings.Join(statuses, ","), "shared") != 2 || strings.Count(strings.Join(statuses, ","), "miss") != 1 {
			t.Errorf("%d queries, %v", eng.queries.Load(), statuses)
		}
	})
}

// TestBusy checks the bound on concurrent queries: past max-concurrent + max-queued, 429
// with Retry-After.
func TestBusy(t *testing.T) {
	cfg := query.DefaultConfiguration()
	cfg.MaxConcurrent, cfg.MaxQueued = 1, 1
	eng := &fakeEngine{answer: exportersAnswer, block: make(chan struct{}), started: make(chan struct{}, 10)}
	h, reg := testHandler(t, cfg, eng)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _ := do(h, "GET", fmt.Sprintf("/api/v0/query/widgets/exporters?%d", i), "", "")
			codes[i] = res.StatusCode
		}()
	}
	<-eng.started // one runs
	testutil.WaitUntil(t, "one request to wait", func() bool { return promtest.ToFloat64(h.m.queued) == 1 })
	res, body := do(h, "GET", "/api/v0/query/widgets/exporters?third", "", "")
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "1" || body["message"] != "too many queries are running: try again in a moment" {
		t.Errorf("third: %d %v %v", res.StatusCode, res.Header, body)
	}
	close(eng.block)
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 {
		t.Errorf("codes %v", codes)
	}
	if n := promtest.ToFloat64(mustVec(t, reg, "flowzero_query_errors_total", "busy", "widgets/exporters")); n != 1 {
		t.Errorf("busy: %v", n)
	}
	if promtest.ToFloat64(h.m.running) != 0 || promtest.ToFloat64(h.m.queued) != 0 {
		t.Error("gauges not back to 0")
	}
}

func TestValidateAndComplete(t *testing.T) {
	h, _ := testHandler(t, query.DefaultConfiguration(), &fakeEngine{answer: `{"meta":[{"name":"label","type":"String"},{"name":"detail","type":"String"}],"data":[]}`})
	_, body := do(h, "POST", "/api/v0/query/filter/validate", "application/json", `{"filter": "Proto = tcp AND\nSrcAS = x"}`)
	if body["valid"] != false || body["message"] != `expected an AS number (AS13335 or 13335, at most 4294967295), found "x"` ||
		fmt.Sprint(body["position"]) != "map[column:9 line:2 offset:24]" {
		t.Errorf("validate: %v", body)
	}
	_, body = do(h, "POST", "/api/v0/query/filter/validate", "application/json", `{"filter": "proto = tcp"}`)
	if body["valid"] != true || body["normalized"] != "Proto = TCP" {
		t.Errorf("validate: %v", body)
	}
	_, body = do(h, "POST", "/api/v0/query/filter/complete", "application/json", `{"filter": "Proto = U", "offset": 9}`)
	if fmt.Sprint(body) != "map[completions:[map[apply:UDP detail:Proto kind:value label:UDP]] from:8 to:9]" {
		t.Errorf("complete: %v", body)
	}
	res, body := do(h, "GET", "/api/v0/query/config", "", "")
	if res.StatusCode != 200 || body["version"] != "test" || body["defaultFilter"] != "InIfBoundary = external" {
		t.Errorf("config: %v", body)
	}
}

func TestCacheBound(t *testing.T) {
	c := newCache(time.Second, 1000)
	now := testutil.Now()
	big := &answer{body: bytes.Repeat([]byte("x"), 400)}
	c.put("a", big, now)
	c.put("b", big, now)
	c.put("c", big, now) // a goes
	if c.get("a", now) != nil || c.get("b", now) == nil || c.get("c", now) == nil || c.size > 1000 {
		t.Errorf("size %d", c.size)
	}
	if c.get("b", now.Add(time.Second)) != nil {
		t.Error("expired entry served")
	}
	c.put("huge", &answer{body: make([]byte, 2000)}, now)
	if c.get("huge", now) != nil {
		t.Error("an answer larger than the cache is cached")
	}
}
