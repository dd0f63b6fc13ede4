package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"flowzero/query"
	"flowzero/query/catalog"
	"flowzero/query/chhttp"
	"flowzero/query/httpapi"
	"flowzero/store"
	"flowzero/store/engine"
)

// queryHandler returns the handler of the query API (/api/v0/query/...): on the embedded
// engine the store output writes to when outputs.store.enabled, on the ClickHouse server of
// outputs.store.clickhouse.url otherwise (flows reaching it through Kafka), and without
// either, a handler answering 503 with what to configure.
func (a *App) queryHandler() (http.Handler, error) {
	cfg := a.cfg.Outputs.Store.Configuration
	var eng query.Engine
	switch {
	case a.store != nil:
		eng = sinkEngine{a.store}
	case cfg.ClickHouse.URL != "":
		client, err := engine.NewHTTPClient(cfg.ClickHouse)
		if err != nil {
			return nil, fmt.Errorf("outputs.store.clickhouse: %w", err)
		}
		eng = client
	default:
		return noQueryEngine{}, nil
	}
	// The DDL the sink (or `flowzero store migrate` for a server) creates the tables with:
	// which dimensions each aggregated table holds.
	cat, err := catalog.FromStore(a.schema, cfg, store.NewDDL(cfg, a.schema, ""))
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	svc, err := query.New(a.cfg.Query, cat, eng, a.clock, a.log)
	if err != nil {
		return nil, err
	}
	a.querySvc = svc
	return httpapi.New(a.registry, svc, a.version, a.log)
}

// startClickHouseHTTP starts the listener of ClickHouse's HTTP protocol when
// query.clickhouse-http.listen is set, on the query API's engine.
func (a *App) startClickHouseHTTP() error {
	cfg := a.cfg.Query
	if cfg.ClickHouseHTTP.Listen == "" {
		return nil
	}
	if a.querySvc == nil {
		return fmt.Errorf("query.clickhouse-http.listen: %s", NoQueryEngineMessage)
	}
	srv, err := chhttp.New(a.registry, cfg.ClickHouseHTTP, a.querySvc, cfg.Timeout, cfg.MaxConcurrent+cfg.MaxQueued, a.log)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	a.chHTTP = srv
	return nil
}

// sinkEngine runs the query API's statements on the store sink's read-only connections
// (store.Sink.Engine), which exist once the sink has started.
type sinkEngine struct{ sink *store.Sink }

func (e sinkEngine) Query(ctx context.Context, sql, format string) ([]byte, error) {
	ex := e.sink.Engine()
	if ex == nil {
		return nil, fmt.Errorf("the embedded store is not started")
	}
	return ex.Query(ctx, sql, format)
}

// noQueryEngine answers every query route when the collector has no engine to query.
type noQueryEngine struct{}

// NoQueryEngineMessage is the answer of the query API when no engine is configured.
const NoQueryEngineMessage = "no flows to query: this collector stores none (outputs.store.enabled: false) and " +
	"knows no ClickHouse server (outputs.store.clickhouse.url is empty): enable the store output, " +
	"or set outputs.store.clickhouse.url to the server the Kafka output feeds"

func (noQueryEngine) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(map[string]string{"message": NoQueryEngineMessage})
}
