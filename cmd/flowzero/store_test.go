package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// writeConfig writes a collector configuration file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "collector.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStoreMigrateCollectorConfig reads the store from the collector's own file
// (outputs.store): the dry run plans the configured database, and creates nothing, not even
// the data directory. A top-level store: key, which the collector refuses, is refused too.
func TestStoreMigrateCollectorConfig(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	path := writeConfig(t, "outputs:\n  file: {enabled: false}\n  store:\n    database: other\n    embedded: {path: "+data+"}\n")
	var out, errb bytes.Buffer
	if code := run([]string{"store", "migrate", "--dry-run", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	for _, want := range []string{"-- " + data + " does not exist yet: everything is to be created",
		"CREATE DATABASE IF NOT EXISTS `other`;", "CREATE TABLE IF NOT EXISTS `other`.`flows`"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "`flowzero`") {
		t.Errorf("the default database is planned:\n%s", out.String())
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the dry run created %s (%v)", data, err)
	}

	for yaml, want := range map[string]string{
		"store:\n  database: other\n":                    `unknown key "store"`,
		"outputs:\n  store:\n    embedded: {pathh: x}\n": `unknown key "pathh"`,
		"outputs:\n  store:\n    database: \"no way\"\n": `outputs.store.database: "no way" is not a plain identifier`,
	} {
		out.Reset()
		errb.Reset()
		code := run([]string{"store", "migrate", "--dry-run", "--config", writeConfig(t, yaml)}, &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), want) {
			t.Errorf("%q: code %d, error %q, want %q", yaml, code, errb.String(), want)
		}
	}
}
