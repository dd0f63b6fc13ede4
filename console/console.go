// Package console serves flowzero's web console: the front end built from console/frontend
// (Vue 3, Apache ECharts, CodeMirror 6) and embedded in the binary, the user as a reverse
// proxy authenticated them, and the saved views.
//
// # Design
//
// The pages query the collector's HTTP API (docs/api.md); this package adds only what the
// console itself owns. Handlers returns the handlers by ServeMux pattern, for the collector's
// server (collector.Dependencies.Handlers), so the console shares its listener (loopback by
// default) and its guards. Who the user is comes from headers set by an authenticating
// proxy (Remote-User, as Akvorado), or is a configured default user.
//
// A saved view is a Visualize state: every setting of the page, versioned. States of older
// versions are migrated when read, so links and views survive upgrades; the front end
// (src/state) and MigrateState read the same cases (testdata/states.json). The views live in
// one small JSON file, rewritten atomically on each change: they change at a person's pace,
// and a file beside the store survives a store being recreated. See docs/design/console.md.
package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/clock"
)

// RequestHeader must be present on requests that change state (POST, DELETE): a web page
// of another origin cannot send it without a CORS preflight, which the server never grants.
// It is the collector's header of the same name.
const RequestHeader = "X-Flowzero-Request"

// Dependencies are what the console takes from the application.
type Dependencies struct {
	// Registry receives the metrics (nil: not registered).
	Registry prometheus.Registerer
	// Logger logs the views file's problems (nil: slog.Default()).
	Logger *slog.Logger
	// Clock dates the saved views (nil: the system clock).
	Clock clock.Clock
	// Assets replaces the embedded front end (tests); nil serves the embedded build.
	Assets fs.FS
}

// Console serves the console's pages and API.
type Console struct {
	cfg     Configuration
	log     *slog.Logger
	views   *viewStore
	assets  *assets
	metrics *metrics
}

// New reads the saved views file and returns the console. A views file that cannot be read
// is an error, so that it is never overwritten; its records that no migration reads are
// logged, kept in the file and left out of the API.
func New(cfg Configuration, deps Dependencies) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Auth.Headers.Login = canonical(cfg.Auth.Headers.Login)
	cfg.Auth.Headers.Name = canonical(cfg.Auth.Headers.Name)
	cfg.Auth.Headers.Email = canonical(cfg.Auth.Headers.Email)
	cfg.Auth.Headers.LogoutURL = canonical(cfg.Auth.Headers.LogoutURL)
	c := &Console{cfg: cfg, log: deps.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	store, warnings, err := openViewStore(cfg.ViewsFile, deps.Clock)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	for _, w := range warnings {
		c.log.Warn("console: saved view not served", "file", cfg.ViewsFile, "problem", w)
	}
	c.views = store
	if c.metrics, err = newMetrics(deps.Registry, store); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	fsys := deps.Assets
	if fsys == nil {
		fsys, _ = fs.Sub(distFS, "dist")
	}
	c.assets = newAssets(fsys, func(kind string) { c.metrics.assets.WithLabelValues(kind).Inc() })
	return c, nil
}

// Handlers returns the console's handlers by ServeMux pattern. "/" (the pages, with
// index.html for the console's own routes) is the least specific pattern of a mux and takes
// no method, so that it conflicts with none of the collector's.
func (c *Console) Handlers() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /api/v0/console/user":          http.HandlerFunc(c.handleUser),
		"GET /api/v0/console/views":         http.HandlerFunc(c.handleListViews),
		"POST /api/v0/console/views":        http.HandlerFunc(c.handleCreateView),
		"GET /api/v0/console/views/{id}":    http.HandlerFunc(c.handleGetView),
		"DELETE /api/v0/console/views/{id}": http.HandlerFunc(c.handleDeleteView),
		"/":                                 c.assets,
	}
}

// writeJSON answers v with code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// writeError answers {"message": msg} with code, as every API error (docs/api.md).
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"message": msg})
}

// refuse counts a refused request and answers it.
func (c *Console) refuse(w http.ResponseWriter, reason string, code int, msg string) {
	c.metrics.rejected.WithLabelValues(reason).Inc()
	writeError(w, code, msg)
}

// user returns the request's user, or answers the refusal and returns false.
func (c *Console) user(w http.ResponseWriter, r *http.Request) (User, bool) {
	u, err := c.userOf(r)
	switch {
	case errors.Is(err, errNoUser):
		c.refuse(w, "no-user", http.StatusUnauthorized, "not authenticated: the console expects the header "+c.cfg.Auth.Headers.Login+" from its reverse proxy")
		return User{}, false
	case err != nil:
		c.refuse(w, "bad-user", http.StatusBadRequest, err.Error())
		return User{}, false
	}
	return u, true
}

// stateChange checks the header of state-changing requests.
func (c *Console) stateChange(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get(RequestHeader) == "" {
		c.refuse(w, "no-request-header", http.StatusForbidden, "send the header "+RequestHeader+": 1 with this request")
		return false
	}
	return true
}

func (c *Console) handleUser(w http.ResponseWriter, r *http.Request) {
	if u, ok := c.user(w, r); ok {
		writeJSON(w, http.StatusOK, u)
	}
}

func (c *Console) handleListViews(w http.ResponseWriter, r *http.Request) {
	u, ok := c.user(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string][]View{"views": c.views.list(u.Login)})
}

func (c *Console) handleGetView(w http.ResponseWriter, r *http.Request) {
	u, ok := c.user(w, r)
	if !ok {
		return
	}
	v, found := c.views.get(u.Login, r.PathValue("id"))
	if !found {
		c.refuse(w, "not-found", http.StatusNotFound, "no saved view "+r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (c *Console) handleCreateView(w http.ResponseWriter, r *http.Request) {
	if !c.stateChange(w, r) {
		return
	}
	u, ok := c.user(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxViewBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			c.refuse(w, "body-too-large", http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxViewBody))
			return
		}
		c.refuse(w, "invalid-json", http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var req viewRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		c.refuse(w, "invalid-json", http.StatusBadRequest, "invalid view: "+err.Error())
		return
	}
	name, err := checkViewName(req.Name)
	if err != nil {
		c.refuse(w, "invalid-view", http.StatusBadRequest, err.Error())
		return
	}
	if len(req.State) == 0 {
		c.refuse(w, "invalid-view", http.StatusBadRequest, "state: missing")
		return
	}
	state, err := MigrateState(req.State)
	if err != nil {
		c.refuse(w, "invalid-view", http.StatusBadRequest, err.Error())
		return
	}
	v, created, err := c.views.put(u.Login, name, req.Shared, state)
	switch {
	case errors.Is(err, errTooManyViews):
		c.refuse(w, "too-many-views", http.StatusConflict, err.Error())
		return
	case err != nil:
		c.metrics.writes.WithLabelValues("error").Inc()
		c.log.Error("console: saving the views file failed", "file", c.cfg.ViewsFile, "error", err)
		writeError(w, http.StatusInternalServerError, "the view could not be saved: "+err.Error())
		return
	}
	c.metrics.writes.WithLabelValues("ok").Inc()
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		w.Header().Set("Location", "/api/v0/console/views/"+v.ID)
	}
	writeJSON(w, code, v)
}

func (c *Console) handleDeleteView(w http.ResponseWriter, r *http.Request) {
	if !c.stateChange(w, r) {
		return
	}
	u, ok := c.user(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	switch err := c.views.remove(u.Login, id); {
	case errors.Is(err, errNotFound):
		c.refuse(w, "not-found", http.StatusNotFound, "no saved view "+id)
	case errors.Is(err, errNotOwner):
		c.refuse(w, "not-owner", http.StatusForbidden, "only its owner deletes a view")
	case err != nil:
		c.metrics.writes.WithLabelValues("error").Inc()
		c.log.Error("console: saving the views file failed", "file", c.cfg.ViewsFile, "error", err)
		writeError(w, http.StatusInternalServerError, "the view could not be deleted: "+err.Error())
	default:
		c.metrics.writes.WithLabelValues("ok").Inc()
		writeJSON(w, http.StatusOK, map[string]string{"deleted": id})
	}
}
