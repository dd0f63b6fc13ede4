//go:build chdb

package store

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/testutil"
	"flowzero/pbwire"
	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
)

// engineBehindHTTP serves ClickHouse's HTTP interface from the real engine, as transport
// only: an INSERT's statement (query parameter, SETTINGS included) and body go to the engine
// as they came, the format cut from the statement's end because chDB's streaming insert takes
// it apart; any other statement (the body) runs with its output in default_format.
func engineBehindHTTP(c *chdb.Conn) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var err error
		var out []byte
		if stmt := r.URL.Query().Get("query"); stmt != "" {
			i := strings.LastIndex(stmt, " FORMAT ")
			if i < 0 {
				err = fmt.Errorf("no FORMAT in %.100s", stmt)
			} else {
				_, err = c.Insert(stmt[:i], stmt[i+len(" FORMAT "):], body)
			}
		} else {
			out, err = c.Query(string(body), cmp.Or(r.URL.Query().Get("default_format"), "TabSeparated"))
		}
		if err != nil {
			w.Header().Set("X-ClickHouse-Exception-Code", "1")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, err.Error())
			return
		}
		w.Write(out)
	})
}

func countDelimited(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		_, rest, err := pbwire.SplitDelimited(b)
		if err != nil {
			t.Fatal(err)
		}
		b, n = rest, n+1
	}
	return n
}

// TestServerSinkDeduplicatesInEngine runs the server sink against the real engine behind
// its HTTP interface, with the tables `flowzero store migrate` makes for mode outlet (the
// views feed the aggregated tables). A unit inserted again with the same token stores
// nothing, even with other bytes (the token reaches the engine: a block hash would differ).
// When the flows table has a unit but an aggregated table missed it (its view was detached,
// as if the process had been killed between the two), inserting the unit again leaves the
// flows table alone and fills the aggregated table (each view's table deduplicates on its
// own, deduplicate_blocks_in_dependent_materialized_views).
func TestServerSinkDeduplicatesInEngine(t *testing.T) {
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	dir := t.TempDir()
	conn := storetest.OpenEngine(t, filepath.Join(dir, "server"))
	srv := httptest.NewServer(engineBehindHTTP(conn))
	defer srv.Close()
	cfg := testConfig(t, dir)
	cfg.ClickHouse.URL = srv.URL
	cfg.Deduplicate = true // mode outlet
	client, err := engine.NewHTTPClient(cfg.ClickHouse)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDDL(cfg, s, filepath.Join(dir, "format_schemas"))
	ctx := context.Background()
	if _, err := (&ddl.Migrator{DDL: d, Exec: client, Logger: storetest.QuietLogger()}).Migrate(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.PreAggregated(); ok {
		t.Fatal("the server's tables are pre-aggregated: the views must feed them")
	}
	sink, err := NewServerSink(prometheus.NewRegistry(), cfg, Dependencies{Schema: s, Logger: storetest.QuietLogger(), Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	defer sink.Stop()
	q := func(sql string) string { t.Helper(); return storetest.Query(t, conn, sql) }
	sums := func(table string) string {
		return q("SELECT count() > 0, sum(Bytes), sum(Packets) FROM flowzero." + table)
	}

	// Two units of the demo's flows.
	demoBatches, _ := storetest.DemoBatchesOf(s, 20_000)
	var units [2][]byte
	n := 0
	for _, batch := range demoBatches {
		for len(batch) > 0 {
			_, rest, err := pbwire.SplitDelimited(batch)
			if err != nil {
				t.Fatal(err)
			}
			units[n%2] = append(units[n%2], batch[:len(batch)-len(rest)]...)
			batch, n = rest, n+1
		}
	}
	if n < 200 {
		t.Fatalf("%d demo flows", n)
	}
	a, b := units[0], units[1]
	na, nb := countDelimited(t, a), countDelimited(t, b)
	if err := sink.InsertUnit(ctx, "t-0-0-9", a, na); err != nil {
		t.Fatal(err)
	}
	if got := q("SELECT count() FROM flowzero.flows"); got != fmt.Sprint(na) {
		t.Fatalf("flows after the first unit: %s, want %d", got, na)
	}
	// The same token with other flows (another batch): nothing stored.
	if err := sink.InsertUnit(ctx, "t-0-0-9", b, nb); err != nil {
		t.Fatal(err)
	}
	if got := q("SELECT count() FROM flowzero.flows"); got != fmt.Sprint(na) {
		t.Errorf("flows after the token again with other flows: %s, want %d", got, na)
	}

	// flows has unit b, flows_1m does not: its view was detached during the first INSERT
	// (as if the process had been killed between the two tables).
	if err := conn.Exec("DETACH TABLE flowzero.flows_1m_consumer"); err != nil {
		t.Fatal(err)
	}
	if err := sink.InsertUnit(ctx, "t-0-10-19", b, nb); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec("ATTACH TABLE flowzero.flows_1m_consumer"); err != nil {
		t.Fatal(err)
	}
	if got, want := sums("flows_1m"), sums("flows"); got == want {
		t.Fatalf("flows_1m got unit b with its view detached: %s", got)
	}
	if err := sink.InsertUnit(ctx, "t-0-10-19", b, nb); err != nil {
		t.Fatal(err)
	}
	if got := q("SELECT count() FROM flowzero.flows"); got != fmt.Sprint(na+nb) {
		t.Errorf("flows after unit b twice: %s, want %d", got, na+nb)
	}
	for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
		if got, want := sums(table), sums("flows"); got != want {
			t.Errorf("%s: %s, want the flows' %s", table, got, want)
		}
	}
}
