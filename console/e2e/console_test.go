//go:build chdb && integration

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"flowzero/internal/testutil"
)

// lineAnswer is the answer of /api/v0/query/line (and of the home page's graph).
type lineAnswer struct {
	Table     string            `json:"table"`
	Interval  int               `json:"interval"`
	T         []string          `json:"t"`
	Rows      [][]string        `json:"rows"`
	Axis      []int             `json:"axis"`
	Points    [][]float64       `json:"points"`
	Avg       []float64         `json:"avg"`
	Total     []float64         `json:"total"`
	AxisNames map[string]string `json:"axisNames"`
}

// sankeyAnswer is the answer of /api/v0/query/sankey.
type sankeyAnswer struct {
	Rows   [][]string `json:"rows"`
	Values []float64  `json:"values"`
	Nodes  []string   `json:"nodes"`
	Links  []struct {
		Source, Target string
		Value          float64
	} `json:"links"`
}

// rowName is the console's name of a series (src/lib/palette.ts).
func rowName(row []string) string {
	if len(row) == 0 {
		return "Total"
	}
	return strings.Join(row, " · ")
}

// TestConsole drives every page of the console in Chromium against a collector fed by the
// demo exporters, and checks that what the pages draw is what the API answers.
func TestConsole(t *testing.T) {
	exe := chromiumPath(t)
	start := testutil.Now()
	c := startCollector(t)
	dir := shotsDir(t, "console-e2e")
	// The Visualize pages show a fixed range of the first 30 s of data: their answers do
	// not change while the test compares them with direct calls. The pages of live data
	// come first, while that range fills.
	from := start.Truncate(time.Second).Add(time.Second)
	to := from.Add(30 * time.Second)
	c.waitStored(t, "the first seconds of flows", from.Add(4*time.Second))
	b := newBrowser(t, exe, c.base)

	t.Run("home", func(t *testing.T) { testHome(t, b.on(t), c, dir) })
	t.Run("exporters", func(t *testing.T) { testExporters(t, b.on(t), c, dir) })
	t.Run("flows-live", func(t *testing.T) { testFlowsLive(t, b.on(t), dir) })

	c.waitStored(t, "the flows of the Visualize range", to.Add(3*time.Second))
	rng := "start=" + url.QueryEscape(rfc3339(from)) + "&end=" + url.QueryEscape(rfc3339(to))
	ext := "&filter=" + url.QueryEscape("InIfBoundary = external")
	var durations []float64
	for _, v := range []struct{ name, query, graph string }{
		{"stacked", "v=1&" + rng + "&dimensions=SrcAS,ExporterName&previous-period=true" + ext, "stacked"},
		{"stacked100", "", "stacked100"}, // the same page, switched with its button
		{"lines", "v=1&graph=lines&" + rng + "&dimensions=SrcAS&limit=5&bidirectional=true" + ext, "lines"},
		{"grid", "v=1&graph=grid&" + rng + "&dimensions=InIfProvider&bidirectional=true" + ext, "grid"},
		{"sankey", "v=1&graph=sankey&" + rng + "&dimensions=SrcAS,InIfProvider,ExporterName" + ext, "sankey"},
		{"heatmap", "v=1&graph=heatmap&" + rng + "&dimensions=SrcAS&limit=15&units=pps" + ext, "heatmap"},
	} {
		t.Run("visualize/"+v.name, func(t *testing.T) {
			durations = append(durations, testVisualize(t, b.on(t), c, dir, v.query, v.graph))
		})
	}
	t.Logf("Visualize: chart drawn %v ms after its query was sent (median %.0f ms)", roundAll(durations), median(durations))
	t.Run("filter", func(t *testing.T) { testFilter(t, b.on(t), c, dir, rng) })
	t.Run("saved-views", func(t *testing.T) { testSavedViews(t, b.on(t), c, dir, rng+ext) })
	t.Run("flows", func(t *testing.T) { testFlows(t, b.on(t), c, dir, from, to) })
}

// testHome: every widget has data, the 24 h graph and the pies draw the page's answers,
// which direct calls give again.
func testHome(t *testing.T, b *browser, c *collectorRun, dir string) {
	b.open("/")
	b.waitFor("Home's widgets", `performance.getEntriesByName("flowzero:home-loaded").length > 0`)
	t.Logf("Home loaded (every widget drawn) in %.0f ms", eval[float64](b, `performance.getEntriesByName("flowzero:home-loaded")[0].startTime`))
	charts := b.charts()

	graphCall := b.lastCall("/widgets/graph")
	var graph lineAnswer
	decode(t, graphCall.Response, &graph)
	if sum(graph.Total) <= 0 {
		t.Errorf("the 24 h graph has no traffic: %s", describe([]byte(graphCall.Response)))
	}
	checkLineChart(t, "home graph", chartTitled(t, charts, "Traffic"), graph, "stacked")
	// Live data: a direct call is answered from the cache within 5 s, else it may hold a
	// few more flows.
	_, direct, cache := c.api(t, "GET", strings.TrimPrefix(graphCall.URL, strings.TrimSuffix(c.base, "/")), "")
	var again lineAnswer
	decode(t, string(direct), &again)
	if cache == "hit" || cache == "shared" {
		sameJSON(t, "home graph", []byte(graphCall.Response), direct)
	} else if g, w := sum(graph.Total), sum(again.Total); math.Abs(g-w) > 0.1*w {
		t.Errorf("home graph: the page's total %.0f bytes, a direct call %.0f", g, w)
	}

	titles := map[string]string{"SrcAS": "Source AS", "DstAS": "Destination AS", "Proto": "Protocol", "SrcPort": "Source port", "ExporterName": "Exporter"}
	tops := b.calls("/widgets/top")
	if len(tops) < len(titles) {
		t.Errorf("%d top widgets answered, want %d", len(tops), len(titles))
	}
	for _, call := range tops {
		u, _ := url.Parse(call.URL)
		dim := u.Query().Get("dimension")
		var top struct {
			Top []struct {
				Name    string
				Percent float64
			}
		}
		decode(t, call.Response, &top)
		title, ok := titles[dim]
		if !ok {
			continue
		}
		pie := chartTitled(t, charts, title)
		var data []struct {
			Name  string
			Value float64
		}
		json.Unmarshal(pie.Series[0].Data, &data)
		// One slice is possible: the external traffic goes to the demo's own AS.
		if len(data) != len(top.Top) || len(data) == 0 {
			t.Errorf("pie %s: %d slices, the answer %d", title, len(data), len(top.Top))
			continue
		}
		total := 0.0
		for i, d := range data {
			if d.Name != top.Top[i].Name || d.Value != top.Top[i].Percent {
				t.Errorf("pie %s: slice %d is %s %.2f %%, the answer %s %.2f %%", title, i, d.Name, d.Value, top.Top[i].Name, top.Top[i].Percent)
			}
			total += d.Value
		}
		if math.Abs(total-100) > 0.01 {
			t.Errorf("pie %s: the slices make %.2f %%", title, total)
		}
	}
	var srcAS struct{ Top []struct{ Name string } }
	c.getJSON(t, "/api/v0/query/widgets/top?dimension=SrcAS&filter="+url.QueryEscape("InIfBoundary = external"), &srcAS)
	if len(srcAS.Top) < 3 || !strings.HasPrefix(srcAS.Top[0].Name, "AS") {
		t.Errorf("top source AS %+v, want ASes", srcAS.Top)
	}

	var rate struct{ Rate float64 }
	decode(t, b.lastCall("/widgets/flow-rate").Response, &rate)
	shown := eval[string](b, `document.querySelector(".text-3xl").firstChild.textContent.trim()`)
	if rate.Rate <= 0 || !closeToDisplay(shown, rate.Rate) {
		t.Errorf("flow rate shown %q, answered %.1f flows/s", shown, rate.Rate)
	}
	var exporters struct{ Count int }
	decode(t, b.lastCall("/widgets/exporters").Response, &exporters)
	if shown := eval[string](b, `document.querySelectorAll(".text-3xl")[1].textContent.trim()`); exporters.Count != 2 || shown != "2" {
		t.Errorf("exporters: shown %q, answered %d; want the demo's 2 (NetFlow and IPFIX from 127.0.0.1, sFlow agent 192.0.2.3)", shown, exporters.Count)
	}
	if n := eval[int](b, `document.querySelectorAll("dl dt").length`); n < 30 {
		t.Errorf("the last flow shows %d columns", n)
	}
	b.screenshot(dir, "01-home", true)
	b.darkMode(true)
	b.waitFor("the dark theme", `document.documentElement.classList.contains("dark")`)
	b.screenshot(dir, "01-home-dark", false)
	b.darkMode(false)
	b.noConsoleErrors("home")
}

// testVisualize opens a Visualize URL (or, without one, switches the open page to graph),
// checks the chart and the table against the page's answer and a direct call, and returns
// how long the chart took to draw after the query was sent.
func testVisualize(t *testing.T, b *browser, c *collectorRun, dir, query, graph string) float64 {
	if query != "" {
		b.open("/visualize?" + query)
	} else {
		label := map[string]string{"stacked100": "100 % stacked"}[graph]
		b.do("measure reset", chromedp.Evaluate[chromedp.Void](`performance.clearMeasures("flowzero:visualize")`))
		b.do("choosing "+label, chromedp.Click(fmt.Sprintf(`//aside//button[normalize-space()=%q]`, label)))
	}
	b.waitFor("the chart drawn", `performance.getEntriesByName("flowzero:visualize").length > 0`)
	ms := eval[float64](b, `performance.getEntriesByName("flowzero:visualize")[0].duration`)
	route := "/api/v0/query/line"
	if graph == "sankey" {
		route = "/api/v0/query/sankey"
	}
	call := b.lastCall(route)
	code, direct, _ := c.api(t, "POST", route, call.Body)
	if code != 200 {
		t.Fatalf("direct %s: %d %s", route, code, direct)
	}
	// A fixed range in the past: a direct call gives the same answer.
	sameJSON(t, graph, []byte(call.Response), direct)
	charts := b.charts()
	if len(charts) != 1 || charts[0].Height < 150 {
		t.Fatalf("%d charts on the page (%+v), want one", len(charts), charts)
	}
	rows := tableRows(t, b)
	if graph == "sankey" {
		var s sankeyAnswer
		decode(t, call.Response, &s)
		checkSankey(t, charts[0], s, rows)
	} else {
		var l lineAnswer
		decode(t, call.Response, &l)
		if sum(l.Total) <= 0 {
			t.Errorf("%s: no traffic in %s", graph, describe([]byte(call.Response)))
		}
		checkLineChart(t, graph, charts[0], l, graph)
		checkLineTable(t, graph, l, rows)
	}
	b.waitFor("the chart's animation", `document.querySelector("[data-settled=true]")`)
	b.screenshot(dir, "02-visualize-"+graph, false)
	b.noConsoleErrors("visualize " + graph)
	return ms
}

// testFilter types a filter, chooses a completion the server proposed, applies it, then
// types an invalid one and sees the error at its position.
func testFilter(t *testing.T, b *browser, c *collectorRun, dir, rng string) {
	b.open("/visualize?v=1&" + rng + "&dimensions=SrcAS")
	b.waitFor("the chart drawn", `performance.getEntriesByName("flowzero:visualize").length > 0`)
	editor := `.filter-editor .cm-content`
	b.do("focusing the filter", chromedp.Click(chromedp.CSS(editor)), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.typeText("InIfBoundary = external AND Src")
	b.waitFor("the completions", `[...document.querySelectorAll(".cm-tooltip-autocomplete li")].some((li) => li.textContent.startsWith("SrcAS"))`)
	complete := b.lastCall("/api/v0/query/filter/complete")
	if !strings.Contains(complete.Response, `"SrcAS"`) {
		t.Errorf("the server's completions %s lack SrcAS", describe([]byte(complete.Response)))
	}
	b.screenshot(dir, "03-filter-completion", false)
	at := eval[[]float64](b, `(() => { const li = [...document.querySelectorAll(".cm-tooltip-autocomplete li")].find((li) => li.textContent.startsWith("SrcAS")); const r = li.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`)
	b.do("choosing SrcAS", chromedp.MouseClickXY(at[0], at[1]))
	b.waitFor("SrcAS in the filter", fmt.Sprintf(`document.querySelector(%q).textContent.trim() === "InIfBoundary = external AND SrcAS"`, editor))
	b.typeText(" = AS15169")
	b.waitFor("the filter valid", `!document.querySelector("aside button[type=submit]").disabled && !document.querySelector("aside [role=alert]")`)
	b.do("clearing the measure", chromedp.Evaluate[chromedp.Void](`performance.clearMeasures("flowzero:visualize")`))
	b.do("applying", chromedp.Click(chromedp.CSS(`aside button[type=submit]`)))
	b.waitFor("the filtered chart", `performance.getEntriesByName("flowzero:visualize").length > 0`)
	call := b.lastCall("/api/v0/query/line")
	var req struct{ Filter string }
	decode(t, call.Body, &req)
	if req.Filter != "InIfBoundary = external AND SrcAS = AS15169" {
		t.Errorf("the query's filter is %q", req.Filter)
	}
	var l lineAnswer
	decode(t, call.Response, &l)
	if len(l.Rows) != 1 || !strings.HasPrefix(l.Rows[0][0], "AS15169") || sum(l.Total) <= 0 {
		t.Errorf("filtered on AS15169, the answer has rows %v, total %v", l.Rows, l.Total)
	}
	_, direct, _ := c.api(t, "POST", "/api/v0/query/line", call.Body)
	sameJSON(t, "filtered line", []byte(call.Response), direct)
	checkLineChart(t, "filtered", b.charts()[0], l, "stacked")

	b.do("focusing the filter", chromedp.Click(chromedp.CSS(editor)), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.typeText("SrcAddr = 192.0.2.300 AND Proto = TCP")
	b.waitFor("the error shown", `(document.querySelector("aside [role=alert]") || {}).textContent?.includes("column 11")`)
	msg := eval[string](b, `document.querySelector("aside [role=alert]").textContent.trim()`)
	if !strings.Contains(msg, `"192.0.2.300"`) {
		t.Errorf("error shown %q, want it to quote 192.0.2.300", msg)
	}
	if u := eval[string](b, `(document.querySelector(".filter-editor .cm-lintRange-error") || {}).textContent || ""`); u != "192.0.2.300" {
		t.Errorf("the editor underlines %q, want 192.0.2.300", u)
	}
	validate := b.lastCall("/api/v0/query/filter/validate")
	var v struct {
		Valid    bool
		Position struct{ Offset, Line, Column int }
	}
	decode(t, validate.Response, &v)
	if v.Valid || v.Position.Offset != 10 || v.Position.Column != 11 {
		t.Errorf("filter/validate answered %s", validate.Response)
	}
	if !eval[bool](b, `document.querySelector("aside button[type=submit]").disabled`) {
		t.Error("an invalid filter can be applied")
	}
	b.screenshot(dir, "03-filter-error", false)
	b.noConsoleErrors("filter")
}

// testSavedViews saves a Sankey view, opens it again after a reload, finds it in Saved
// views and deletes it there.
func testSavedViews(t *testing.T, b *browser, c *collectorRun, dir, query string) {
	const name = "Transit providers by source AS"
	b.open("/visualize?v=1&graph=sankey&dimensions=SrcAS,InIfProvider&" + query)
	b.waitFor("the chart drawn", `performance.getEntriesByName("flowzero:visualize").length > 0`)
	b.do("saving", chromedp.Click(chromedp.CSS(`button[title="Save these settings under a name"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form#save-view input[required]`)))
	b.typeText(name)
	b.do("saving", chromedp.KeyEvent("\r"))
	b.waitFor("the view saved", `location.search.includes("view=")`)
	id := eval[string](b, `new URLSearchParams(location.search).get("view")`)
	var list struct {
		Views []struct {
			ID, Name, Owner string
			State           struct {
				Graph      string
				Dimensions []string
				Filter     string
			}
		}
	}
	c.getJSON(t, "/api/v0/console/views", &list)
	if len(list.Views) != 1 || list.Views[0].ID != id || list.Views[0].Name != name || list.Views[0].Owner != "default" ||
		list.Views[0].State.Graph != "sankey" || !slices.Equal(list.Views[0].State.Dimensions, []string{"SrcAS", "InIfProvider"}) ||
		list.Views[0].State.Filter != "InIfBoundary = external" {
		t.Fatalf("saved views %+v, want %s (%s) by default", list.Views, name, id)
	}
	// Opened again from its link alone, after a reload.
	b.open("/visualize?view=" + url.QueryEscape(id))
	b.waitFor("the view's chart", `performance.getEntriesByName("flowzero:visualize").length > 0 && document.body.innerText.includes(`+strconv.Quote(name)+`)`)
	if g := eval[string](b, `document.querySelector("aside button[aria-pressed=true]").textContent.trim()`); g != "Sankey" {
		t.Errorf("the view opened as %q", g)
	}
	b.waitFor("the chart's animation", `document.querySelector("[data-settled=true]")`)
	b.screenshot(dir, "04-saved-view", false)

	b.open("/views")
	b.waitFor("the view listed", `document.body.innerText.includes(`+strconv.Quote(name)+`)`)
	b.screenshot(dir, "05-saved-views", false)
	b.do("deleting", chromedp.Click(chromedp.CSS(`button[title="Delete this view"]`)))
	b.waitFor("the view deleted", `document.body.innerText.includes("deleted") && !document.querySelector("tbody a[href*='view=']")`)
	c.getJSON(t, "/api/v0/console/views", &list)
	if len(list.Views) != 0 {
		t.Errorf("views left after the deletion: %+v", list.Views)
	}
	b.noConsoleErrors("saved views")
}

// testFlows: the records of a fixed range, as the API gives them.
func testFlows(t *testing.T, b *browser, c *collectorRun, dir string, from, to time.Time) {
	b.open("/flows?start=" + url.QueryEscape(rfc3339(from)) + "&end=" + url.QueryEscape(rfc3339(to)) + "&limit=100")
	call := b.lastCall("/api/v0/query/flows")
	var f struct {
		Columns []string
		Rows    [][]any
	}
	decode(t, call.Response, &f)
	if len(f.Rows) != 100 {
		t.Fatalf("%d flows answered, want 100", len(f.Rows))
	}
	b.waitFor("the flows shown", `document.querySelectorAll("tbody tr").length === 100`)
	_, direct, _ := c.api(t, "POST", "/api/v0/query/flows", call.Body)
	sameJSON(t, "flows", []byte(call.Response), direct)
	// Each cell's title is the value as answered.
	first := eval[[]string](b, `[...document.querySelector("tbody tr").querySelectorAll("td")].map((td) => td.title)`)
	for i, col := range f.Columns {
		if i < len(first) && first[i] != fmt.Sprint(f.Rows[0][i]) && col != "TimeReceived" {
			t.Errorf("first flow, %s: shown %q, answered %v", col, first[i], f.Rows[0][i])
		}
	}
	b.screenshot(dir, "06-flows", false)
	b.noConsoleErrors("flows")
}

// testFlowsLive: the live tail brings newer flows.
func testFlowsLive(t *testing.T, b *browser, dir string) {
	b.open("/flows")
	b.waitFor("the flows shown", `document.querySelectorAll("tbody tr").length > 0`)
	firstTime := eval[string](b, `document.querySelector("tbody tr td").title`)
	b.do("live tail", chromedp.Click(chromedp.CSS(`button[title="Show flows as they arrive"]`)))
	b.waitFor("newer flows", fmt.Sprintf(`(window.__flowzeroAPI || []).some((c) => c.url.includes("/query/flows") && (c.body || "").includes('"after"') && c.done && c.status === 200) && document.querySelector("tbody tr td").title > %q`, firstTime))
	b.screenshot(dir, "07-flows-live", false)
	b.do("stopping the tail", chromedp.Click(chromedp.CSS(`button[title="Stop the live tail"]`)))
	b.noConsoleErrors("flows live")
}

// testExporters: the demo's exporter with its protocols, and its interfaces with traffic.
func testExporters(t *testing.T, b *browser, c *collectorRun, dir string) {
	b.open("/exporters")
	b.waitFor("the exporter listed", `document.body.innerText.includes("edge1.par1")`)
	badges := eval[[]string](b, `[...document.querySelector("tbody tr").querySelectorAll(".badge")].map((e) => e.textContent.trim())`)
	for _, p := range []string{"IPFIX", "NetFlow v9", "sFlow v5"} {
		if !slices.Contains(badges, p) {
			t.Errorf("protocols shown %v, want %s", badges, p)
		}
	}
	var api struct {
		Exporters []struct {
			Address string
			Flows   uint64
		}
	}
	c.getJSON(t, "/api/v0/exporters", &api)
	if len(api.Exporters) != 1 || api.Exporters[0].Address != "127.0.0.1" {
		t.Errorf("exporters %+v", api.Exporters)
	}
	b.do("opening the exporter", chromedp.Click(chromedp.CSS(`tbody tr.cursor-pointer`)))
	b.waitFor("its interfaces", `[...document.querySelectorAll("td")].some((td) => td.textContent.trim() === "et-0/0/0")`)
	b.screenshot(dir, "08-exporters", false)
	b.noConsoleErrors("exporters")
}

// checkLineChart compares the series drawn with the answer's points.
func checkLineChart(t *testing.T, what string, ch chartOption, a lineAnswer, graph string) {
	t.Helper()
	points := func(s chartSeries) [][]float64 {
		var d [][]float64
		if err := json.Unmarshal(s.Data, &d); err != nil {
			t.Fatalf("%s: series %s: %v", what, s.Name, err)
		}
		return d
	}
	times := make([]float64, len(a.T))
	for j, s := range a.T {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatalf("%s: t[%d] = %q", what, j, s)
		}
		times[j] = float64(tm.UnixMilli())
	}
	switch graph {
	case "stacked", "lines", "stacked100":
		if len(ch.Series) != len(a.Rows) {
			t.Fatalf("%s: %d series drawn, %d answered", what, len(ch.Series), len(a.Rows))
		}
		for j := range a.T {
			var drawn, answered float64
			for i, s := range ch.Series {
				d := points(s)
				if len(d) != len(a.T) || d[j][0] != times[j] {
					t.Fatalf("%s: series %s has %d points, the answer %d", what, s.Name, len(d), len(a.T))
				}
				if a.Axis[i] != 1 {
					if graph != "stacked100" && d[j][1] != sign(a.Axis[i])*a.Points[i][j] {
						t.Errorf("%s: %s at %s drawn %v, answered %v", what, s.Name, a.T[j], d[j][1], a.Points[i][j])
					}
					continue
				}
				drawn += d[j][1]
				answered += a.Points[i][j]
				if graph != "stacked100" && d[j][1] != a.Points[i][j] {
					t.Errorf("%s: %s at %s drawn %v, answered %v", what, s.Name, a.T[j], d[j][1], a.Points[i][j])
				}
			}
			if graph == "stacked100" && answered > 0 && math.Abs(drawn-100) > 1e-6 {
				t.Errorf("%s: the shares at %s make %.4f %%", what, a.T[j], drawn)
			}
		}
	case "grid":
		// One small chart per row of the direct direction, its reverse below zero.
		n := 0
		for i, row := range a.Rows {
			if a.Axis[i] != 1 {
				continue
			}
			found := false
			for _, s := range ch.Series {
				if s.Name == rowName(row) {
					found = true
					for j, p := range points(s) {
						if p[1] != a.Points[i][j] {
							t.Errorf("%s: %s at %s drawn %v, answered %v", what, s.Name, a.T[j], p[1], a.Points[i][j])
							break
						}
					}
				}
			}
			if !found {
				t.Errorf("%s: no chart for %s", what, rowName(row))
			}
			n++
		}
		if n < 2 {
			t.Errorf("%s: %d small charts", what, n)
		}
	case "heatmap":
		// A cell per time and row, Other left out.
		var cells [][]float64
		json.Unmarshal(ch.Series[0].Data, &cells)
		var drawn, answered float64
		rows := 0
		for i, row := range a.Rows {
			if a.Axis[i] == 3 || row[0] == "Other" {
				continue
			}
			rows++
			answered += sum(a.Points[i])
		}
		for _, cell := range cells {
			drawn += cell[2]
		}
		if len(cells) != rows*len(a.T) || math.Abs(drawn-answered) > 1e-6*answered || rows < 5 {
			t.Errorf("%s: %d cells summing to %v, the answer %d rows × %d times summing to %v", what, len(cells), drawn, rows, len(a.T), answered)
		}
	}
}

// tableRows returns the cells' text of the table under the graph.
func tableRows(t *testing.T, b *browser) [][]string {
	t.Helper()
	return eval[[][]string](b, `[...document.querySelectorAll("section > .card table tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent.trim()))`)
}

// checkLineTable compares the table's averages and totals with the answer's, as shown
// (3 significant digits).
func checkLineTable(t *testing.T, what string, a lineAnswer, rows [][]string) {
	t.Helper()
	var want []int // the rows of the first tab: direct, and the previous period
	for i := range a.Rows {
		if a.Axis[i] == 1 || a.Axis[i] == 3 {
			want = append(want, i)
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%s: the table has %d rows, the answer %d", what, len(rows), len(want))
	}
	for k, i := range want {
		r := rows[k]
		if avg, total := r[len(r)-4], r[len(r)-1]; !closeToDisplay(avg, a.Avg[i]) || !closeToDisplay(total, a.Total[i]) {
			t.Errorf("%s: row %s shows average %q and total %q, answered %v and %v", what, rowName(a.Rows[i]), avg, total, a.Avg[i], a.Total[i])
		}
	}
}

// checkSankey compares the links drawn and the table with the answer.
func checkSankey(t *testing.T, ch chartOption, a sankeyAnswer, rows [][]string) {
	t.Helper()
	links := ch.Series[0].Links
	if len(links) != len(a.Links) || len(links) < 5 {
		t.Fatalf("sankey: %d links drawn, %d answered", len(links), len(a.Links))
	}
	for i, l := range links {
		if l.Source != a.Links[i].Source || l.Target != a.Links[i].Target || l.Value != a.Links[i].Value {
			t.Errorf("sankey: link %d drawn %+v, answered %+v", i, l, a.Links[i])
		}
	}
	if len(rows) != len(a.Rows) {
		t.Fatalf("sankey: the table has %d rows, the answer %d", len(rows), len(a.Rows))
	}
	for i, r := range rows {
		if avg := r[len(r)-2]; !closeToDisplay(avg, a.Values[i]) {
			t.Errorf("sankey: row %v shows %q, answered %v", a.Rows[i], avg, a.Values[i])
		}
	}
}

// chartTitled returns the chart in the card whose title starts with title.
func chartTitled(t *testing.T, charts []chartOption, title string) chartOption {
	t.Helper()
	for _, c := range charts {
		if strings.HasPrefix(c.Title, title) {
			if c.Width < 50 || c.Height < 50 || len(c.Series) == 0 {
				t.Errorf("chart %q is %.0f×%.0f with %d series", title, c.Width, c.Height, len(c.Series))
			}
			return c
		}
	}
	var have []string
	for _, c := range charts {
		have = append(have, c.Title)
	}
	t.Fatalf("no chart titled %q among %q", title, have)
	return chartOption{}
}

var displayed = regexp.MustCompile(`^(-?[0-9]+(?:\.([0-9]+))?)\s*([kMGTPE]?)`)

// closeToDisplay says whether text (such as "1.23 Gbps", "153 GB", "12.3 %") is v as the
// console formats it: SI prefixes of 1000, v rounded to the digits shown.
func closeToDisplay(text string, v float64) bool {
	m := displayed.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return false
	}
	mantissa, _ := strconv.ParseFloat(m[1], 64)
	scale := 1.0
	if m[3] != "" {
		scale = math.Pow(1000, float64(strings.Index("kMGTPE", m[3])+1))
	}
	unit := math.Pow(10, -float64(len(m[2]))) * scale
	return math.Abs(mantissa*scale-v) <= unit/2*(1+1e-9)+1e-9*math.Abs(v)
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decoding %s: %v", describe([]byte(s)), err)
	}
}

func sign(axis int) float64 {
	if axis == 2 || axis == 4 {
		return -1
	}
	return 1
}

func sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func roundAll(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(math.Round(x))
	}
	return out
}
