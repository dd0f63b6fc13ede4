package store

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHTTPClient(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RawQuery+" user="+r.Header.Get("X-ClickHouse-User")+" key="+r.Header.Get("X-ClickHouse-Key")+" body="+string(body))
		mu.Unlock()
		switch {
		case strings.HasPrefix(string(body), "SELECT 1"):
			io.WriteString(w, "1\n")
		case strings.Contains(string(body), "bad"):
			w.Header().Set("X-ClickHouse-Exception-Code", "62")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "Code: 62. DB::Exception: Syntax error\n")
		case strings.Contains(string(body), "late"):
			// An exception after the status line was sent: only the header tells.
			w.Header().Set("X-ClickHouse-Exception-Code", "241")
			io.WriteString(w, "partial output\nCode: 241. DB::Exception: Memory limit exceeded\n")
		}
	}))
	defer srv.Close()
	c, err := NewHTTPClient(ClickHouseConfiguration{URL: srv.URL + "/?database=flowzero", User: "flowzero", Password: "s3cret", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := c.Query(ctx, "SELECT 1")
	if err != nil || string(out) != "1\n" {
		t.Fatalf("Query = %q, %v", out, err)
	}
	if err := c.Exec(ctx, "CREATE TABLE t (a LowCardinality(IPv6)) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	err = c.Exec(ctx, "bad statement")
	var se *ServerError
	if !errors.As(err, &se) || se.Status != 400 || se.Code != "62" || !strings.Contains(se.Msg, "Syntax error") {
		t.Fatalf("error = %#v", err)
	}
	if _, err := c.Query(ctx, "SELECT late"); !errors.As(err, &se) || se.Code != "241" {
		t.Fatalf("exception after 200: %v", err)
	}
	if err := c.Insert(ctx, "INSERT INTO t FORMAT Protobuf", strings.NewReader("\x02\x08\x01")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POST database=flowzero&default_format=TabSeparated&wait_end_of_query=1 user=flowzero key=s3cret body=SELECT 1",
		"POST allow_suspicious_low_cardinality_types=1&database=flowzero&wait_end_of_query=1 user=flowzero key=s3cret body=CREATE TABLE t (a LowCardinality(IPv6)) ENGINE = Memory",
		"POST allow_suspicious_low_cardinality_types=1&database=flowzero&wait_end_of_query=1 user=flowzero key=s3cret body=bad statement",
		"POST database=flowzero&default_format=TabSeparated&wait_end_of_query=1 user=flowzero key=s3cret body=SELECT late",
		"POST database=flowzero&query=INSERT+INTO+t+FORMAT+Protobuf user=flowzero key=s3cret body=\x02\x08\x01",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := NewHTTPClient(ClickHouseConfiguration{URL: "http://u:p@h:8123/"}); err == nil {
		t.Error("credentials in the URL must be refused")
	}
	srv.Close()
	if err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("no error from a closed server")
	}
}

// TestMigrateDryRunOverHTTP plans a fresh installation against a server that has no flowzero
// database: every object is created, and a dry run sends nothing but the inspection queries.
func TestMigrateDryRunOverHTTP(t *testing.T) {
	var execs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		q := string(body)
		switch {
		case strings.Contains(q, "FROM system.databases"):
			io.WriteString(w, "0\n")
		case strings.HasPrefix(q, "SELECT"):
			t.Errorf("unexpected query %q", q)
		default:
			execs = append(execs, q)
		}
	}))
	defer srv.Close()
	c, err := NewHTTPClient(ClickHouseConfiguration{URL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDDL(t, func(c *Configuration) { c.Cluster = "prod" })
	m := &Migrator{DDL: d, Exec: c, Logger: quietTestLogger()}
	steps, err := m.Migrate(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != len(d.Objects()) || len(execs) != 0 {
		t.Fatalf("dry run: %d steps for %d objects, %d statements sent", len(steps), len(d.Objects()), len(execs))
	}
	if _, err := m.Migrate(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if len(execs) != len(steps) || execs[1] != d.Objects()[1].Create {
		t.Fatalf("applied %d statements, want %d in order", len(execs), len(steps))
	}
}
