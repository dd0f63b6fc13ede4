package console

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/testutil"
)

// testConsole is a console on a views file in a temporary directory, mounted on a mux as the
// collector mounts it.
type testConsole struct {
	*Console
	reg  *prometheus.Registry
	mux  *http.ServeMux
	file string
	logs *bytes.Buffer
}

func newTestConsole(t *testing.T, mutate func(*Configuration)) *testConsole {
	t.Helper()
	cfg := DefaultConfiguration()
	cfg.ViewsFile = filepath.Join(t.TempDir(), "state", "views.json")
	if mutate != nil {
		mutate(&cfg)
	}
	return openTestConsole(t, cfg)
}

func openTestConsole(t *testing.T, cfg Configuration) *testConsole {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &bytes.Buffer{}
	c, err := New(cfg, Dependencies{Registry: reg, Clock: testutil.Clock(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range c.Handlers() {
		mux.Handle(p, h)
	}
	return &testConsole{Console: c, reg: reg, mux: mux, file: cfg.ViewsFile, logs: logs}
}

// do sends a request as user (empty: no login header) and decodes a JSON answer into out.
func (tc *testConsole) do(t *testing.T, method, path, user, body string, out any) *http.Response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if user != "" {
		req.Header.Set("Remote-User", user)
	}
	if method == http.MethodPost || method == http.MethodDelete {
		req.Header.Set(RequestHeader, "1")
	}
	rec := httptest.NewRecorder()
	tc.mux.ServeHTTP(rec, req)
	resp := rec.Result()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %d, body not JSON: %v", method, path, resp.StatusCode, err)
		}
	}
	return resp
}

func (tc *testConsole) rejected(reason string) float64 {
	return promtest.ToFloat64(tc.metrics.rejected.WithLabelValues(reason))
}

const transitState = `{"version": 1, "graph": "sankey", "dimensions": ["SrcAS", "InIfProvider"], "filter": "InIfBoundary = external"}`

func TestViewsRoundTrip(t *testing.T) {
	tc := newTestConsole(t, nil)

	// alice saves a private view and a shared one.
	var private, shared View
	if resp := tc.do(t, "POST", "/api/v0/console/views", "alice", `{"name": " Transit by AS ", "state": `+transitState+`}`, &private); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	} else if loc := resp.Header.Get("Location"); loc != "/api/v0/console/views/"+private.ID {
		t.Errorf("Location: %q", loc)
	}
	if private.Name != "Transit by AS" || private.Owner != "alice" || private.Shared || private.Version != StateVersion {
		t.Errorf("created view: %+v", private)
	}
	want := NeutralState()
	want.Graph, want.Dimensions, want.Filter = "sankey", []string{"SrcAS", "InIfProvider"}, "InIfBoundary = external"
	sameJSON(t, private.State, mustJSON(t, want))
	if d := testutil.Now().Sub(private.Created); d < 0 || d > time.Minute {
		t.Errorf("created %v, now %v", private.Created, testutil.Now())
	}
	tc.do(t, "POST", "/api/v0/console/views", "alice", `{"name": "Everything", "shared": true, "state": {"version": 1}}`, &shared)

	// bob sees the shared one only; alice sees both, hers first by name.
	var list struct{ Views []View }
	tc.do(t, "GET", "/api/v0/console/views", "bob", "", &list)
	if len(list.Views) != 1 || list.Views[0].ID != shared.ID {
		t.Errorf("bob's list: %+v", list.Views)
	}
	tc.do(t, "GET", "/api/v0/console/views", "alice", "", &list)
	if len(list.Views) != 2 || list.Views[0].Name != "Everything" || list.Views[1].Name != "Transit by AS" {
		t.Errorf("alice's list: %+v", list.Views)
	}
	if resp := tc.do(t, "GET", "/api/v0/console/views/"+private.ID, "bob", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob reading alice's private view: %d, want 404", resp.StatusCode)
	}
	var got View
	if resp := tc.do(t, "GET", "/api/v0/console/views/"+shared.ID, "bob", "", &got); resp.StatusCode != http.StatusOK || got.Name != "Everything" {
		t.Errorf("bob reading the shared view: %d %+v", resp.StatusCode, got)
	}

	// Saving under the same name replaces the view, same id.
	var replaced View
	if resp := tc.do(t, "POST", "/api/v0/console/views", "alice", `{"name": "Transit by AS", "shared": true, "state": {"version": 1, "graph": "lines"}}`, &replaced); resp.StatusCode != http.StatusOK {
		t.Errorf("replace: %d, want 200", resp.StatusCode)
	}
	if replaced.ID != private.ID || !replaced.Shared || replaced.State.Graph != "lines" || !replaced.Created.Equal(private.Created) {
		t.Errorf("replaced: %+v", replaced)
	}

	// Only the owner deletes.
	if resp := tc.do(t, "DELETE", "/api/v0/console/views/"+shared.ID, "bob", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob deleting: %d, want 403", resp.StatusCode)
	}
	if tc.rejected("not-owner") != 1 {
		t.Errorf("not-owner counted %v times", tc.rejected("not-owner"))
	}
	if resp := tc.do(t, "DELETE", "/api/v0/console/views/"+shared.ID, "alice", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("alice deleting: %d", resp.StatusCode)
	}
	if resp := tc.do(t, "DELETE", "/api/v0/console/views/"+shared.ID, "alice", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleting twice: %d, want 404", resp.StatusCode)
	}

	// The file holds what the API served: a new console reads the same views.
	again := openTestConsole(t, tc.cfg)
	var reread struct{ Views []View }
	again.do(t, "GET", "/api/v0/console/views", "alice", "", &reread)
	if len(reread.Views) != 1 {
		t.Fatalf("after reopening: %+v", reread.Views)
	}
	sameJSON(t, reread.Views[0], mustJSON(t, replaced))
	if n := promtest.ToFloat64(tc.metrics.writes.WithLabelValues("ok")); n != 4 {
		t.Errorf("%v writes counted, want 4", n)
	}
	if n := promtest.ToFloat64(again.metrics.views); n != 1 {
		t.Errorf("flowzero_console_views = %v", n)
	}
	// No temporary file is left beside it.
	entries, _ := os.ReadDir(filepath.Dir(tc.file))
	if len(entries) != 1 {
		t.Errorf("files beside the views file: %v", entries)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A views file written by an earlier build: an Akvorado-era state (version 0) is served
// migrated, a record no migration reads is logged, left out and kept in the file.
func TestViewsFileMigration(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "views.json")
	content := `{"format": 1, "views": [
	  {"id": "old1", "name": "From Akvorado", "owner": "alice", "shared": true, "version": 0,
	   "state": {"graphType": "lines", "humanStart": "1 hour ago", "humanEnd": "now", "limitType": "max",
	             "dimensions": ["SrcAS"], "limit": 5, "units": "pps", "filter": "", "bidirectional": true,
	             "previousPeriod": false, "truncate-v4": 24, "truncate-v6": 64},
	   "created": "2026-01-02T03:04:05Z", "updated": "2026-01-02T03:04:05Z"},
	  {"id": "future", "name": "From a newer build", "owner": "alice", "version": 9,
	   "state": {"version": 9, "graph": "radar"}, "created": "2026-01-02T03:04:05Z", "updated": "2026-01-02T03:04:05Z"}
	]}`
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.ViewsFile = file
	tc := openTestConsole(t, cfg)
	if !strings.Contains(tc.logs.String(), "view future") || !strings.Contains(tc.logs.String(), "newer console") {
		t.Errorf("log: %s", tc.logs.String())
	}
	if n := promtest.ToFloat64(tc.metrics.broken); n != 1 {
		t.Errorf("flowzero_console_views_unreadable = %v", n)
	}
	var v View
	if resp := tc.do(t, "GET", "/api/v0/console/views/old1", "bob", "", &v); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET old1: %d", resp.StatusCode)
	}
	want := NeutralState()
	want.Graph, want.Start, want.TopBy, want.Dimensions, want.Limit = "lines", "1 hour ago", "max", []string{"SrcAS"}, 5
	want.Units, want.Bidirectional, want.Truncate4, want.Truncate6 = "pps", true, 24, 64
	sameJSON(t, v.State, mustJSON(t, want))
	if v.Version != StateVersion {
		t.Errorf("version %d", v.Version)
	}
	if resp := tc.do(t, "GET", "/api/v0/console/views/future", "alice", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET future: %d, want 404", resp.StatusCode)
	}

	// The next change writes the migrated view at the current version and the unreadable
	// record as it was.
	tc.do(t, "POST", "/api/v0/console/views", "alice", `{"name": "New", "state": {}}`, nil)
	var f struct {
		Format int
		Views  []map[string]any
	}
	data, _ := os.ReadFile(file)
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if f.Format != viewsFormat || len(f.Views) != 3 {
		t.Fatalf("rewritten file: %s", data)
	}
	if f.Views[0]["version"] != float64(StateVersion) || f.Views[0]["state"].(map[string]any)["graph"] != "lines" {
		t.Errorf("migrated record: %v", f.Views[0])
	}
	if f.Views[2]["id"] != "future" || f.Views[2]["state"].(map[string]any)["graph"] != "radar" {
		t.Errorf("unreadable record not kept as it was: %v", f.Views[2])
	}
}

// TestViewsHugeVersion: a state whose version is past int's range is refused (400,
// invalid-view) when posted, and kept as unreadable when the views file holds it; it
// panicked the handler and console.New.
func TestViewsHugeVersion(t *testing.T) {
	tc := newTestConsole(t, nil)
	resp := tc.do(t, http.MethodPost, "/api/v0/console/views", "alice", `{"name":"x","state":{"version":1e19}}`, nil)
	if resp.StatusCode != http.StatusBadRequest || tc.rejected("invalid-view") != 1 {
		t.Errorf("POST version 1e19: %d, invalid-view %v", resp.StatusCode, tc.rejected("invalid-view"))
	}
	cfg := DefaultConfiguration()
	cfg.ViewsFile = filepath.Join(t.TempDir(), "views.json")
	content := `{"format":1,"views":[{"id":"a","name":"n","owner":"o","state":{"version":1e300},` +
		`"created":"2026-01-02T03:04:05Z","updated":"2026-01-02T03:04:05Z"}]}`
	if err := os.WriteFile(cfg.ViewsFile, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tc = openTestConsole(t, cfg)
	if n := promtest.ToFloat64(tc.metrics.broken); n != 1 {
		t.Errorf("flowzero_console_views_unreadable = %v, want 1", n)
	}
	if resp := tc.do(t, http.MethodGet, "/api/v0/console/views/a", "o", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET a: %d, want 404", resp.StatusCode)
	}
}

// A views file the console cannot read stops it, and stays as it was.
func TestViewsFileRefused(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":          `{"format": 1, "views": [`,
		"newer format":      `{"format": 2, "views": []}`,
		"not a views file":  `{"views": []}`,
		"a JSON array":      `[]`,
		"views not a list":  `{"format": 1, "views": {}}`,
		"a directory":       "",
		"permission denied": "{}",
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "views.json")
			switch name {
			case "a directory":
				os.Mkdir(file, 0o755)
			default:
				os.WriteFile(file, []byte(content), 0o644)
			}
			if name == "permission denied" {
				if os.Geteuid() == 0 {
					t.Skip("root reads any file")
				}
				os.Chmod(file, 0)
			}
			cfg := DefaultConfiguration()
			cfg.ViewsFile = file
			_, err := New(cfg, Dependencies{})
			if err == nil || !strings.Contains(err.Error(), file) {
				t.Fatalf("New = %v, want an error naming %s", err, file)
			}
			if name != "a directory" && name != "permission denied" {
				if data, _ := os.ReadFile(file); string(data) != content {
					t.Errorf("file changed: %s", data)
				}
			}
		})
	}
}

func TestViewsBounds(t *testing.T) {
	tc := newTestConsole(t, nil)
	tc.views.perUser, tc.views.total = 2, 3
	for _, c := range []struct {
		name, body string
		header     bool
		code       int
		reason     string
		message    string
	}{
		{"no request header", `{"name": "x", "state": {}}`, false, 403, "no-request-header", "X-Flowzero-Request"},
		{"body too large", `{"name": "x", "state": {"filter": "` + strings.Repeat("x", maxViewBody) + `"}}`, true, 413, "body-too-large", "larger than"},
		{"not JSON", `{"name": `, true, 400, "invalid-json", "invalid view"},
		{"unknown key", `{"name": "x", "state": {}, "owner": "bob"}`, true, 400, "invalid-json", `unknown field "owner"`},
		{"empty name", `{"name": "  ", "state": {}}`, true, 400, "invalid-view", "name: 1 to 100 bytes"},
		{"long name", `{"name": "` + strings.Repeat("n", maxViewName+1) + `", "state": {}}`, true, 400, "invalid-view", "name: 1 to 100 bytes"},
		{"control in name", `{"name": "a\u0007b", "state": {}}`, true, 400, "invalid-view", "printable"},
		{"no state", `{"name": "x"}`, true, 400, "invalid-view", "state: missing"},
		{"bad state", `{"name": "x", "state": {"units": "gbps"}}`, true, 400, "invalid-view", "state.units"},
		{"newer state", `{"name": "x", "state": {"version": 2}}`, true, 400, "invalid-view", "newer console"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/api/v0/console/views", strings.NewReader(c.body))
			if c.header {
				req.Header.Set(RequestHeader, "1")
			}
			rec := httptest.NewRecorder()
			before := tc.rejected(c.reason)
			tc.mux.ServeHTTP(rec, req)
			var e struct{ Message string }
			json.Unmarshal(rec.Body.Bytes(), &e)
			if rec.Code != c.code || !strings.Contains(e.Message, c.message) {
				t.Errorf("%d %q, want %d with %q", rec.Code, e.Message, c.code, c.message)
			}
			if tc.rejected(c.reason) != before+1 {
				t.Errorf("%s not counted", c.reason)
			}
		})
	}
	// Per user, then in all.
	for i, user := range []string{"alice", "alice", "alice", "bob", "carol"} {
		resp := tc.do(t, "POST", "/api/v0/console/views", user, `{"name": "v`+string(rune('0'+i))+`", "state": {}}`, nil)
		want := map[int]int{2: http.StatusConflict, 4: http.StatusConflict}[i]
		if want == 0 {
			want = http.StatusCreated
		}
		if resp.StatusCode != want {
			t.Errorf("view %d of %s: %d, want %d", i, user, resp.StatusCode, want)
		}
	}
	if tc.rejected("too-many-views") != 2 {
		t.Errorf("too-many-views counted %v", tc.rejected("too-many-views"))
	}
	// Replacing a view is not a new one.
	if resp := tc.do(t, "POST", "/api/v0/console/views", "alice", `{"name": "v0", "state": {}}`, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("replacing at the bound: %d", resp.StatusCode)
	}
	// DELETE needs the header too.
	req := httptest.NewRequest("DELETE", "/api/v0/console/views/whatever", nil)
	rec := httptest.NewRecorder()
	tc.mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("DELETE without the header: %d", rec.Code)
	}
}

// A failed write leaves the views as they were, in memory and on disk.
func TestViewsWriteFailure(t *testing.T) {
	tc := newTestConsole(t, nil)
	tc.do(t, "POST", "/api/v0/console/views", "alice", `{"name": "kept", "state": {}}`, nil)
	// A path below a regular file: no directory can be made there, even by root.
	tc.views.path = filepath.Join(tc.file, "views.json")
	if resp := tc.do(t, "POST", "/api/v0/console/views", "alice", `{"name": "lost", "state": {}}`, nil); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("write into a read-only directory: %d", resp.StatusCode)
	}
	var list struct{ Views []View }
	tc.do(t, "GET", "/api/v0/console/views", "alice", "", &list)
	if len(list.Views) != 1 || list.Views[0].Name != "kept" {
		t.Errorf("views after a failed write: %+v", list.Views)
	}
	if n := promtest.ToFloat64(tc.metrics.writes.WithLabelValues("error")); n != 1 {
		t.Errorf("write errors counted: %v", n)
	}
}

func TestUser(t *testing.T) {
	get := func(tc *testConsole, headers map[string]string) (int, User) {
		req := httptest.NewRequest("GET", "/api/v0/console/user", nil)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		tc.mux.ServeHTTP(rec, req)
		var u User
		json.Unmarshal(rec.Body.Bytes(), &u)
		return rec.Code, u
	}
	tc := newTestConsole(t, nil)
	for _, c := range []struct {
		name    string
		headers map[string]string
		code    int
		want    User
	}{
		{"default user", nil, 200, User{Login: "default", Name: "Default User"}},
		{"from the proxy", map[string]string{"Remote-User": "alice", "Remote-Name": "Alice Martin", "Remote-Email": "alice@example.net", "X-Logout-URL": "https://sso.example.net/logout"},
			200, User{Login: "alice", Name: "Alice Martin", Email: "alice@example.net", LogoutURL: "https://sso.example.net/logout"}},
		{"relative logout", map[string]string{"Remote-User": "alice", "X-Logout-URL": "/oauth2/sign_out"}, 200, User{Login: "alice", LogoutURL: "/oauth2/sign_out"}},
		{"javascript logout dropped", map[string]string{"Remote-User": "alice", "X-Logout-URL": "javascript:alert(1)"}, 200, User{Login: "alice"}},
		{"protocol-relative logout dropped", map[string]string{"Remote-User": "alice", "X-Logout-URL": "//evil.example/x"}, 200, User{Login: "alice"}},
		{"blank login is the default user", map[string]string{"Remote-User": "  "}, 200, User{Login: "default", Name: "Default User"}},
		{"login too long", map[string]string{"Remote-User": strings.Repeat("a", maxLogin+1)}, 400, User{}},
		{"login not printable", map[string]string{"Remote-User": "a\x01b"}, 400, User{}},
		{"name not printable dropped", map[string]string{"Remote-User": "alice", "Remote-Name": "x\x7fy"}, 200, User{Login: "alice"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, u := get(tc, c.headers)
			if code != c.code || (code == 200 && u != c.want) {
				t.Errorf("%d %+v, want %d %+v", code, u, c.code, c.want)
			}
		})
	}

	t.Run("proxy only", func(t *testing.T) {
		tc := newTestConsole(t, func(c *Configuration) { c.Auth.DefaultUser = DefaultUser{} })
		if code, _ := get(tc, nil); code != http.StatusUnauthorized {
			t.Errorf("without the header: %d, want 401", code)
		}
		if tc.rejected("no-user") != 1 {
			t.Error("no-user not counted")
		}
		if code, u := get(tc, map[string]string{"Remote-User": "alice"}); code != 200 || u.Login != "alice" {
			t.Errorf("with the header: %d %+v", code, u)
		}
	})
	t.Run("other header names", func(t *testing.T) {
		tc := newTestConsole(t, func(c *Configuration) {
			c.Auth.Headers = AuthHeaders{Login: "x-auth-request-user", Email: "X-Auth-Request-Email"}
		})
		code, u := get(tc, map[string]string{"X-Auth-Request-User": "bob", "X-Auth-Request-Email": "bob@example.net", "Remote-User": "mallory"})
		if code != 200 || u != (User{Login: "bob", Email: "bob@example.net"}) {
			t.Errorf("%d %+v", code, u)
		}
	})
}

func TestConfigurationValidate(t *testing.T) {
	if err := DefaultConfiguration().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mutate func(*Configuration)
		want   string
	}{
		{func(c *Configuration) { c.Auth.Headers.Login = "Remote User" }, `auth.headers.login: "Remote User" is not an HTTP header name`},
		{func(c *Configuration) { c.Auth.Headers.LogoutURL = "X:Logout" }, "auth.headers.logout-url:"},
		{func(c *Configuration) { c.Auth.Headers.Login, c.Auth.DefaultUser.Login = "", "" }, "auth.default-user.login: needed when auth.headers.login is empty"},
		{func(c *Configuration) { c.Auth.DefaultUser.Login = "a\tb" }, "auth.default-user.login: a login is printable"},
		{func(c *Configuration) { c.Auth.DefaultUser.Name = strings.Repeat("n", 300) }, "auth.default-user.name: longer than 256 bytes"},
		{func(c *Configuration) { c.ViewsFile = "" }, "views-file: a file is needed"},
	} {
		cfg := DefaultConfiguration()
		c.mutate(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want %q", err, c.want)
		}
	}
	cfg := DefaultConfiguration()
	cfg.Enabled, cfg.ViewsFile = false, ""
	if err := cfg.Validate(); err != nil {
		t.Errorf("disabled without a views file: %v", err)
	}
}

// The patterns mount on a mux holding the collector's own (collector/http.go) and the RIB
// lookup's without a conflict (ServeMux panics on one), and each request reaches its handler.
func TestHandlersBesideTheCollectors(t *testing.T) {
	tc := newTestConsole(t, nil)
	mux := http.NewServeMux()
	mark := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	}
	for _, p := range []string{"GET /metrics", "GET /healthz", "GET /api/v0/exporters", "POST /api/v0/reload",
		"/api/v0/rib/lookup", "/debug/pprof/", "/debug/pprof/cmdline", "POST /api/v0/query/line", "GET /api/v0/query/config"} {
		mux.Handle(p, mark(p))
	}
	for p, h := range tc.Handlers() {
		mux.Handle(p, h)
	}
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/metrics", "GET /metrics"},
		{"GET", "/debug/pprof/", "/debug/pprof/"},
		{"POST", "/api/v0/rib/lookup", "/api/v0/rib/lookup"},
		{"GET", "/api/v0/rib/lookup", "/api/v0/rib/lookup"},
		{"GET", "/api/v0/query/config", "GET /api/v0/query/config"},
		{"GET", "/api/v0/console/user", `{"login":"default","name":"Default User"}`},
		{"GET", "/api/v0/nothing", `{"message":"no API route /api/v0/nothing"}`},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if got := strings.TrimSpace(rec.Body.String()); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.want)
		}
	}
}
