//go:build chdb

package querytest

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/query/catalog"
	"flowzero/schema"
	"flowzero/store"
	"flowzero/store/engine"
)

// Env is an embedded engine holding the data set, filled through the store's sink (its
// Native insert, its pre-aggregation into flows_1m, the views into flows_5m and flows_1h).
// This file is the only one of the query layer's tests that uses the store's API.
type Env struct {
	Dir     string
	Anchor  time.Time
	Flows   []Flow
	Schema  *schema.Schema
	Config  store.Configuration
	Sink    *store.Sink
	Engine  engine.Embedded
	Catalog *catalog.Catalog
	// ASNames serves the AS names CSV the asns dictionary loads.
	asNames *http.Server
}

// ASNames are the AS names the test dictionary holds.
var ASNames = map[uint32]string{64500: "ALPHA-NET", 64501: "BETA-NET", 64510: "EYEBALLS"}

// Start opens an engine in a new directory, creates the tables and inserts the data set for
// anchor. The engine holds one data directory per process: one Env per test binary.
func Start(anchor time.Time) (*Env, error) {
	dir, err := os.MkdirTemp("", "querytest-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, Anchor: anchor, Flows: Dataset(anchor)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.asNames = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "asn,name\n")
		for asn, name := range ASNames {
			fmt.Fprintf(w, "%d,%s\n", asn, name)
		}
	})}
	go e.asNames.Serve(ln)
	if e.Schema, err = schema.New(Schema()); err != nil {
		return nil, err
	}
	cfg := store.DefaultConfiguration()
	cfg.Embedded.Path = filepath.Join(dir, "chdb")
	cfg.Embedded.MaxThreads = 2
	cfg.ASNames.URL = "http://" + ln.Addr().String() + "/asns.csv"
	cfg.ASNames.Refresh = time.Hour
	e.Config = cfg
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if e.Sink, err = store.NewSink(prometheus.NewRegistry(), cfg, store.Dependencies{Schema: e.Schema, Logger: log}); err != nil {
		return nil, err
	}
	if err := e.Sink.Start(); err != nil {
		return nil, err
	}
	e.Engine = engine.Embedded{Conn: e.Sink.Conn()}
	if e.Catalog, err = catalog.FromStore(e.Schema, cfg, e.Sink.DDL()); err != nil {
		return nil, err
	}
	fm := e.Schema.NewFlowMessage()
	for _, f := range e.Flows {
		e.Sink.Write(f.Encode(fm))
	}
	if err := e.Sink.Flush(); err != nil {
		return nil, err
	}
	return e, nil
}

// Exec runs a statement in the engine (tests changing the data).
func (e *Env) Exec(sql string) error { return e.Sink.Conn().Exec(sql) }

// Close stops the sink and removes the directory.
func (e *Env) Close() {
	if e.Sink != nil {
		e.Sink.Stop()
	}
	if e.asNames != nil {
		e.asNames.Close()
	}
	os.RemoveAll(e.Dir)
}
