package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

// The front end built by make (console/frontend → dist). A clone that has not built it
// holds only dist/.gitkeep: the console then serves placeholder.html, which says how.
//
//go:embed all:dist
var distFS embed.FS

//go:embed placeholder.html
var placeholderHTML []byte

// Security headers of the HTML page. Styles may be inline (the charts and the editor set
// element styles); scripts, connections and images come from this server only.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; " +
	"form-action 'self'; frame-ancestors 'none'"

// assets serves the built front end: files as they are, index.html for every other path
// (the console's routes live in the browser), gzip when the browser takes it.
type assets struct {
	fsys  fs.FS
	index *asset
	mu    sync.Mutex
	files map[string]*asset // by path, built on first request
	count func(kind string)
}

// asset is one file with its ETag and, for compressible types, its gzip encoding made
// once on first request.
type asset struct {
	name  string
	body  []byte
	ctype string
	etag  string
	gzip  func() []byte
}

func newAsset(name string, body []byte) *asset {
	sum := sha256.Sum256(body)
	a := &asset{name: name, body: body, ctype: contentType(name), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	if compressible(a.ctype) && len(body) >= 1024 {
		a.gzip = sync.OnceValue(func() []byte {
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			zw.Write(body)
			zw.Close()
			if b.Len() >= len(body) {
				return nil
			}
			return b.Bytes()
		})
	}
	return a
}

func contentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func compressible(ctype string) bool {
	for _, p := range []string{"text/", "application/javascript", "application/json", "image/svg+xml", "application/wasm"} {
		if strings.HasPrefix(ctype, p) {
			return true
		}
	}
	return false
}

// newAssets serves fsys, a tree with index.html at its root; without index.html, the
// placeholder page.
func newAssets(fsys fs.FS, count func(kind string)) *assets {
	a := &assets{fsys: fsys, files: map[string]*asset{}, count: count}
	if body, err := fs.ReadFile(fsys, "index.html"); err == nil {
		a.index = newAsset("index.html", body)
	} else {
		a.fsys = nil
		a.index = newAsset("index.html", placeholderHTML)
	}
	return a
}

// lookup returns the file at name, or nil.
func (a *assets) lookup(name string) *asset {
	if a.fsys == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if f, ok := a.files[name]; ok {
		return f
	}
	var f *asset
	if st, err := fs.Stat(a.fsys, name); err == nil && !st.IsDir() {
		if body, err := fs.ReadFile(a.fsys, name); err == nil {
			f = newAsset(name, body)
		}
	}
	// Only hits are kept: misses depend on the paths clients try, without bound.
	if f != nil {
		a.files[name] = f
	}
	return f
}

func (a *assets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		a.count("method")
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	p := r.URL.Path
	if p == "/api" || strings.HasPrefix(p, "/api/") {
		a.count("not-found")
		writeError(w, http.StatusNotFound, "no API route "+p)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+p), "/")
	var f *asset
	switch {
	case name == "" || name == "index.html":
		f = a.index
	default:
		f = a.lookup(name)
	}
	if f == nil {
		// A missing file (a stale hashed asset, a typo) is a 404: answering index.html would
		// make the browser run HTML as a script. Paths without an extension are routes of
		// the console, which the page resolves.
		if strings.HasPrefix(name+"/", "assets/") || path.Ext(name) != "" {
			a.count("not-found")
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		f = a.index
	}
	h := w.Header()
	if f == a.index {
		a.count("index")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
	} else {
		a.count("asset")
		if strings.HasPrefix(name, "assets/") {
			// Vite puts a hash of the content in these names: they never change.
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
	}
	h.Set("Content-Type", f.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	body, etag := f.body, f.etag
	if f.gzip != nil {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			if gz := f.gzip(); gz != nil {
				body, etag = gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
				h.Set("Content-Encoding", "gzip")
			}
		}
	}
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, etag) {
		a.count("not-modified")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// acceptsGzip reads Accept-Encoding (RFC 9110 §12.5.3): gzip, or else *, listed without
// q=0.
func acceptsGzip(header string) bool {
	gzip, star := -1, -1 // -1: not listed, 0: refused, 1: accepted
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		ok := 1
		if q, found := strings.CutPrefix(strings.ReplaceAll(strings.ToLower(params), " ", ""), "q="); found {
			if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
				ok = 0
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gzip = ok
		case "*":
			star = ok
		}
	}
	if gzip >= 0 {
		return gzip == 1
	}
	return star == 1
}

// etagMatch reads If-None-Match: a list of ETags or *, weak ones compared weakly.
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
