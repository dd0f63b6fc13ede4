//go:build chdb

package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreMigrateEmbedded migrates the embedded engine's data directory named by the
// collector's file into its database, then plans again on the existing directory (nothing to
// do) and queries what the migration created.
func TestStoreMigrateEmbedded(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	path := writeConfig(t, "outputs:\n  store:\n    database: other\n    embedded: {path: "+data+"}\n")
	var out, errb bytes.Buffer
	if code := run([]string{"store", "migrate", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("migrate: code %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "-- embedded database in "+data) {
		t.Errorf("migrate output:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"store", "migrate", "--dry-run", "--config", path}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "-- nothing to do") {
		t.Errorf("dry run on the migrated directory: code %d:\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	sql := "SELECT name FROM system.tables WHERE database = 'other' AND name IN ('flows', 'flows_1h') ORDER BY name"
	if code := run([]string{"store", "query", "--config", path, "--server", "http://127.0.0.1:1", "--format", "TSVRaw", sql}, &out, &errb); code != 0 ||
		out.String() != "flows\nflows_1h\n" {
		t.Errorf("query: code %d: %q %s", code, out.String(), errb.String())
	}
}
