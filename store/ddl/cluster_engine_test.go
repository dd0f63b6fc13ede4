//go:build chdb

package ddl

import (
	"strings"
	"testing"

	"flowzero/schema"
	"flowzero/store/internal/storetest"
)

// TestClusterStatementsParse: every statement of a cluster installation (Replicated tables,
// Distributed tables in front, ON CLUSTER, the Kafka path) parses in the real engine
// (formatQuery). They cannot run in it: Replicated*MergeTree needs ClickHouse Keeper and ON
// CLUSTER a server with the cluster defined, neither of which chDB has; the same statements
// without a cluster run in TestEveryStatementRuns. docs/scaling.md lists what stays unverified.
func TestClusterStatementsParse(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.Cluster = "prod"
	cfg.Kafka.Enabled = true
	cfg.Kafka.Brokers = []string{"kafka1:9092"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	d := New(cfg, s, "/var/lib/flowzero/format_schemas", nil)
	c := storetest.OpenEngine(t, t.TempDir())
	n := 0
	for _, o := range d.Objects() {
		if !strings.Contains(o.Create, "ON CLUSTER") {
			t.Errorf("%s: not ON CLUSTER", o.Name)
		}
		q := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(o.Create)
		got := storetest.Query(t, c, "SELECT formatQuery('"+q+"') FORMAT TSVRaw")
		if !strings.Contains(got, "CREATE") {
			t.Errorf("%s: formatQuery gives %q", o.Name, got)
		}
		n++
	}
	t.Logf("%d cluster statements parse", n)
}
