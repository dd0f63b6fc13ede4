package query

import (
	"errors"
	"strings"
	"testing"

	"flowzero/query/chsql"
)

// FuzzReadOnlySQL: a statement readOnlySQL accepts stays inside the subquery RawSQL wraps
// it in (the parentheses never close before the wrapper's last one), starts with SELECT or
// WITH, and has no SETTINGS, FORMAT or INTO clause nor a call of a refused function.
func FuzzReadOnlySQL(f *testing.F) {
	for _, s := range []string{"SELECT 1", "WITH 1 AS a SELECT a", "SELECT count() FROM flowzero.flows;", "SELECT 1) UNION ALL (SELECT 2",
		"SELECT * FROM file('x')", "SELECT ')' FROM t", "SELECT `a)` FROM t", "SELECT format('{}', 1)", "SELECT 1 SETTINGS a = 1",
		"SELECT * FROM numbers(10) WHERE number IN (SELECT 1)", "SELECT '\\')'",
		"SELECT * FROM '/etc/hostname'", "SELECT * FROM `/etc/hostname`", "SELECT (SELECT * FROM '/etc/*')",
		"SELECT * FROM default.`/etc/hostname`", "SELECT 1 IN `/etc/hostname`", "SELECT in(1, `/etc/hostname`)",
		"WITH `/x` AS (SELECT 1) SELECT * FROM `/x`", "SELECT * FROM flowzero.flows AS f, `/x`",
		"SELECT * FROM ((SELECT 1) UNION ALL SELECT * FROM `/x`)", "SELECT * FROM loop(default, `/x`)"} {
		f.Add(s)
	}
	funcs := map[string]bool{"file": true, "url": true, "s3": true, "numbers": true, "format": true, "remote": true, "loop": true}
	tables := testTables()
	f.Fuzz(func(t *testing.T, sql string) {
		got, err := readOnlySQL(sql, funcs, tables)
		if err != nil {
			return
		}
		toks, err := chsql.Lex("SELECT * FROM (\n" + got + "\n)")
		if err != nil {
			t.Fatalf("%q accepted, the wrapped statement does not lex: %v", sql, err)
		}
		depth := 0
		for i, tok := range toks {
			switch tok.Text {
			case "(":
				depth++
			case ")":
				depth--
				if depth == 0 && i != len(toks)-1 {
					t.Fatalf("%q accepted: it closes the subquery at byte %d", sql, tok.Offset)
				}
			}
			if tok.Kind == chsql.TokenWord {
				switch strings.ToUpper(tok.Text) {
				case "SETTINGS", "INTO":
					t.Fatalf("%q accepted with %s", sql, tok.Text)
				case "JOIN":
					// A file path in a table position: never after JOIN; a quoted name
					// there is a table or a WITH name of the statement.
					if i+1 < len(toks) && toks[i+1].Kind == chsql.TokenString {
						t.Fatalf("%q accepted joining a string", sql)
					}
					if i+2 < len(toks) && toks[i+1].Kind == chsql.TokenIdent && toks[i+2].Text != "." && toks[i+2].Text != "(" &&
						!tables.current[toks[i+1].Value] && !strings.Contains(got, toks[i+1].Text+" AS (") {
						t.Fatalf("%q accepted joining %s", sql, toks[i+1].Text)
					}
				}
			}
			if (tok.Kind == chsql.TokenWord || tok.Kind == chsql.TokenIdent) && i+1 < len(toks) && toks[i+1].Text == "(" {
				name := strings.ToLower(tok.Text)
				if tok.Kind == chsql.TokenIdent {
					name = strings.ToLower(tok.Value)
				}
				if funcs[name] && !safeTableFunctions[name] {
					t.Fatalf("%q accepted calling %s", sql, tok.Text)
				}
			}
		}
		if depth != 0 {
			t.Fatalf("%q accepted: unbalanced", sql)
		}
		if first := strings.ToUpper(toks[4].Text); first != "SELECT" && first != "WITH" {
			t.Fatalf("%q accepted, starting with %s", sql, toks[4].Text)
		}
	})
}

// testTables are the tables of the unit tests' engine: the flows tables, two system tables
// and a table of the current database.
func testTables() tableSet {
	t := tableSet{qualified: map[[2]string]bool{}, current: map[string]bool{"local": true}}
	for _, n := range [][2]string{{"flowzero", "flows"}, {"flowzero", "flows_1m"}, {"system", "tables"},
		{"system", "columns"}, {"default", "local"}} {
		t.qualified[n] = true
	}
	return t
}

// TestReadOnlySQLTables: every table position (FROM, JOIN, a comma of a FROM clause, IN and
// the IN functions' second argument, at any depth, in WITH bodies and table functions'
// subqueries) must name a table of the engine, a subquery, a table function or a WITH name
// in scope; a string or a quoted path there is a file to the embedded engine and is
// refused, naming its byte offset. What the console and `flowzero store query` send stays
// accepted.
func TestReadOnlySQLTables(t *testing.T) {
	funcs := map[string]bool{"file": true, "url": true, "numbers": true, "view": true, "loop": true, "merge": true}
	tables := testTables()
	for _, sql := range []string{
		"SELECT count() FROM flowzero.flows",
		"SELECT name, type FROM system.columns WHERE database = 'flowzero' AND table = 'flows'",
		"SELECT name FROM system.tables WHERE database = 'flowzero'",
		"SELECT * FROM `flowzero`.`flows` AS f JOIN flowzero.flows_1m AS m ON f.SrcAS = m.SrcAS",
		"SELECT * FROM flowzero.flows AS a, flowzero.flows_1m AS b, (SELECT 1) AS c, numbers(2) AS d",
		"SELECT * FROM flowzero.flows AS a JOIN flowzero.flows_1m AS b USING (SrcAS), system.tables",
		"SELECT * FROM flowzero.flows AS a JOIN flowzero.flows_1m AS b USING SrcAS, DstAS",
		"SELECT * FROM local",
		"WITH x AS (SELECT 1 AS a), y AS (SELECT a FROM x) SELECT * FROM y JOIN x USING a",
		"WITH x AS (SELECT 1) SELECT * FROM x UNION ALL SELECT * FROM (SELECT * FROM x)",
		"WITH x AS (SELECT 1 AS a) SELECT 1 IN x, 2 IN (SELECT a FROM x)",
		"SELECT SrcAS FROM flowzero.flows WHERE SrcAS IN (1, 2) AND DstAS NOT IN (SELECT 3) AND Proto IN flowzero.flows_1m",
		"SELECT position('b' IN 'abc'), trim(BOTH 'x' FROM 'xax'), extract(DAY FROM now()), substring('abc' FROM 2)",
		"SELECT * FROM numbers(3) ORDER BY number WITH FILL FROM 0 TO 5",
		"SELECT 1 IS NOT DISTINCT FROM 1",
		"SELECT * FROM system.tables ARRAY JOIN [1, 2] AS a, [3, 4] AS b",
		"SELECT * FROM view(SELECT * FROM flowzero.flows)",
		"SELECT * EXCEPT (a) FROM (SELECT 1 AS a, 2 AS b)",
		"SELECT * FROM merge('flowzero', '^flows')",
	} {
		if _, err := readOnlySQL(sql, funcs, tables); err != nil {
			t.Errorf("%q refused: %v", sql, err)
		}
	}
	for _, c := range []struct{ sql, want string }{
		{"SELECT * FROM '/etc/hostname'", "at byte 14 after FROM"},
		{"SELECT * FROM `/etc/hostname`", "at byte 14 after FROM"},
		{`SELECT * FROM "/etc/hostname"`, "at byte 14 after FROM"},
		{"SELECT * FROM default.`/etc/hostname`", "default.`/etc/hostname` at byte 14"},
		{"SELECT * FROM flowzero.`/etc/hostname`", "at byte 14"},
		{"SELECT (SELECT * FROM '/etc/*')", "at byte 22"},
		{"SELECT * FROM hostname", "hostname at byte 14"}, // a file of the working directory
		{"SELECT * FROM (SELECT * FROM (SELECT 1) AS a JOIN `/etc/hostname` ON 1)", "after JOIN"},
		{"SELECT * FROM system.tables AS a, '/etc/hostname'", "after a comma of a FROM clause"},
		{"SELECT * FROM system.tables AS a JOIN system.tables AS b ON 1, `/etc/hostname`", "after a comma"},
		{"SELECT * FROM system.tables AS a JOIN system.tables AS b USING (name), `/etc/hostname`", "after a comma"},
		{"SELECT * FROM ((SELECT 1) UNION ALL SELECT * FROM `/etc/hostname`)", "at byte 50"},
		{"SELECT * FROM view((SELECT 'a') UNION ALL SELECT * FROM '/etc/hostname')", "after FROM"},
		{"SELECT 'vm' IN `/etc/hostname`", "after IN"},
		{"SELECT 'vm' NOT IN default.`/etc/hostname`", "after IN"},
		{"SELECT in('vm', `/etc/hostname`)", "after IN"},
		{"SELECT NOT globalNotIn('vm', `/etc/hostname`)", "after IN"},
		{"SELECT hasColumnInTable('default', '/etc/hostname', 'c1')", "functions reading outside"},
		{"SELECT * FROM loop(default, `/etc/hostname`)", "functions reading outside"},
		{"SELECT * FROM file('/etc/hostname')", "functions reading outside"},
		// A WITH name is seen only where the engine sees it.
		{"SELECT * FROM (WITH `/etc/hostname` AS (SELECT 1) SELECT 1) UNION ALL SELECT * FROM `/etc/hostname`", "at byte 84"},
		{"WITH `/etc/hostname` AS (SELECT * FROM `/etc/hostname`) SELECT 1", "at byte 39"},
		{"WITH `/x` AS (SELECT 1) SELECT * FROM view(SELECT * FROM `/x`)", "at byte 57"},
		{"WITH `/x` AS (SELECT 1) SELECT 1 UNION ALL WITH y AS (SELECT 2) SELECT * FROM `/x`", "at byte 78"},
		{"SELECT * FROM 1", "a table, a subquery or a table function is expected"},
	} {
		_, err := readOnlySQL(c.sql, funcs, tables)
		var re *RequestError
		if !errors.As(err, &re) || re.Field != "sql" || !strings.Contains(re.Message, c.want) {
			t.Errorf("%q: %v, want an error on sql with %q", c.sql, err, c.want)
		}
	}
}
