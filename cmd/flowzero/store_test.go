package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStoreMigrateServerDryRun plans the tables on a ClickHouse server without a flowzero
// database: the statements are printed and none is sent.
func TestStoreMigrateServerDryRun(t *testing.T) {
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "system.databases") {
			io.WriteString(w, "0\n")
			return
		}
		sent++
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	code := run([]string{"store", "migrate", "--dry-run", "--clickhouse", srv.URL}, &out, &errb)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	for _, want := range []string{"-- 9 statements to apply", "CREATE DATABASE IF NOT EXISTS `flowzero`;",
		"-- flows_1m_consumer: create\nCREATE MATERIALIZED VIEW", "CREATE DICTIONARY IF NOT EXISTS `flowzero`.`protocols`"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if sent != 0 {
		t.Errorf("%d statements sent during a dry run", sent)
	}
	if code := run([]string{"store", "bogus"}, &out, &errb); code != 2 {
		t.Errorf("unknown action: code %d", code)
	}
}
