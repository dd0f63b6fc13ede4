package console

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// A build as vite lays it out: index.html, hashed assets, files of public/.
var testBuild = fstest.MapFS{
	"index.html":               {Data: []byte(`<!doctype html><html><head><script type="module" src="/assets/index-AbC123.js"></script></head><body><div id="app"></div></body></html>`)},
	"assets/index-AbC123.js":   {Data: []byte("console.log('flowzero');" + strings.Repeat("/* padding so that gzip pays */ ", 100))},
	"assets/style-Xy9.css":     {Data: []byte("body{margin:0}")},
	"assets/logo-Q1.png":       {Data: bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 600)},
	"favicon.svg":              {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`)},
	"theme.js":                 {Data: []byte("(function(){})();")},
	"assets/nested/chunk-1.js": {Data: []byte("export {};")},
}

func newAssetsConsole(t *testing.T, build fstest.MapFS) (*Console, *http.ServeMux) {
	t.Helper()
	cfg := DefaultConfiguration()
	cfg.ViewsFile = t.TempDir() + "/views.json"
	deps := Dependencies{Registry: prometheus.NewRegistry()}
	if build != nil {
		deps.Assets = build // a nil MapFS in the interface would not be nil
	}
	c, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range c.Handlers() {
		mux.Handle(p, h)
	}
	return c, mux
}

func get(mux *http.ServeMux, method, path string, headers ...string) *http.Response {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	r := io.Reader(resp.Body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAssets(t *testing.T) {
	c, mux := newAssetsConsole(t, testBuild)
	index := string(testBuild["index.html"].Data)

	for _, c := range []struct {
		path, want, ctype, cache string
	}{
		{"/", index, "text/html; charset=utf-8", "no-cache"},
		{"/index.html", index, "text/html; charset=utf-8", "no-cache"},
		// The console's routes are the page's: index.html, whatever follows.
		{"/visualize", index, "text/html; charset=utf-8", "no-cache"},
		{"/visualize?v=1&graph=sankey&filter=SrcAS+=+AS13335", index, "text/html; charset=utf-8", "no-cache"},
		{"/visualize/v1-N4IgLg", index, "text/html; charset=utf-8", "no-cache"},
		{"/views", index, "text/html; charset=utf-8", "no-cache"},
		{"/assets/index-AbC123.js", string(testBuild["assets/index-AbC123.js"].Data), "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/assets/nested/chunk-1.js", "export {};", "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/assets/style-Xy9.css", "body{margin:0}", "text/css; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/favicon.svg", string(testBuild["favicon.svg"].Data), "image/svg+xml", "no-cache"},
		{"/theme.js", "(function(){})();", "text/javascript; charset=utf-8", "no-cache"},
	} {
		t.Run(c.path, func(t *testing.T) {
			resp := get(mux, "GET", c.path)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got := body(t, resp); got != c.want {
				t.Errorf("body %.60q, want %.60q", got, c.want)
			}
			if got := resp.Header.Get("Content-Type"); got != c.ctype {
				t.Errorf("Content-Type %q, want %q", got, c.ctype)
			}
			if got := resp.Header.Get("Cache-Control"); got != c.cache {
				t.Errorf("Cache-Control %q, want %q", got, c.cache)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no X-Content-Type-Options")
			}
			if isIndex := c.want == index; isIndex != (resp.Header.Get("Content-Security-Policy") != "") {
				t.Errorf("Content-Security-Policy %q on %s", resp.Header.Get("Content-Security-Policy"), c.path)
			}
		})
	}

	// A missing file is a 404, never index.html, which a browser would run as a script.
	for _, p := range []string{"/assets/index-Old999.js", "/assets/", "/missing.png", "/robots.txt", "/assets/nested"} {
		if resp := get(mux, "GET", p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	// The mux cleans paths before they reach the handler, which cleans them again.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/x", nil)
	req.URL.Path = "/../../etc/passwd"
	c.assets.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Body.String() != index {
		t.Errorf("GET /../../etc/passwd: %d %.60q", rec.Code, rec.Body.String())
	}
	// Unknown API routes answer JSON, not the page.
	resp := get(mux, "GET", "/api/v0/query/nope")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body(t, resp), `"message"`) {
		t.Errorf("GET /api/v0/query/nope: %d", resp.StatusCode)
	}
	// Only GET and HEAD.
	resp = get(mux, "POST", "/visualize")
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /visualize: %d %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp = get(mux, "HEAD", "/assets/style-Xy9.css")
	if resp.StatusCode != 200 || body(t, resp) != "" || resp.Header.Get("Content-Length") != "14" {
		t.Errorf("HEAD: %d %q", resp.StatusCode, resp.Header.Get("Content-Length"))
	}
	if n := promtest.ToFloat64(c.metrics.assets.WithLabelValues("not-found")); n != 6 {
		t.Errorf("not-found counted %v times, want 6", n)
	}
}

func TestAssetsGzip(t *testing.T) {
	_, mux := newAssetsConsole(t, testBuild)
	js := testBuild["assets/index-AbC123.js"].Data
	for _, c := range []struct {
		accept string
		gzip   bool
	}{
		{"gzip, deflate, br, zstd", true},
		{"br;q=1.0, gzip;q=0.8, *;q=0.1", true},
		{"GZIP", true},
		{"*", true},
		{"", false},
		{"identity", false},
		{"gzip;q=0", false},
		{"gzip; q=0.000, *", false},
		{"*;q=0, gzip", true},
	} {
		resp := get(mux, "GET", "/assets/index-AbC123.js", "Accept-Encoding", c.accept)
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != c.gzip {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", c.accept, got, c.gzip)
		}
		if resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("Vary %q", resp.Header.Get("Vary"))
		}
		if got := body(t, resp); got != string(js) {
			t.Errorf("Accept-Encoding %q: body differs", c.accept)
		}
		if c.gzip && resp.ContentLength >= int64(len(js)) {
			t.Errorf("gzip %d bytes for %d", resp.ContentLength, len(js))
		}
	}
	// Small files and images are sent as they are.
	for _, p := range []string{"/assets/style-Xy9.css", "/assets/logo-Q1.png"} {
		if resp := get(mux, "GET", p, "Accept-Encoding", "gzip"); resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s compressed", p)
		}
	}
}

func TestAssetsConditional(t *testing.T) {
	_, mux := newAssetsConsole(t, testBuild)
	plain := get(mux, "GET", "/assets/index-AbC123.js")
	zipped := get(mux, "GET", "/assets/index-AbC123.js", "Accept-Encoding", "gzip")
	etag, zetag := plain.Header.Get("ETag"), zipped.Header.Get("ETag")
	if etag == "" || zetag == "" || etag == zetag {
		t.Fatalf("ETags %q and %q: each encoding needs its own", etag, zetag)
	}
	for _, c := range []struct {
		inm, accept string
		code        int
	}{
		{etag, "", http.StatusNotModified},
		{"W/" + etag, "", http.StatusNotModified},
		{`"other", ` + etag, "", http.StatusNotModified},
		{"*", "", http.StatusNotModified},
		{zetag, "gzip", http.StatusNotModified},
		{etag, "gzip", http.StatusOK},
		{`"other"`, "", http.StatusOK},
	} {
		resp := get(mux, "GET", "/assets/index-AbC123.js", "If-None-Match", c.inm, "Accept-Encoding", c.accept)
		if resp.StatusCode != c.code {
			t.Errorf("If-None-Match %s, Accept-Encoding %q: %d, want %d", c.inm, c.accept, resp.StatusCode, c.code)
		}
	}
	index := get(mux, "GET", "/visualize")
	if resp := get(mux, "GET", "/flows", "If-None-Match", index.Header.Get("ETag")); resp.StatusCode != http.StatusNotModified {
		t.Errorf("index.html revalidated: %d", resp.StatusCode)
	}
}

// A binary built without the front end says how to build it, on every route.
func TestAssetsPlaceholder(t *testing.T) {
	_, mux := newAssetsConsole(t, fstest.MapFS{".gitkeep": {}})
	for _, p := range []string{"/", "/visualize", "/index.html"} {
		resp := get(mux, "GET", p)
		if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, "make build") {
			t.Errorf("GET %s: %d %.80q", p, resp.StatusCode, b)
		}
	}
	if resp := get(mux, "GET", "/.gitkeep"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /.gitkeep: %d", resp.StatusCode)
	}
}

// The embedded tree is either the placeholder's (.gitkeep only) or a build with its index.
func TestEmbeddedBuild(t *testing.T) {
	c, mux := newAssetsConsole(t, nil)
	resp := get(mux, "GET", "/")
	b := body(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	if c.assets.fsys == nil {
		if !strings.Contains(b, "make build") {
			t.Errorf("placeholder: %.100q", b)
		}
		t.Log("console/dist holds no build: the placeholder is served (make console builds it)")
		return
	}
	if !strings.Contains(b, `<div id="app">`) || !strings.Contains(b, "/assets/") {
		t.Errorf("index.html of the build: %.200q", b)
	}
}
