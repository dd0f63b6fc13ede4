package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/app"
	"flowzero/internal/clock"
	"flowzero/query"
	"flowzero/query/catalog"
	"flowzero/query/httpapi"
	"flowzero/schema"
	"flowzero/store"
	"flowzero/store/chdb"
	"flowzero/store/engine"
)

// apiClient sends requests to the query API: a running collector's over HTTP, or, when none
// runs, the same handler serving the embedded store opened by this process.
type apiClient struct {
	base  string // http://host:port
	http  *http.Client
	local bool // the embedded store, opened here
	close func()
}

// defaultServer is the URL of the collector of the configuration: its collector.http.listen,
// with a wildcard address replaced by loopback.
func defaultServer(cfg app.Configuration) string {
	listen := cfg.Collector.HTTP.Listen
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// notListening tells whether err is the failure of a connection no server accepted: no
// collector runs there.
func notListening(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// connect returns a client of the collector at server when one answers there, else of the
// embedded store of cfg opened by this process (read-only use: the CLI only runs SELECTs).
func connect(ctx context.Context, cfg app.Configuration, server string, stderr io.Writer) (*apiClient, error) {
	server = strings.TrimRight(server, "/")
	c := &apiClient{base: server, http: &http.Client{Timeout: cfg.Query.Timeout + 10*time.Second}, close: func() {}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+httpapi.Prefix+"config", nil)
	if err != nil {
		return nil, fmt.Errorf("--server %s: %w", server, err)
	}
	probe := &http.Client{Timeout: 5 * time.Second}
	res, err := probe.Do(req)
	if err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("the server at %s has no query API (%s): is it a flowzero collector of this version?", server, res.Status)
		}
		return c, nil
	}
	if !notListening(err) {
		return nil, fmt.Errorf("no answer from the collector at %s: %w", server, err)
	}
	// No collector: the embedded store, when this configuration has one.
	scfg := cfg.Outputs.Store.Configuration
	if !chdb.Built {
		return nil, fmt.Errorf("no collector answers at %s, and this flowzero was built without the embedded engine (make build-chdb) to read %s itself", server, scfg.Embedded.Path)
	}
	if _, err := os.Stat(scfg.Embedded.Path); err != nil {
		return nil, fmt.Errorf("no collector answers at %s (give --server), and there is no embedded store to read at %s (outputs.store.embedded.path): %w", server, scfg.Embedded.Path, err)
	}
	s, err := schema.New(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("configuration: schema.%w", err)
	}
	conn, err := chdb.Open(scfg.Embedded.Path, engine.Args()...)
	if err != nil {
		return nil, fmt.Errorf("no collector answers at %s, and the embedded store cannot be opened: %w", server, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := localHandler(cfg, s, engine.Embedded{Conn: conn}, log)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.local = true
	c.http = &http.Client{Transport: handlerTransport{h}}
	c.close = func() { conn.Close() }
	return c, nil
}

// localHandler is the query API on eng, as the collector builds it (app.queryHandler).
func localHandler(cfg app.Configuration, s *schema.Schema, eng query.Engine, log *slog.Logger) (http.Handler, error) {
	scfg := cfg.Outputs.Store.Configuration
	cat, err := catalog.FromStore(s, scfg, store.NewDDL(scfg, s, ""))
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	qcfg := cfg.Query
	qcfg.CacheDuration = 0
	svc, err := query.New(qcfg, cat, eng, clock.System{}, log)
	if err != nil {
		return nil, err
	}
	return httpapi.New(prometheus.NewRegistry(), svc, version, log)
}

// handlerTransport answers requests with a handler in this process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := &memResponse{header: http.Header{}}
	t.h.ServeHTTP(w, r)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return &http.Response{StatusCode: w.code, Status: http.StatusText(w.code), Header: w.header,
		Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

type memResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *memResponse) Header() http.Header { return w.header }
func (w *memResponse) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *memResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// apiError is an error answer of the API.
type apiError struct {
	Message  string `json:"message"`
	Field    string `json:"field"`
	Position *struct {
		Offset, Line, Column int
	} `json:"position"`
}

// post sends body to route and decodes the answer into out (nil: not decoded); it returns
// the answer's body.
func (c *apiClient) post(ctx context.Context, route string, body, out any) ([]byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+httpapi.Prefix+route, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, query.MaxRawSQLResult+1<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		var e apiError
		if json.Unmarshal(answer, &e) != nil || e.Message == "" {
			return nil, fmt.Errorf("%s: %s", res.Status, bytes.TrimSpace(answer))
		}
		msg := e.Message
		if e.Field != "" && !strings.HasPrefix(msg, e.Field) {
			msg = e.Field + ": " + msg
		}
		if e.Position != nil {
			msg += fmt.Sprintf(" (line %d, column %d)", e.Position.Line, e.Position.Column)
		}
		return nil, errors.New(msg)
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return nil, fmt.Errorf("reading the answer of %s: %w", route, err)
		}
	}
	return answer, nil
}
