package ddl

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"flowzero/store/engine"
)

// Step is one statement of a migration, with what it does to which object.
type Step struct {
	Object string // table, view or dictionary name (the database for its creation)
	Action string // "create", "add column", "drop column", "modify ttl", "replace", "drop", ...
	SQL    string
}

// Migrator brings a ClickHouse database to the DDL of the current schema and configuration.
//
// Each object carries a COMMENT with the fingerprint of the statement that created it, so a
// migration that finds every fingerprint current does nothing (migrations are idempotent). A
// data table whose fingerprint differs is altered in place: new columns are added (a new
// dimension of an aggregated table also extends its ORDER BY), columns the schema no longer has
// are kept unless drop-removed-columns is set, the TTL follows the configuration, and the
// comment is updated last, so an interrupted migration is resumed by the next one. Objects
// without data (materialized views, dictionaries, Kafka tables) are dropped and created again,
// a Kafka table with the views reading it. Kafka tables of another schema hash and views of resolutions no longer configured (or
// pre-aggregated by the embedded sink, see DDL.PreAggregated) are dropped; tables keep their
// data.
type Migrator struct {
	DDL    *DDL
	Exec   engine.Executor
	Logger *slog.Logger
}

type tableState struct {
	engine     string
	comment    string
	sortingKey string
	engineFull string
	columns    []string
}

// state reads the database's tables, views, dictionaries and columns.
func (m *Migrator) state(ctx context.Context) (dbExists bool, tables map[string]*tableState, err error) {
	db := quoteString(m.DDL.Database())
	rows, err := engine.QueryRows(ctx, m.Exec, "SELECT count() FROM system.databases WHERE name = "+db)
	if err != nil {
		return false, nil, fmt.Errorf("reading system.databases: %w", err)
	}
	if len(rows) != 1 || rows[0][0] == "0" {
		return false, map[string]*tableState{}, nil
	}
	tables = map[string]*tableState{}
	rows, err = engine.QueryRows(ctx, m.Exec, "SELECT name, engine, comment, sorting_key, engine_full FROM system.tables WHERE database = "+db)
	if err != nil {
		return true, nil, fmt.Errorf("reading system.tables: %w", err)
	}
	for _, r := range rows {
		if len(r) != 5 {
			return true, nil, fmt.Errorf("unexpected row from system.tables: %q", r)
		}
		tables[r[0]] = &tableState{engine: r[1], comment: r[2], sortingKey: r[3], engineFull: r[4]}
	}
	// Dictionaries keep their comment in system.dictionaries.
	rows, err = engine.QueryRows(ctx, m.Exec, "SELECT name, comment FROM system.dictionaries WHERE database = "+db)
	if err != nil {
		return true, nil, fmt.Errorf("reading system.dictionaries: %w", err)
	}
	for _, r := range rows {
		if t, ok := tables[r[0]]; ok && len(r) == 2 && r[1] != "" {
			t.comment = r[1]
		}
	}
	rows, err = engine.QueryRows(ctx, m.Exec, "SELECT table, name FROM system.columns WHERE database = "+db+" ORDER BY table, position")
	if err != nil {
		return true, nil, fmt.Errorf("reading system.columns: %w", err)
	}
	for _, r := range rows {
		if t, ok := tables[r[0]]; ok && len(r) == 2 {
			t.columns = append(t.columns, r[1])
		}
	}
	return true, tables, nil
}

// Plan returns the steps that bring the database to the current DDL, without running them.
func (m *Migrator) Plan(ctx context.Context) ([]Step, error) {
	d := m.DDL
	dbExists, tables, err := m.state(ctx)
	if err != nil {
		return nil, err
	}
	objects := d.Objects()
	wanted := map[string]bool{}
	for _, o := range objects {
		wanted[o.Name] = true
	}
	var drops, steps []Step
	// With pre-aggregation (embedded.pre-aggregate) the finest resolution's view is not
	// wanted: left in place it would count every flow a second time. It is dropped below as
	// views of removed resolutions are, and created again like any missing view when
	// pre-aggregation is turned off.
	preAggView := ""
	if r, ok := d.PreAggregated(); ok {
		preAggView = AggregatedTableName(r) + "_consumer"
	}
	drop := func(name, kind string) {
		action := "drop"
		if name == preAggView {
			action = "drop (the sink pre-aggregates " + strings.TrimSuffix(name, "_consumer") + ")"
		}
		drops = append(drops, Step{Object: name, Action: action, SQL: d.dropStatement(name, kind)})
	}

	// Objects of an older configuration: Kafka tables of another schema hash (views first, as a
	// table cannot be dropped while a view reads it), consumers of resolutions removed.
	var obsoleteTables []string
	for name, t := range tables {
		if wanted[name] || !strings.HasPrefix(name, "flows_") {
			continue
		}
		switch {
		case t.engine == "MaterializedView" && strings.HasSuffix(name, "_consumer"):
			drop(name, KindView)
		case t.engine == "Kafka":
			obsoleteTables = append(obsoleteTables, name)
		case strings.HasSuffix(name, rebuildSuffix) && strings.HasSuffix(t.engine, "MergeTree"):
			// Left by an interrupted rebuild: a partial copy, or the table it replaced.
			drop(name, KindTable)
		}
	}
	for _, name := range obsoleteTables {
		drop(name, KindKafka)
	}

	for i := 0; i < len(objects); i++ {
		o := objects[i]
		t, exists := tables[o.Name]
		switch o.Kind {
		case KindDatabase:
			if !dbExists {
				steps = append(steps, Step{Object: o.Name, Action: "create", SQL: o.Create})
			}
		case KindTable, KindDistributed:
			if !exists {
				steps = append(steps, Step{Object: o.Name, Action: "create", SQL: o.Create})
				continue
			}
			if o.Kind == KindTable && strings.Contains(o.Create, SummedColumns) && !strings.Contains(t.engineFull, SummedColumns) {
				rb, err := m.rebuildSummed(o, t)
				if err != nil {
					return nil, err
				}
				steps = append(steps, rb...)
				continue
			}
			// The column diff runs even when the fingerprint is current: drop-removed-columns
			// changes what is wanted without changing the statement.
			alter := m.alterTable(o, t)
			if len(alter) > 0 || t.comment != o.Fingerprint {
				steps = append(steps, alter...)
				steps = append(steps, Step{Object: o.Name, Action: "mark migrated",
					SQL: fmt.Sprintf("ALTER TABLE %s%s MODIFY COMMENT %s", d.q(o.Name), d.onCluster(), quoteString(o.Fingerprint))})
			}
		case KindKafka:
			// The Kafka table and the views reading it, which follow it, are replaced
			// together: a Kafka table cannot be altered, nor dropped while a view reads it.
			current := exists && t.comment == o.Fingerprint
			var views []Object
			for i+1 < len(objects) && objects[i+1].Kind == KindView {
				i++
				v := objects[i]
				views = append(views, v)
				tv, ok := tables[v.Name]
				current = current && ok && tv.comment == v.Fingerprint
			}
			if current {
				continue
			}
			for _, v := range views {
				if _, ok := tables[v.Name]; ok {
					drop(v.Name, KindView)
				}
			}
			if exists {
				drop(o.Name, KindKafka)
			}
			steps = append(steps, Step{Object: o.Name, Action: "create", SQL: o.Create})
			for _, v := range views {
				steps = append(steps, Step{Object: v.Name, Action: "create", SQL: v.Create})
			}
		default: // views and dictionaries
			if exists && t.comment == o.Fingerprint {
				continue
			}
			if exists {
				drop(o.Name, o.Kind)
			}
			steps = append(steps, Step{Object: o.Name, Action: "create", SQL: o.Create})
		}
	}
	return append(drops, steps...), nil
}

// rebuildSuffix names the table an aggregated table is rebuilt into (rebuildSummed).
const rebuildSuffix = "_rebuild"

// rebuildSummed returns the steps that bring an aggregated table made before its Flows
// column to o. SummingMergeTree's summed columns cannot be altered, and a Flows column added
// to a table summing (Bytes, Packets) would keep one row's count of each merge: the rows are
// copied into a table created as o (their Flows are 0, which the query layer knows as "not
// counted"), which then takes the table's place. On a cluster, each node holds its own
// rows, which one INSERT ... SELECT cannot copy: the error says how to do it by hand.
func (m *Migrator) rebuildSummed(o Object, t *tableState) ([]Step, error) {
	d := m.DDL
	tmp := o.Name + rebuildSuffix
	if d.cfg.Cluster != "" {
		return nil, fmt.Errorf("store: %s was created before its Flows column and its engine cannot be altered "+
			"to sum %s: on every node, create %s as a new %s is created (with its Flows column and summing it), "+
			"INSERT INTO it SELECT the columns of %s, EXCHANGE TABLES %s AND %s, drop %s, then migrate again",
			o.Name, SummedColumns, tmp, o.Name, o.Name, o.Name, tmp, tmp)
	}
	have := map[string]bool{}
	for _, c := range t.columns {
		have[c] = true
	}
	var cols []string
	for _, c := range o.Columns {
		if have[c.Name] {
			cols = append(cols, quoteIdent(c.Name))
		}
	}
	list := strings.Join(cols, ", ")
	return []Step{
		{Object: tmp, Action: "create (" + o.Name + " again, summing " + SummedColumns + ")",
			SQL: strings.Replace(o.Create, d.q(o.Name), d.q(tmp), 1)},
		{Object: tmp, Action: "copy the rows of " + o.Name + " (Flows 0: not counted)",
			SQL: fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s", d.q(tmp), list, list, d.q(o.Name))},
		{Object: o.Name, Action: "exchange with " + tmp, SQL: fmt.Sprintf("EXCHANGE TABLES %s AND %s", d.q(o.Name), d.q(tmp))},
		{Object: tmp, Action: "drop (the table before the rebuild)", SQL: d.dropStatement(tmp, KindTable)},
	}, nil
}

// alterTable returns the steps that bring an existing data table's columns and TTL to o.
func (m *Migrator) alterTable(o Object, t *tableState) []Step {
	d := m.DDL
	have := map[string]bool{}
	for _, c := range t.columns {
		have[c] = true
	}
	want := map[string]bool{}
	var steps []Step
	var newDims []string
	prev := ""
	for _, c := range o.Columns {
		want[c.Name] = true
		if !have[c.Name] {
			after := ""
			if prev != "" {
				after = " AFTER " + prev
			}
			alter := fmt.Sprintf("ALTER TABLE %s%s ADD COLUMN IF NOT EXISTS %s%s", d.q(o.Name), d.onCluster(), c.Definition, after)
			if c.Dimension && o.SortingKey != nil {
				newDims = append(newDims, c.Name)
				// A new dimension must join the sorting key in the same ALTER, or
				// SummingMergeTree would fold rows that differ on it.
				alter += fmt.Sprintf(", MODIFY ORDER BY (%s)", strings.Join(append(splitKey(t.sortingKey), newDims...), ", "))
			}
			steps = append(steps, Step{Object: o.Name, Action: "add column " + c.Name, SQL: alter})
			have[c.Name] = true
		}
		prev = c.Name
	}
	inKey := map[string]bool{}
	for _, k := range splitKey(t.sortingKey) {
		inKey[k] = true
	}
	for _, c := range t.columns {
		if want[c] {
			continue
		}
		if !m.DDL.cfg.DropRemovedColumns || inKey[c] {
			if t.comment != o.Fingerprint {
				m.logger().Info("store: column kept, no longer in the schema", "table", o.Name, "column", c,
					"reason", map[bool]string{true: "part of the sorting key", false: "drop-removed-columns is off"}[inKey[c]])
			}
			continue
		}
		steps = append(steps, Step{Object: o.Name, Action: "drop column " + c,
			SQL: fmt.Sprintf("ALTER TABLE %s%s DROP COLUMN IF EXISTS %s", d.q(o.Name), d.onCluster(), quoteIdent(c))})
	}
	if o.Kind == KindTable {
		var missing []string
		for _, st := range o.Settings {
			if !strings.Contains(t.engineFull, st) {
				missing = append(missing, st)
			}
		}
		if len(missing) > 0 {
			steps = append(steps, Step{Object: o.Name, Action: "modify settings",
				SQL: fmt.Sprintf("ALTER TABLE %s%s MODIFY SETTING %s", d.q(o.Name), d.onCluster(), strings.Join(missing, ", "))})
		}
		hasTTL := strings.Contains(t.engineFull, " TTL ")
		switch {
		case o.TTL == "" && hasTTL:
			steps = append(steps, Step{Object: o.Name, Action: "remove ttl",
				SQL: fmt.Sprintf("ALTER TABLE %s%s REMOVE TTL", d.q(o.Name), d.onCluster())})
		case o.TTL != "" && !strings.Contains(t.engineFull, "TTL "+o.TTL):
			steps = append(steps, Step{Object: o.Name, Action: "modify ttl",
				SQL: fmt.Sprintf("ALTER TABLE %s%s MODIFY TTL %s", d.q(o.Name), d.onCluster(), o.TTL)})
		}
	}
	return steps
}

// splitKey splits a sorting_key from system.tables ("a, toStartOfFiveMinutes(b), c") at
// its top-level commas.
func splitKey(k string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(k); i++ {
		switch k[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(k[start:i]))
				start = i + 1
			}
		}
	}
	if s := strings.TrimSpace(k[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

func (m *Migrator) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.Default()
}

// Migrate plans and runs the steps, logging each. With dryRun it only returns them.
func (m *Migrator) Migrate(ctx context.Context, dryRun bool) ([]Step, error) {
	steps, err := m.Plan(ctx)
	if err != nil {
		return nil, err
	}
	log := m.logger()
	if len(steps) == 0 {
		log.Info("store: database up to date", "database", m.DDL.Database(), "schema", m.DDL.s.Hash())
		return nil, nil
	}
	if dryRun {
		return steps, nil
	}
	for i, s := range steps {
		log.Info("store: migration step", "step", i+1, "of", len(steps), "object", s.Object, "action", s.Action)
		if err := m.Exec.Exec(ctx, s.SQL); err != nil {
			if isShutdownQuirk(err) && strings.Contains(s.SQL, "ENGINE = Kafka") {
				// chDB answers CREATE ... ENGINE = Kafka with "Code: 49 Shutdown was called"
				// yet creates the table; the next statement (its view) tells if it did not.
				log.Warn("store: Kafka table creation reported a shutdown; continuing", "object", s.Object, "error", err)
				continue
			}
			return steps[:i], fmt.Errorf("store: migration step %d (%s %s): %w", i+1, s.Action, s.Object, err)
		}
	}
	return steps, nil
}

func isShutdownQuirk(err error) bool {
	return strings.Contains(err.Error(), "Code: 49") && strings.Contains(err.Error(), "Shutdown was called")
}

// dropStatement drops an object of the given kind if it exists.
func (d *DDL) dropStatement(name, kind string) string {
	what := "TABLE"
	if kind == KindDictionary {
		what = "DICTIONARY"
	} else if kind == KindView {
		what = "VIEW"
	}
	return fmt.Sprintf("DROP %s IF EXISTS %s%s SYNC", what, d.q(name), d.onCluster())
}

// DropKafka drops the Kafka engine table and the views reading it, for example before closing
// an embedded engine (chDB cannot reopen a data directory that holds a Kafka table) or to stop
// consuming. The table of rejected messages keeps its rows.
func (m *Migrator) DropKafka(ctx context.Context) error {
	objects := m.DDL.KafkaObjects()
	// Views first: a table cannot be dropped while a view reads it.
	for i := len(objects) - 1; i >= 0; i-- {
		o := objects[i]
		if o.Kind != KindView && o.Kind != KindKafka {
			continue
		}
		if err := m.Exec.Exec(ctx, m.DDL.dropStatement(o.Name, o.Kind)); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	return nil
}
