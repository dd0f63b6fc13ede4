//go:build chdb && integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"flowzero/internal/kafkatest"
)

// chromiumPath finds the browser: $FLOWZERO_CHROMIUM, else Debian's chromium or a Chrome on
// the PATH. Without one the test skips (browsers cannot be downloaded here), or fails where
// real services are required (CI=true or FLOWZERO_REQUIRE_SERVICES=1).
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("FLOWZERO_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const missing = "no Chromium found: install Debian's chromium (make deps does it as root) or set FLOWZERO_CHROMIUM to a Chrome binary"
	if kafkatest.Required() {
		t.Fatal(missing)
	}
	t.Skip(missing)
	return ""
}

// apiRecorder wraps the page's fetch before any script of the console runs: each call to
// /api/ is kept with its method, body, status and answer, so that the test compares what
// the page drew with what the server answered it.
const apiRecorder = `(() => {
  const calls = [];
  window.__flowzeroAPI = calls;
  const fetch = window.fetch;
  window.fetch = async function (input, init) {
    const url = typeof input === "string" ? input : input.url;
    const call = { url, method: (init && init.method) || "GET", body: init && typeof init.body === "string" ? init.body : null, done: false };
    if (url.includes("/api/")) calls.push(call);
    const res = await fetch.apply(this, arguments);
    call.status = res.status;
    res.clone().text().then((t) => { call.response = t; call.done = true; }, () => { call.done = true; });
    return res;
  };
})();`

// echartsComponents is a JavaScript function returning the vue-echarts components of the
// page (their exposed API: chart, root, setOption), in document order. It walks Vue's tree
// from the root element (the production build keeps it: container._vnode, components'
// exposed API).
const echartsComponents = `(() => {
  const out = [];
  const seen = new Set();
  const visit = (v) => {
    if (!v || typeof v !== "object" || seen.has(v)) return;
    seen.add(v);
    const c = v.component;
    if (c) {
      const ex = c.exposed;
      if (ex && typeof ex.setOption === "function" && ex.chart) out.push(ex);
      visit(c.subTree);
    }
    if (Array.isArray(v.children)) v.children.forEach(visit);
    if (v.suspense) visit(v.suspense.activeBranch);
  };
  visit(document.getElementById("app")._vnode);
  return out;
})`

// chartsScript returns the options of the ECharts charts on the page, each with the title
// of the card holding it, as drawn.
const chartsScript = echartsComponents + `().map((ex) => {
  const root = ex.root;
  const card = root && root.closest(".card");
  const title = card && card.querySelector(".card-title");
  const opt = ex.chart.getOption();
  const rect = root ? root.getBoundingClientRect() : { width: 0, height: 0 };
  return {
    title: title ? title.textContent.replace(/\s+/g, " ").trim() : "",
    width: rect.width, height: rect.height,
    series: (opt.series || []).map((s) => ({ type: s.type, name: s.name, data: s.data, links: s.links })),
  };
})`

// chartsSettled is true once no chart of the page is animating (zrender's animation loop
// has no clip left): screenshots wait for it.
const chartsSettled = echartsComponents + `().every((ex) => ex.chart.getZr().animation.isFinished())`

// chartOption is what chartsScript returns for one chart.
type chartOption struct {
	Title         string
	Width, Height float64
	Series        []chartSeries
}

type chartSeries struct {
	Type  string
	Name  string
	Data  json.RawMessage
	Links []struct {
		Source, Target string
		Value          float64
	}
}

// apiCall is one call the page made, as apiRecorder kept it.
type apiCall struct {
	URL, Method, Body, Response string
	Status                      int
	Done                        bool
}

// browser is one Chromium tab on the console, collecting its console messages.
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string // the console's URL, ending with /
	console *consoleLog
}

// consoleLog is what the page wrote to its console.
type consoleLog struct {
	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	checked  int // messages already checked by noConsoleErrors
}

// on returns the browser for the subtest t (failures are t's).
func (b *browser) on(t *testing.T) *browser {
	c := *b
	c.t = t
	return &c
}

// newBrowser starts Chromium at 1280×800 with a fresh profile (the flags that work on these
// machines: no sandbox as root, no GPU, no background connections to Google's hosts).
func newBrowser(t *testing.T, exe, base string) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx, base: base, console: &consoleLog{}}
	// The first Run starts the browser; the subscriptions below need its target.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: apiRecorder}); err != nil {
		t.Fatal(err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.console.mu.Lock()
			b.console.messages = append(b.console.messages, m)
			b.console.mu.Unlock()
		}
	}()
	// Deleting a saved view asks for confirmation: accept.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// do runs actions, failing the test on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Steps(actions...)); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (promises awaited) into T.
func eval[T any](b *browser, expression string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %.120s: %v", expression, err)
	}
	return v
}

// waitFor waits until the expression is truthy in the page, failing with what after 30 s.
func (b *browser) waitFor(what, expression string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 40*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expression, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v", what, expression, err)
	}
}

// open navigates to a path of the console.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do("opening "+path, chromedp.Navigate(b.base+strings.TrimPrefix(path, "/")))
}

// charts returns the charts of the page.
func (b *browser) charts() []chartOption {
	b.t.Helper()
	return eval[[]chartOption](b, chartsScript)
}

// calls returns the API calls of the page whose URL contains part, once answered.
func (b *browser) calls(part string) []apiCall {
	b.t.Helper()
	b.waitFor("the answers of "+part, fmt.Sprintf(`(window.__flowzeroAPI || []).filter((c) => c.url.includes(%q)).every((c) => c.done)`, part))
	all := eval[[]apiCall](b, `window.__flowzeroAPI || []`)
	var out []apiCall
	for _, c := range all {
		if strings.Contains(c.URL, part) {
			out = append(out, c)
		}
	}
	return out
}

// lastCall returns the page's last answered call to part.
func (b *browser) lastCall(part string) apiCall {
	b.t.Helper()
	b.waitFor("a call to "+part, fmt.Sprintf(`(window.__flowzeroAPI || []).some((c) => c.url.includes(%q))`, part))
	calls := b.calls(part)
	if len(calls) == 0 {
		b.t.Fatalf("the page made no call to %s", part)
	}
	c := calls[len(calls)-1]
	if c.Status != 200 {
		b.t.Fatalf("%s %s answered %d: %s", c.Method, c.URL, c.Status, c.Response)
	}
	return c
}

// typeText types text at the caret one character at a time, as a user would (each one an
// input event: CodeMirror completes and validates as it goes).
func (b *browser) typeText(text string) {
	b.t.Helper()
	for _, r := range text {
		b.do("typing", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: string(r)})
			return err
		}))
	}
}

// darkMode switches the page's preferred colour scheme (the console follows the system's
// until the user picks one).
func (b *browser) darkMode(dark bool) {
	b.t.Helper()
	value := "light"
	if dark {
		value = "dark"
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: value}},
	}); err != nil {
		b.t.Fatal(err)
	}
}

// screenshot writes the viewport (or the whole page) as PNG under dir, once the charts
// have finished their animations.
func (b *browser) screenshot(dir, name string, full bool) {
	b.t.Helper()
	b.waitFor("the charts' animations", chartsSettled)
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

// noConsoleErrors fails on errors and exceptions the page logged since the last check
// (the browser log's network and security errors included: a failed request, a CSP
// violation); warnings are logged.
func (b *browser) noConsoleErrors(where string) {
	b.t.Helper()
	// The messages come from another goroutine: a round trip to the page lets the ones
	// already sent arrive.
	eval[int](b, `1`)
	l := b.console
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.messages[l.checked:] {
		switch m.Type {
		case chromedp.ConsoleError, chromedp.ConsoleException:
			b.t.Errorf("%s: browser console: %s (%s:%d)", where, m, m.URL, m.Line)
		case chromedp.ConsoleWarning:
			b.t.Logf("%s: browser console: %s", where, m)
		}
	}
	l.checked = len(l.messages)
}
