// Package chhttp answers ClickHouse's HTTP query protocol with read-only SELECT statements
// on the stored flows, so that ClickHouse clients (clickhouse-go, clickhouse-client over
// HTTP, curl) and Grafana's ClickHouse data source read the collector's embedded store.
package chhttp

import (
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/lograte"
	"flowzero/query"
)

// Runner runs a statement of the protocol (query.Service.ClickHouse).
type Runner interface {
	ClickHouse(ctx context.Context, req query.ClickHouseRequest) (*query.RawSQLResult, error)
}

// Server is the listener of ClickHouse's HTTP protocol.
type Server struct {
	cfg     query.ClickHouseHTTPConfiguration
	runner  Runner
	timeout time.Duration
	log     *slog.Logger
	logRate *lograte.Limiter
	metrics *metrics
	// slots bounds the statements running or waiting at once.
	slots chan struct{}

	mu  sync.Mutex
	srv *http.Server
	ln  net.Listener
}

// New returns the server of cfg; timeout bounds a statement (the query section's timeout),
// concurrent the statements that run or wait at once (max-concurrent plus max-queued).
func New(r prometheus.Registerer, cfg query.ClickHouseHTTPConfiguration, runner Runner, timeout time.Duration,
	concurrent int, log *slog.Logger) (*Server, error) {
	m, err := newMetrics(r)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, runner: runner, timeout: timeout, log: log, logRate: lograte.New(5, time.Minute),
		metrics: m, slots: make(chan struct{}, max(concurrent, 1))}, nil
}

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("query.clickhouse-http.listen: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.timeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	go s.srv.Serve(ln)
	s.log.Info("ClickHouse HTTP protocol listening", "address", ln.Addr().String())
	return nil
}

// Addr is the listener's address (after Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ln.Addr()
}

// Stop closes the listener and waits for the statements running to end (at most 5 s).
func (s *Server) Stop() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return srv.Close()
	}
	return nil
}

// ClickHouse's error codes the server answers with itself; the engine's errors carry
// their own.
const (
	codeSyntax        = 62  // SYNTAX_ERROR
	codeUnknownTable  = 60  // UNKNOWN_TABLE
	codeUnknownFormat = 73  // UNKNOWN_FORMAT
	codeUnknownDB     = 81  // UNKNOWN_DATABASE
	codeTooLarge      = 307 // TOO_LARGE_STRING_SIZE
	codeNotSupported  = 48  // NOT_IMPLEMENTED
	codeReadOnly      = 164 // READONLY
	codeTooMany       = 202 // TOO_MANY_SIMULTANEOUS_QUERIES
	codeAuth          = 516 // AUTHENTICATION_FAILED
	codeTimeout       = 159 // TIMEOUT_EXCEEDED
	codeMemory        = 241 // MEMORY_LIMIT_EXCEEDED
	codeUnknown       = 1002
)

var codeNames = map[int]string{codeSyntax: "SYNTAX_ERROR", codeUnknownTable: "UNKNOWN_TABLE", codeUnknownFormat: "UNKNOWN_FORMAT",
	codeUnknownDB: "UNKNOWN_DATABASE", codeTooLarge: "TOO_LARGE_STRING_SIZE", codeNotSupported: "NOT_IMPLEMENTED",
	codeReadOnly: "READONLY", codeTooMany: "TOO_MANY_SIMULTANEOUS_QUERIES", codeAuth: "AUTHENTICATION_FAILED",
	codeTimeout: "TIMEOUT_EXCEEDED", codeMemory: "MEMORY_LIMIT_EXCEEDED", codeUnknown: "UNKNOWN_EXCEPTION"}

// protocolParams are the URL parameters of the protocol that are not settings.
var protocolParams = map[string]bool{"query": true, "database": true, "default_format": true,
	"user": true, "password": true, "query_id": true, "quota_key": true, "client_protocol_version": true,
	"session_id": true, "session_timeout": true, "session_check": true,
	"enable_http_compression": true, "http_zlib_compression_level": true,
	"wait_end_of_query": true, "send_progress_in_http_headers": true, "buffer_size": true,
	"http_headers_progress_interval_ms": true, "cancel_http_readonly_queries_on_client_close": true}

// ServeHTTP answers /ping and / (a statement, or "Ok." without one).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w.Header().Set("X-ClickHouse-Server-Display-Name", "flowzero")
	switch {
	case r.URL.Path == "/ping":
		io.WriteString(w, "Ok.\n")
		return
	case r.URL.Path != "/":
		s.fail(w, http.StatusNotFound, codeNotSupported, "only / and /ping are served here, not "+r.URL.Path, resultBad)
		return
	case r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodHead:
		s.fail(w, http.StatusMethodNotAllowed, codeNotSupported, "method "+r.Method+" is not served", resultBad)
		return
	}
	if !s.authorized(r) {
		if ok, _ := s.logRate.Allow(time.Now()); ok {
			s.log.Warn("ClickHouse HTTP protocol: authentication failed", "client", r.RemoteAddr)
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="flowzero"`)
		s.fail(w, http.StatusUnauthorized, codeAuth, "authentication failed: wrong user or password", resultUnauthorized)
		return
	}
	params := r.URL.Query()
	sql := params.Get("query")
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.cfg.MaxBodyBytes)))
		if err != nil {
			s.fail(w, http.StatusRequestEntityTooLarge, codeTooLarge,
				fmt.Sprintf("the statement is larger than query.clickhouse-http.max-body-bytes (%d)", s.cfg.MaxBodyBytes), resultBad)
			return
		}
		sql = strings.TrimSpace(sql + "\n" + string(body))
	}
	if len(sql) > s.cfg.MaxBodyBytes {
		s.fail(w, http.StatusRequestEntityTooLarge, codeTooLarge,
			fmt.Sprintf("the statement is larger than query.clickhouse-http.max-body-bytes (%d)", s.cfg.MaxBodyBytes), resultBad)
		return
	}
	if sql == "" {
		io.WriteString(w, "Ok.\n")
		return
	}
	if msg := s.checkParams(params); msg != "" {
		s.fail(w, http.StatusBadRequest, codeNotSupported, msg, resultBad)
		return
	}
	if db := params.Get("database"); db != "" && db != "default" {
		s.fail(w, http.StatusBadRequest, codeUnknownDB, fmt.Sprintf("database %s: only the default database is current "+
			"here; name tables with their database (flowzero.flows)", db), resultBad)
		return
	}
	if r.Header.Get("X-ClickHouse-Database") != "" && r.Header.Get("X-ClickHouse-Database") != "default" {
		s.fail(w, http.StatusBadRequest, codeUnknownDB, "only the default database is current here; name tables "+
			"with their database (flowzero.flows)", resultBad)
		return
	}
	settings := map[string]string{}
	for name, values := range params {
		if !protocolParams[name] && !strings.HasPrefix(name, "param_") {
			settings[name] = values[len(values)-1]
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout+5*time.Second)
	defer cancel()
	select {
	case s.slots <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "1")
		s.fail(w, http.StatusTooManyRequests, codeTooMany, "too many statements at once: try again", resultBusy)
		return
	}
	res, err := s.runner.ClickHouse(ctx, query.ClickHouseRequest{SQL: sql,
		DefaultFormat: params.Get("default_format"), Settings: settings})
	<-s.slots
	if err != nil {
		s.failErr(w, err)
		return
	}
	if strings.EqualFold(res.Format, "Native") {
		version, _ := strconv.Atoi(params.Get("client_protocol_version"))
		out, err := nativeFor([]byte(res.Output), version)
		if err != nil {
			s.fail(w, http.StatusBadRequest, codeNotSupported, err.Error()+": ask for another format", resultBad)
			return
		}
		res.Output = string(out)
	}
	if id := params.Get("query_id"); id != "" && len(id) <= 128 {
		w.Header().Set("X-ClickHouse-Query-Id", id)
	}
	w.Header().Set("X-ClickHouse-Format", res.Format)
	w.Header().Set("Content-Type", contentType(res.Format))
	var out io.Writer = w
	if params.Get("enable_http_compression") == "1" {
		switch enc := acceptedEncoding(r.Header.Get("Accept-Encoding")); enc {
		case "gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			defer zw.Close()
			out = zw
		case "deflate":
			w.Header().Set("Content-Encoding", "deflate")
			zw := zlib.NewWriter(w)
			defer zw.Close()
			out = zw
		}
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(res.Output)))
	}
	if r.Method != http.MethodHead {
		io.WriteString(out, res.Output)
	}
	s.metrics.done(resultOK, time.Since(start))
}

// checkParams refuses the parts of the protocol that are not served: sessions, query
// parameters and ClickHouse's own compression of the answer.
func (s *Server) checkParams(params map[string][]string) string {
	for name := range params {
		switch {
		case strings.HasPrefix(name, "param_"):
			return "query parameters ({name:Type}) are not supported here: put the values in the statement"
		case name == "session_id":
			return "sessions are not supported here"
		}
	}
	if v, ok := params["compress"]; ok && len(v) > 0 && v[0] != "0" {
		return "compress=1 (ClickHouse's own compression of the answer) is not supported here: use enable_http_compression=1 with gzip or deflate"
	}
	return ""
}

// authorized checks the credentials of r: basic authentication, the X-ClickHouse-User and
// X-ClickHouse-Key headers, or the user and password parameters, as ClickHouse takes them.
func (s *Server) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		user, pass = r.Header.Get("X-ClickHouse-User"), r.Header.Get("X-ClickHouse-Key")
		if user == "" {
			q := r.URL.Query()
			user, pass = q.Get("user"), q.Get("password")
		}
	}
	if s.cfg.Password == "" {
		return user == "" || user == s.cfg.User
	}
	u := subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.User))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(s.cfg.Password))
	return u&p == 1
}

var engineCode = regexp.MustCompile(`Code: (\d+)\. DB::Exception: `)

// failErr answers err of the runner as ClickHouse would: the engine's own code and text,
// or a code for the statements the collector refuses.
func (s *Server) failErr(w http.ResponseWriter, err error) {
	var re *query.RequestError
	var ee *query.EngineError
	switch {
	case errors.As(err, &re):
		code := codeSyntax
		switch {
		case re.Field == "format":
			code = codeUnknownFormat
		case re.Field == "settings" || strings.Contains(re.Message, "only SELECT") || strings.Contains(re.Message, "may not write") ||
			strings.Contains(re.Message, "reading outside") || strings.Contains(re.Message, "SETTINGS") ||
			strings.Contains(re.Message, "file path"):
			code = codeReadOnly
		case strings.Contains(re.Message, "no such table"):
			code = codeUnknownTable // as the engine answers a table it does not hold
		}
		s.fail(w, http.StatusBadRequest, code, re.Error(), resultBad)
	case errors.As(err, &ee):
		msg := ee.Err.Error()
		code, status := codeUnknown, http.StatusInternalServerError
		if m := engineCode.FindStringSubmatch(msg); m != nil {
			code, _ = strconv.Atoi(m[1])
			msg = msg[strings.Index(msg, m[0])+len(m[0]):]
		}
		switch ee.Kind {
		case query.EngineTimeout:
			code, status = codeTimeout, http.StatusGatewayTimeout
		case query.EngineMemory:
			code, status = codeMemory, http.StatusServiceUnavailable
		}
		if status == http.StatusInternalServerError && code != codeUnknown {
			status = http.StatusBadRequest // the statement's fault: unknown table or column, types...
		}
		s.fail(w, status, code, msg, resultFailed)
	default:
		s.fail(w, http.StatusInternalServerError, codeUnknown, err.Error(), resultFailed)
	}
}

// fail writes an exception the way ClickHouse does: the code in a header and the text
// "Code: N. DB::Exception: message. (NAME)".
func (s *Server) fail(w http.ResponseWriter, status, code int, msg, result string) {
	name := codeNames[code]
	if name == "" {
		name = "UNKNOWN_EXCEPTION"
	}
	msg = strings.TrimSpace(msg)
	w.Header().Set("X-ClickHouse-Exception-Code", strconv.Itoa(code))
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "Code: %d. DB::Exception: %s. (%s)\n", code, strings.TrimSuffix(msg, "."), name)
	s.metrics.done(result, 0)
}

// contentType is the Content-Type ClickHouse gives an output format.
func contentType(format string) string {
	f := strings.ToLower(format)
	switch {
	case strings.HasPrefix(f, "json"):
		return "application/json; charset=UTF-8"
	case strings.HasPrefix(f, "tabseparated"), strings.HasPrefix(f, "tsv"):
		return "text/tab-separated-values; charset=UTF-8"
	case strings.HasPrefix(f, "csv"):
		return "text/csv; charset=UTF-8"
	case strings.HasPrefix(f, "pretty"), f == "vertical", f == "markdown":
		return "text/plain; charset=UTF-8"
	}
	return "application/octet-stream"
}

// acceptedEncoding picks gzip or deflate from an Accept-Encoding header, or "".
func acceptedEncoding(h string) string {
	for part := range strings.SplitSeq(h, ",") {
		enc, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if enc = strings.ToLower(enc); enc == "gzip" || enc == "deflate" {
			return enc
		}
	}
	return ""
}
