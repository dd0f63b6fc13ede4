package query

import (
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
		"SELECT * FROM numbers(10) WHERE number IN (SELECT 1)", "SELECT '\\')'"} {
		f.Add(s)
	}
	funcs := map[string]bool{"file": true, "url": true, "s3": true, "numbers": true, "format": true, "remote": true}
	f.Fuzz(func(t *testing.T, sql string) {
		got, err := readOnlySQL(sql, funcs)
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
