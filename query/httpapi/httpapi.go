// Package httpapi serves the query layer over HTTP: the routes of docs/api.md under
// /api/v0/query/ (time series, Sankey, table, flow records, filter validation and
// completion, the console's configuration, the home page widgets), JSON in and out.
//
// # Design
//
// The handler depends on a query.Service, which depends on a query.Engine (run a SELECT, get
// its bytes): the collector mounts it on its HTTP server with the engine it has (the
// embedded one the store sink writes to, or a ClickHouse server), the tests with theirs.
//
// Every request is bounded: bodies to 1 MiB (413 past it), JSON decoded strictly (an
// unknown field is a 400 naming it), POST bodies must say Content-Type: application/json (a
// web page of another origin cannot send that without a CORS preflight, which this server
// never grants), and the engine's work by query.Configuration: a timeout and a memory limit
// set on the SQL itself (max_execution_time, max_memory_usage; 504 and 503), max-concurrent
// queries at once and max-queued waiting, past which the answer is 429 with Retry-After.
// Identical requests within cache-duration share one answer: a request running is joined
// (singleflight), a finished one is served from a cache bounded in bytes. Every answer of a
// query carries the SQL that ran (X-SQL-Query, newlines as spaces, cut at 16 KiB; whole in
// the body's sql field), the table chosen (X-Flowzero-Table), every table read by the line,
// table and Sankey routes (X-Flowzero-Tables) and whether it came from the
// cache (X-Flowzero-Cache: miss, hit, or shared with a request running).
//
// Errors are JSON, {"message": ...}: a bad field adds "field", a bad filter "field":
// "filter", its "position" (offset, line, column) and what was "expected" there.
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
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"flowzero/internal/lograte"
	"flowzero/query"
	"flowzero/query/filter"
)

// Prefix is where the collector mounts the handler.
const Prefix = "/api/v0/query/"

// Limits of a request.
const (
	MaxBody = 1 << 20
	// maxSQLHeader bounds the X-SQL-Query header (the body's sql field has all of it).
	maxSQLHeader = 16 << 10
	// retryAfter is the Retry-After of a 429, in seconds.
	retryAfter = 1
)

// Handler serves the query API.
type Handler struct {
	svc     *query.Service
	cfg     query.Configuration
	version string
	log     *slog.Logger
	logRate *lograte.Limiter
	mux     *http.ServeMux
	m       *metrics

	admitted chan struct{} // running and waiting: max-concurrent + max-queued
	running  chan struct{} // running: max-concurrent
	cache    *cache
	inflight singleflight.Group
}

// route is one route: its name (the metrics' label), method and path under Prefix.
type route struct {
	name, method string
	run          func(h *Handler, r *http.Request, body []byte) (any, error)
	// cached routes share answers between identical requests.
	cached bool
}

var routes = []route{
	{"line", http.MethodPost, decodeThen((*query.Service).Line), true},
	{"sankey", http.MethodPost, decodeThen((*query.Service).Sankey), true},
	{"table", http.MethodPost, decodeThen((*query.Service).Table), true},
	{"flows", http.MethodPost, decodeThen((*query.Service).Flows), true},
	{"sql", http.MethodPost, decodeThen((*query.Service).RawSQL), false},
	{"filter/validate", http.MethodPost, (*Handler).validate, true},
	{"filter/complete", http.MethodPost, (*Handler).complete, true},
	{"config", http.MethodGet, func(h *Handler, r *http.Request, _ []byte) (any, error) {
		return h.svc.Config(r.Context(), h.version)
	}, false},
	{"widgets/flow-rate", http.MethodGet, func(h *Handler, r *http.Request, _ []byte) (any, error) {
		return h.svc.FlowRate(r.Context())
	}, true},
	{"widgets/exporters", http.MethodGet, func(h *Handler, r *http.Request, _ []byte) (any, error) {
		return h.svc.Exporters(r.Context())
	}, true},
	{"widgets/last-flow", http.MethodGet, func(h *Handler, r *http.Request, _ []byte) (any, error) {
		return h.svc.LastFlow(r.Context())
	}, true},
	{"widgets/top", http.MethodGet, func(h *Handler, r *http.Request, _ []byte) (any, error) {
		q := r.URL.Query()
		if q.Get("dimension") == "" {
			return nil, &query.RequestError{Field: "dimension", Message: "missing (a column name)"}
		}
		return h.svc.Top(r.Context(), q.Get("dimension"), q.Get("filter"))
	}, true},
	{"widgets/graph", http.MethodGet, func(h *Handler, r *http.Request, _ []byte) (any, error) {
		q := r.URL.Query()
		points := 0
		if p := q.Get("points"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, &query.RequestError{Field: "points", Message: fmt.Sprintf("%q is not a number", p)}
			}
			points = n
		}
		return h.svc.Graph(r.Context(), points, q.Get("filter"))
	}, true},
}

// decodeThen decodes the body into a request and runs it.
func decodeThen[Req any, Res any](run func(*query.Service, context.Context, Req) (Res, error)) func(*Handler, *http.Request, []byte) (any, error) {
	return func(h *Handler, r *http.Request, body []byte) (any, error) {
		var req Req
		if err := decode(body, &req); err != nil {
			return nil, err
		}
		return run(h.svc, r.Context(), req)
	}
}

// badJSON is a body that does not decode.
type badJSON struct{ err error }

func (e *badJSON) Error() string { return "invalid JSON body: " + e.err.Error() }

func decode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &badJSON{err}
	}
	if dec.More() {
		return &badJSON{errors.New("more than one JSON value")}
	}
	return nil
}

// New returns the handler of the query API on svc; version is the collector's (GET config).
// Its metrics are registered on r (nil: not registered).
func New(r prometheus.Registerer, svc *query.Service, version string, log *slog.Logger) (*Handler, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg := svc.Configuration()
	h := &Handler{svc: svc, cfg: cfg, version: version, log: log, logRate: lograte.New(5, 30*time.Second),
		mux:      http.NewServeMux(),
		admitted: make(chan struct{}, cfg.MaxConcurrent+cfg.MaxQueued),
		running:  make(chan struct{}, cfg.MaxConcurrent),
		cache:    newCache(cfg.CacheDuration, cfg.CacheSize),
	}
	var names []string
	for _, rt := range routes {
		names = append(names, rt.name)
	}
	m, err := newMetrics(r, append(names, "other"))
	if err != nil {
		return nil, err
	}
	h.m = m
	for _, rt := range routes {
		h.mux.Handle(Prefix+rt.name, h.serve(rt))
	}
	return h, nil
}

// Register mounts the handler on mux at Prefix.
func (h *Handler) Register(mux *http.ServeMux) { mux.Handle(Prefix, h) }

// ServeHTTP serves the routes under Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.m.routes["other"].errors[reasonNotFound].Inc()
		writeError(w, http.StatusNotFound, map[string]any{"message": "no such query route: " + r.URL.Path})
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) serve(rt route) http.Handler {
	rm := h.m.routes[rt.name]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rm.requests.Inc()
		defer func() { rm.duration.Observe(time.Since(start).Seconds()) }()
		if r.Method != rt.method {
			w.Header().Set("Allow", rt.method)
			rm.errors[reasonMethod].Inc()
			writeError(w, http.StatusMethodNotAllowed, map[string]any{"message": "use " + rt.method})
			return
		}
		var body []byte
		key := rt.name + "?" + r.URL.RawQuery
		if rt.method == http.MethodPost {
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				rm.errors[reasonBadRequest].Inc()
				writeError(w, http.StatusUnsupportedMediaType, map[string]any{"message": "send the body as JSON, with Content-Type: application/json"})
				return
			}
			var err error
			body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
			if err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					rm.errors[reasonTooLarge].Inc()
					writeError(w, http.StatusRequestEntityTooLarge, map[string]any{"message": fmt.Sprintf("the body is larger than %d bytes", MaxBody)})
					return
				}
				rm.errors[reasonBadRequest].Inc()
				writeError(w, http.StatusBadRequest, map[string]any{"message": "reading the body: " + err.Error()})
				return
			}
			key += "\n" + canonical(body)
		}
		if rt.cached {
			if a := h.cache.get(key, time.Now()); a != nil {
				rm.cacheHits.Inc()
				writeAnswer(w, a, "hit")
				return
			}
		}
		run := func(r *http.Request) (any, error) {
			if err := h.admit(r.Context()); err != nil {
				return nil, err
			}
			defer h.leave()
			res, err := rt.run(h, r, body)
			if err != nil {
				return nil, err
			}
			return encode(res)
		}
		var v any
		var err error
		shared := false
		if rt.cached {
			// Requests joining this one get its answer; it runs on its own context so that
			// the first client going away does not fail the others.
			ran := false
			v, err, shared = h.inflight.Do(key, func() (any, error) {
				ran = true
				a, err := run(r.WithContext(context.WithoutCancel(r.Context())))
				if err == nil {
					h.cache.put(key, a.(*answer), time.Now())
				}
				return a, err
			})
			shared = shared && !ran
		} else {
			v, err = run(r)
		}
		if err != nil {
			h.fail(w, r, rm, err)
			return
		}
		status := "miss"
		if shared {
			rm.cacheHits.Inc()
			status = "shared"
		}
		writeAnswer(w, v.(*answer), status)
	})
}

// errBusy is a request refused because too many are running and waiting.
var errBusy = errors.New("too many queries are running: try again in a moment")

// admit waits for a turn to run a query: refused at once past max-concurrent + max-queued,
// and after the query timeout of waiting.
func (h *Handler) admit(ctx context.Context) error {
	select {
	case h.admitted <- struct{}{}:
	default:
		return errBusy
	}
	h.m.queued.Inc()
	defer h.m.queued.Dec()
	wait, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	select {
	case h.running <- struct{}{}:
		h.m.running.Inc()
		return nil
	case <-wait.Done():
		<-h.admitted
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errBusy
	}
}

func (h *Handler) leave() {
	h.m.running.Dec()
	<-h.running
	<-h.admitted
}

// canonical is a JSON body re-encoded without spacing differences, for the cache key; a body
// that does not decode is kept as it is (its request fails anyway).
func canonical(body []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err != nil {
		return string(body)
	}
	return buf.String()
}

// encode turns a result into its answer.
func encode(res any) (*answer, error) {
	body, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	a := &answer{body: append(body, '\n')}
	switch r := res.(type) {
	case *query.LineResult:
		a.sql, a.table, a.tables = r.SQL, r.Table, r.Tables
	case *query.SankeyResult:
		a.sql, a.table, a.tables = r.SQL, r.Table, r.Tables
	case *query.TableResult:
		a.sql, a.table, a.tables = r.SQL, r.Table, r.Tables
	case *query.FlowsResult:
		a.sql, a.table = r.SQL, r.Table
	case *query.FlowRate:
		a.sql = r.SQL
	case *query.Exporters:
		a.sql, a.table = r.SQL, r.Table
	case *query.LastFlow:
		a.sql = r.SQL
	case *query.Top:
		a.sql, a.table = r.SQL, r.Table
	}
	return a, nil
}

func writeAnswer(w http.ResponseWriter, a *answer, cache string) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Flowzero-Cache", cache)
	if a.sql != "" {
		sql := strings.ReplaceAll(a.sql, "\n", " ")
		if len(sql) > maxSQLHeader {
			sql = strings.ToValidUTF8(sql[:maxSQLHeader], "") + "…"
		}
		hd.Set("X-SQL-Query", sql)
	}
	if a.table != "" {
		hd.Set("X-Flowzero-Table", a.table)
	}
	if len(a.tables) > 0 {
		hd.Set("X-Flowzero-Tables", strings.Join(a.tables, ", "))
	}
	w.WriteHeader(http.StatusOK)
	w.Write(a.body)
}

func writeError(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// fail answers an error with its status and a body a person understands.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, rm *routeMetrics, err error) {
	var (
		fe  *filter.Error
		re  *query.RequestError
		bj  *badJSON
		ee  *query.EngineError
		msg = err.Error()
	)
	switch {
	case errors.As(err, &fe):
		rm.errors[reasonBadRequest].Inc()
		writeError(w, http.StatusBadRequest, map[string]any{"message": "filter: " + fe.Message, "field": "filter",
			"position": fe.Position, "expected": fe.Expected})
	case errors.As(err, &re):
		rm.errors[reasonBadRequest].Inc()
		writeError(w, http.StatusBadRequest, map[string]any{"message": re.Error(), "field": re.Field})
	case errors.As(err, &bj):
		rm.errors[reasonBadRequest].Inc()
		writeError(w, http.StatusBadRequest, map[string]any{"message": msg})
	case errors.Is(err, errBusy):
		rm.errors[reasonBusy].Inc()
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		writeError(w, http.StatusTooManyRequests, map[string]any{"message": msg})
	case r.Context().Err() != nil:
		// The client is gone: nobody reads the answer.
		rm.errors[reasonCanceled].Inc()
	case errors.As(err, &ee) && ee.Kind == query.EngineTimeout:
		rm.errors[reasonTimeout].Inc()
		writeError(w, http.StatusGatewayTimeout, map[string]any{"message": shorten(msg)})
	case errors.As(err, &ee) && ee.Kind == query.EngineMemory:
		rm.errors[reasonMemory].Inc()
		writeError(w, http.StatusServiceUnavailable, map[string]any{"message": shorten(msg)})
	default:
		rm.errors[reasonEngine].Inc()
		if ok, suppressed := h.logRate.Allow(time.Now()); ok {
			h.log.Error("query API: the engine failed", "path", r.URL.Path, "error", err, "suppressed", suppressed)
		}
		writeError(w, http.StatusInternalServerError, map[string]any{"message": shorten(msg)})
	}
}

func shorten(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// ValidateRequest is the body of filter/validate.
type ValidateRequest struct {
	Filter string `json:"filter"`
}

// ValidateResult is its answer (always 200).
type ValidateResult struct {
	Valid      bool             `json:"valid"`
	Normalized string           `json:"normalized,omitempty"`
	Message    string           `json:"message,omitempty"`
	Position   *filter.Position `json:"position,omitempty"`
	Expected   []string         `json:"expected,omitempty"`
}

func (h *Handler) validate(r *http.Request, body []byte) (any, error) {
	var req ValidateRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	f, err := h.svc.ValidateFilter(r.Context(), req.Filter)
	var fe *filter.Error
	switch {
	case err == nil:
		return ValidateResult{Valid: true, Normalized: f.String()}, nil
	case errors.As(err, &fe):
		return ValidateResult{Message: fe.Message, Position: &fe.Position, Expected: fe.Expected}, nil
	}
	return nil, err
}

// CompleteRequest is the body of filter/complete: a filter and the cursor's byte offset.
type CompleteRequest struct {
	Filter string `json:"filter"`
	Offset int    `json:"offset"`
}

func (h *Handler) complete(r *http.Request, body []byte) (any, error) {
	var req CompleteRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.Offset < 0 || req.Offset > len(req.Filter) {
		return nil, &query.RequestError{Field: "offset", Message: fmt.Sprintf("must be in 0..%d (a byte offset in the filter), not %d", len(req.Filter), req.Offset)}
	}
	if len(req.Filter) > filter.MaxLength {
		return nil, &query.RequestError{Field: "filter", Message: fmt.Sprintf("longer than %d bytes", filter.MaxLength)}
	}
	return h.svc.Complete(r.Context(), req.Filter, req.Offset), nil
}
