//go:build chdb && integration

package e2e

import (
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"flowzero/app"
	"flowzero/collector"
	"flowzero/internal/testutil"
)

// performanceLoads is how many times each page is loaded; the medians are reported.
const performanceLoads = 7

// TestConsolePerformance loads Home and a 24 h Visualize query several times on a copy of
// the store named by FLOWZERO_CONSOLE_BENCH (the embedded store of make bench-query, its
// chdb directory: a day of the demo's traffic at 5,000 flows/s; make console-perf), with the API's answer cache off so that every load queries the engine. It
// reports the medians: Home with every widget drawn (the flowzero:home-loaded mark, from
// the navigation's start) within 1 s, a Visualize chart drawn within 500 ms of its query
// (the flowzero:visualize measure), with the navigation's and the API calls' Resource
// Timing beside them.
func TestConsolePerformance(t *testing.T) {
	exe := chromiumPath(t)
	path := os.Getenv("FLOWZERO_CONSOLE_BENCH")
	if path == "" {
		t.Skip("FLOWZERO_CONSOLE_BENCH names no store: make console-perf runs this test on the data set of make bench-query")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("FLOWZERO_CONSOLE_BENCH: %v", err)
	}
	// A copy: the collector's store writes to its directory (migrations, merges), and the
	// data set is shared by the query benchmark.
	store := filepath.Join(t.TempDir(), "chdb")
	if out, err := exec.Command("cp", "-a", "--reflink=auto", path, store).CombinedOutput(); err != nil {
		t.Fatalf("copying %s: %v: %s", path, err, out)
	}
	cfg := app.DefaultConfiguration()
	cfg.Log.Level = "warn"
	cfg.Collector.Listeners = []collector.ListenerConfiguration{{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 1}}
	cfg.Collector.HTTP.Listen = "127.0.0.1:0"
	cfg.Outputs.File.Enabled = false
	cfg.Outputs.Store.Enabled = true
	cfg.Outputs.Store.Embedded.Path = store
	cfg.Query.CacheDuration = 0
	cfg.Console.ViewsFile = t.TempDir() + "/views.json"
	a, err := app.New(cfg, app.Dependencies{
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Clock:  testutil.Clock(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Errorf("stopping the collector: %v", err)
		}
	})
	c := &collectorRun{app: a, base: a.ConsoleURL()}
	newest := c.newestFlow(t)
	if newest.IsZero() {
		t.Fatalf("%s holds no flows", path)
	}
	t.Logf("newest flow %s (%s ago)", newest.Format(time.RFC3339), testutil.Now().Sub(newest).Round(time.Second))
	b := newBrowser(t, exe, c.base)
	dir := shotsDir(t, "console-perf")

	var home, homeDOM, homeAPI []float64
	for range performanceLoads {
		b.open("/") // a new document each time: its own timeline
		b.waitFor("Home's widgets", `performance.getEntriesByName("flowzero:home-loaded").length > 0`)
		home = append(home, eval[float64](b, `performance.getEntriesByName("flowzero:home-loaded")[0].startTime`))
		homeDOM = append(homeDOM, eval[float64](b, `performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd`))
		homeAPI = append(homeAPI, eval[float64](b, `Math.max(...performance.getEntriesByType("resource").filter((r) => r.name.includes("/api/v0/query/")).map((r) => r.duration))`))
	}
	// Where the last load's time went: each request from the navigation's start.
	t.Logf("Home, the last load's requests (start → end, ms):\n%s", eval[string](b, `performance.getEntriesByType("resource").map((r) =>
		"  " + Math.round(r.startTime) + " → " + Math.round(r.responseEnd) + "  " + r.name.replace(location.origin, "")).join("\n")`))
	b.screenshot(dir, "home", true)
	t.Logf("Home, every widget drawn: median %.0f ms %v (DOMContentLoaded median %.0f ms; slowest API call median %.0f ms)",
		median(home), roundAll(home), median(homeDOM), median(homeAPI))
	if median(home) > 1000 {
		t.Errorf("Home took %.0f ms (median), more than 1 s", median(home))
	}

	query := "v=1&start=" + url.QueryEscape(rfc3339(newest.Add(-24*time.Hour))) + "&end=" + url.QueryEscape(rfc3339(newest)) +
		"&dimensions=SrcAS&filter=" + url.QueryEscape("InIfBoundary = external")
	var vis, visAPI []float64
	for range performanceLoads {
		b.open("/visualize?" + query)
		b.waitFor("the chart drawn", `performance.getEntriesByName("flowzero:visualize").length > 0`)
		vis = append(vis, eval[float64](b, `performance.getEntriesByName("flowzero:visualize")[0].duration`))
		visAPI = append(visAPI, eval[float64](b, `performance.getEntriesByType("resource").filter((r) => r.name.includes("/api/v0/query/line")).at(-1).duration`))
	}
	call := b.lastCall("/api/v0/query/line")
	var l lineAnswer
	decode(t, call.Response, &l)
	if sum(l.Total) <= 0 {
		t.Errorf("the 24 h Visualize query has no traffic: %s", describe([]byte(call.Response)))
	}
	b.waitFor("the chart's animation", `document.querySelector("[data-settled=true]")`)
	b.screenshot(dir, "visualize", false)
	t.Logf("Visualize, 24 h by SrcAS on %s: chart drawn median %.0f ms after its query %v (the API's answer median %.0f ms)",
		l.Table, median(vis), roundAll(vis), median(visAPI))
	if median(vis) > 500 {
		t.Errorf("a Visualize query took %.0f ms (median) to draw, more than 500 ms", median(vis))
	}
	b.noConsoleErrors("performance")
}
