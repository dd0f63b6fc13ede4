package schema

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/fields.golden with the current column table")

// TestFieldNumbersStable compares the protobuf field number and kind of every column with
// testdata/fields.golden. A column keeps its number forever: changing or removing a line of
// the golden file breaks every consumer of older messages. New columns are added with
// `go test ./schema -run FieldNumbersStable -update`.
func TestFieldNumbersStable(t *testing.T) {
	var b strings.Builder
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if c := Lookup(k); c.OnWire() {
			fmt.Fprintf(&b, "%d %s %s\n", c.Field, c.Name, protoType(c))
		}
	}
	current := b.String()
	path := filepath.Join("testdata", "fields.golden")
	golden, err := os.ReadFile(path)
	if err != nil && !*updateGolden {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, line := range strings.Split(current, "\n") {
		have[line] = true
	}
	for _, line := range strings.Split(string(golden), "\n") {
		if !have[line] {
			t.Errorf("column field changed or removed: %q is no longer in the table", line)
		}
	}
	if *updateGolden && !t.Failed() {
		if err := os.WriteFile(path, []byte(current), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
