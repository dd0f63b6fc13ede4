package ddl

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"flowzero/schema"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
)

// fakeServer is an Executor standing for a ClickHouse server: it answers the Migrator's
// inspection queries from its tables and applies what a migration sends (CREATE and DROP of
// the objects it knows, ADD COLUMN, MODIFY COMMENT), so that a second migration sees the
// first one's work.
type fakeServer struct {
	t       *testing.T
	objects map[string]Object // what a CREATE of each name creates
	tables  map[string]*tableState
	execs   []string
}

// newFakeServer returns a server holding the objects exactly as their statements create them.
func newFakeServer(t *testing.T, existing []Object) *fakeServer {
	f := &fakeServer{t: t, objects: map[string]Object{}, tables: map[string]*tableState{}}
	for _, o := range existing {
		f.create(o)
	}
	return f
}

func (f *fakeServer) create(o Object) {
	ts := &tableState{comment: o.Fingerprint, sortingKey: strings.Join(o.SortingKey, ", ")}
	switch o.Kind {
	case KindDatabase:
		return
	case KindView:
		ts.engine = "MaterializedView"
	case KindDictionary:
		ts.engine = "Dictionary"
	default:
		_, ts.engineFull, _ = strings.Cut(o.Create, "ENGINE = ")
		ts.engine, _, _ = strings.Cut(ts.engineFull, "(")
		ts.engine, _, _ = strings.Cut(ts.engine, "\n")
	}
	for _, c := range o.Columns {
		ts.columns = append(ts.columns, c.Name)
	}
	f.tables[o.Name] = ts
}

var (
	fakeObjectName = regexp.MustCompile("`flowzero`\\.`([^`]+)`")
	fakeAddColumn  = regexp.MustCompile(` ADD COLUMN IF NOT EXISTS (\w+) `)
	fakeComment    = regexp.MustCompile(` MODIFY COMMENT '([^']*)'$`)
)

func (f *fakeServer) Exec(_ context.Context, sql string) error {
	f.execs = append(f.execs, sql)
	name := fakeObjectName.FindStringSubmatch(sql)[1]
	switch {
	case strings.HasPrefix(sql, "CREATE "):
		o, ok := f.objects[name]
		if !ok {
			f.t.Fatalf("CREATE of an unknown object: %s", sql)
		}
		f.create(o)
	case strings.HasPrefix(sql, "DROP "):
		delete(f.tables, name)
	case fakeAddColumn.MatchString(sql):
		f.tables[name].columns = append(f.tables[name].columns, fakeAddColumn.FindStringSubmatch(sql)[1])
	case fakeComment.MatchString(sql):
		f.tables[name].comment = fakeComment.FindStringSubmatch(sql)[1]
	default:
		f.t.Errorf("the fake server does not know %s", sql)
	}
	return nil
}

func (f *fakeServer) Query(_ context.Context, sql, _ string) ([]byte, error) {
	var b strings.Builder
	switch {
	case strings.Contains(sql, "FROM system.databases"):
		b.WriteString("1\n")
	case strings.Contains(sql, "FROM system.tables"):
		esc := strings.NewReplacer(`\`, `\\`, "'", `\'`, "\t", `\t`, "\n", `\n`)
		for name, ts := range f.tables {
			b.WriteString(strings.Join([]string{name, ts.engine, ts.comment, ts.sortingKey, esc.Replace(ts.engineFull)}, "\t") + "\n")
		}
	case strings.Contains(sql, "FROM system.columns"):
		for name, ts := range f.tables {
			for _, c := range ts.columns {
				b.WriteString(name + "\t" + c + "\n")
			}
		}
	case strings.Contains(sql, "FROM system.dictionaries"): // comments are in system.tables here
	default:
		f.t.Errorf("the fake server does not know %s", sql)
	}
	return []byte(b.String()), nil
}

// migrateFake runs a dry run, then a migration, then a second one that must find nothing to
// do, and returns the migration's steps as "object: action" and the statements it sent.
func migrateFake(t *testing.T, f *fakeServer, d *DDL) (actions, sent []string) {
	t.Helper()
	for _, o := range d.Objects() {
		f.objects[o.Name] = o
	}
	m := &Migrator{DDL: d, Exec: f, Logger: storetest.QuietLogger()}
	dry, err := m.Migrate(context.Background(), true)
	if err != nil || len(f.execs) != 0 {
		t.Fatalf("dry run: %v, %d statements sent", err, len(f.execs))
	}
	steps, err := m.Migrate(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != len(dry) || len(f.execs) != len(steps) {
		t.Fatalf("%d steps planned by the dry run, %d run, %d statements sent", len(dry), len(steps), len(f.execs))
	}
	for i, st := range steps {
		actions = append(actions, st.Object+": "+st.Action)
		if f.execs[i] != st.SQL || dry[i].SQL != st.SQL {
			t.Errorf("step %d: sent %q, planned %q, dry run %q", i, f.execs[i], st.SQL, dry[i].SQL)
		}
	}
	sent = f.execs
	f.execs = nil
	if again, err := m.Migrate(context.Background(), false); err != nil || len(again) != 0 {
		t.Errorf("second migration: %+v, %v", again, err)
	}
	return actions, sent
}

// TestMigrateClusterAddColumn migrates a cluster whose flows_local table and its Distributed
// flows table lack a column the schema now has: both get it ON CLUSTER, then their new
// fingerprint, and nothing else changes.
func TestMigrateClusterAddColumn(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.Cluster = "prod"
	old := New(cfg, storetest.MustSchema(t, schema.DefaultConfiguration()), "", nil)
	f := newFakeServer(t, old.Objects())
	d := New(cfg, storetest.MustSchema(t, schema.Configuration{Enabled: []string{"SrcMAC"}}), "", nil)

	actions, sent := migrateFake(t, f, d)
	want := []string{"flows_local: add column SrcMAC", "flows_local: mark migrated", "flows: add column SrcMAC", "flows: mark migrated"}
	if strings.Join(actions, "\n") != strings.Join(want, "\n") {
		t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(actions, "\n"), strings.Join(want, "\n"))
	}
	// The column goes where the schema has it, after its predecessor.
	var add string
	cols := objectByName(t, d, "flows_local").Columns
	for i, c := range cols {
		if c.Name == "SrcMAC" {
			add = " ON CLUSTER `prod` ADD COLUMN IF NOT EXISTS " + c.Definition + " AFTER " + cols[i-1].Name
		}
	}
	for i, table := range []string{"flows_local", "flows"} {
		add := "ALTER TABLE `flowzero`.`" + table + "`" + add
		comment := "ALTER TABLE `flowzero`.`" + table + "` ON CLUSTER `prod` MODIFY COMMENT '" + objectByName(t, d, table).Fingerprint + "'"
		if sent[2*i] != add || sent[2*i+1] != comment {
			t.Errorf("%s: sent\n%s\n%s\nwant\n%s\n%s", table, sent[2*i], sent[2*i+1], add, comment)
		}
	}
}

// TestMigrateKafkaErrors migrates a Kafka path made before flows_kafka_errors: the table is
// created, and the Kafka table is replaced with both its views.
func TestMigrateKafkaErrors(t *testing.T) {
	d := newTestDDL(t, func(c *Configuration) { c.Kafka.Enabled = true }, true)
	raw := d.KafkaTableName()
	var before []Object
	for _, o := range d.Objects() {
		if o.Name != KafkaErrorsTable && o.Name != raw+"_errors_consumer" {
			before = append(before, o)
		}
	}
	actions, _ := migrateFake(t, newFakeServer(t, before), d)
	want := []string{raw + "_consumer: drop", raw + ": drop", KafkaErrorsTable + ": create",
		raw + ": create", raw + "_consumer: create", raw + "_errors_consumer: create"}
	if strings.Join(actions, "\n") != strings.Join(want, "\n") {
		t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(actions, "\n"), strings.Join(want, "\n"))
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
	c, err := engine.NewHTTPClient(engine.HTTPConfiguration{URL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDDL(t, func(c *Configuration) { c.Cluster = "prod" }, false)
	m := &Migrator{DDL: d, Exec: c, Logger: storetest.QuietLogger()}
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
