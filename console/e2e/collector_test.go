//go:build chdb && integration

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowzero/app"
	"flowzero/collector"
	"flowzero/demo"
	"flowzero/internal/testutil"
)

// collectorRun is a running collector with the demo exporters and the embedded store.
type collectorRun struct {
	app  *app.App
	base string // the console's URL, ending with /
}

// testLog passes the app's warnings and errors to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startCollector starts what `make run` starts, on free loopback ports: the demo exporters
// (with their metadata) sending to the collector, which stores the flows in the embedded
// engine, serves the query API and the console. The store inserts every second and its
// aggregated tables follow within a second, so that pages see data early.
func startCollector(t *testing.T) *collectorRun {
	cfg := app.DefaultConfiguration()
	cfg.Log.Level = "warn"
	cfg.Collector.Listeners = []collector.ListenerConfiguration{
		{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 1},
		{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 1},
		{Protocol: "sflow", Address: "127.0.0.1:0", Workers: 1},
	}
	cfg.Collector.HTTP.Listen = "127.0.0.1:0"
	cfg.Outputs.File.Enabled = false
	cfg.Outputs.Store.Enabled = true
	dir := t.TempDir()
	cfg.Outputs.Store.Embedded.Path = filepath.Join(dir, "chdb")
	cfg.Outputs.Store.Embedded.FlushInterval = time.Second
	// Room for the batches of a machine busy with other tests: none dropped.
	cfg.Outputs.Store.Embedded.QueueLength = 32
	cfg.Outputs.Store.Embedded.PreAggregateInterval = time.Second
	cfg.Outputs.Store.Embedded.MaxThreads = 2
	cfg.Enrich.Exporters = app.DemoMetadata()
	a, err := app.New(cfg, app.Dependencies{
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Clock:  testutil.Clock(),
	})
	if err != nil {
		t.Fatal(err)
	}
	d := demo.DefaultConfiguration()
	d.FlowsPerSecond = 400
	d.Diurnal = true
	a.Demo = &d
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Errorf("stopping the collector: %v", err)
		}
	})
	return &collectorRun{app: a, base: a.ConsoleURL()}
}

// api calls the collector's API as a script would (not through the page): GET without a
// body, POST with a JSON body. It returns the status, the body and the X-Flowzero-Cache
// header.
func (c *collectorRun) api(t *testing.T, method, path, body string) (int, []byte, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(c.base, "/")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out, resp.Header.Get("X-Flowzero-Cache")
}

// getJSON decodes the answer of a GET that must succeed.
func (c *collectorRun) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, body, _ := c.api(t, "GET", path, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// newestFlow returns the receive time of the newest stored flow (zero without flows).
func (c *collectorRun) newestFlow(t *testing.T) time.Time {
	t.Helper()
	var last struct {
		Flow map[string]any `json:"flow"`
	}
	c.getJSON(t, "/api/v0/query/widgets/last-flow", &last)
	s, _ := last.Flow["TimeReceived"].(string)
	tr, _ := time.Parse(time.RFC3339, s)
	return tr
}

// waitStored waits until the store holds flows received after at.
func (c *collectorRun) waitStored(t *testing.T, what string, at time.Time) {
	t.Helper()
	testutil.WaitUntil(t, what, func() bool { return c.newestFlow(t).After(at) })
}

// shotsDir is var/<name> at the repository's root, emptied of previous screenshots.
func shotsDir(t *testing.T, name string) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatalf("no go.mod above %s", wd)
		}
		root = parent
	}
	dir := filepath.Join(root, "var", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	for _, f := range old {
		os.Remove(f)
	}
	return dir
}

// sameJSON compares two answers field by field, leaving out the fields listed.
func sameJSON(t *testing.T, what string, got, want []byte, skip ...string) {
	t.Helper()
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, k := range skip {
		delete(g, k)
		delete(w, k)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("%s: the page's answer and a direct call differ:\npage:   %.600s\ndirect: %.600s", what, gb, wb)
	}
}

// rfc3339 formats t as the console's URLs and the API take it.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// describe shortens a JSON body for messages.
func describe(b []byte) string { return fmt.Sprintf("%.300s", b) }
