package ddl

import (
	"context"
	"flowzero/schema"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
	"strings"
	"testing"
)

// rowsExecutor answers every query with fixed TabSeparated output.
type rowsExecutor []byte

func (r rowsExecutor) Exec(context.Context, string) error { return nil }
func (r rowsExecutor) Query(context.Context, string, string) ([]byte, error) {
	return r, nil
}

// FuzzStoreServerOutput feeds arbitrary server output to what migrations parse: TabSeparated
// rows (with escapes) and sorting keys. Nothing may panic, and a plan over garbage state is an
// error or a plan, never a crash.
func FuzzStoreServerOutput(f *testing.F) {
	f.Add([]byte("1\n"), "toStartOfFiveMinutes(TimeReceived), ExporterAddress")
	f.Add([]byte("flows\tMergeTree\tflowzero:abc\tTimeReceived, A\tMergeTree ORDER BY x TTL y\n"), "a, (b, c)), d(")
	f.Add([]byte("a\\tb\\\\\tc\\n\\'\n\n\t\t\n"), "((")
	f.Add([]byte("flows\tSrcAddr\nflows_1m\tTimeReceived\n"), ",,")
	s := storetest.MustSchema(f, schema.DefaultConfiguration())
	d := New(DefaultConfiguration(), s, "/proto", sinkGroups(s))
	f.Fuzz(func(t *testing.T, out []byte, key string) {
		rows, err := engine.QueryRows(context.Background(), rowsExecutor(out), "SELECT")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if len(r) == 0 {
				t.Fatal("empty row")
			}
		}
		for _, k := range splitKey(key) {
			if k == "" && strings.TrimSpace(key) != "" && !strings.Contains(key, ",") {
				t.Fatalf("empty key part from %q", key)
			}
		}
		m := &Migrator{DDL: d, Exec: rowsExecutor(out), Logger: storetest.QuietLogger()}
		_, _ = m.Plan(context.Background())
	})
}
