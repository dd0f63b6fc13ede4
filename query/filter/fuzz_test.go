package filter

import (
	"errors"
	"strings"
	"testing"

	"flowzero/query/chsql"
)

var fuzzSeeds = []string{
	"SrcAddr = 192.0.2.1", "SrcAddr << 2001:db8::/32", "ExporterAddress IN (192.0.2.1, 10.0.0.0/8)",
	"SrcAS = AS13335 AND NOT DstAS IN (1, 2)", "DstASPath = AS1299", "SrcCommunities IN (65000:100, 1:2:3)",
	"SrcMAC = 00:11:22:33:44:55", "SrcPort < DstPort OR Proto = TCP", "EType = IPv6",
	"InIfBoundary = external", `InIfDescription ILIKE "%transit\"s\\%"`, `ExporterName IN ('a''b', "c")`,
	`TimeFlowStart >= "2026-11-26T10:00:00Z"`, "SRv6SIDs = 2001:db8::1", "(SrcAS = 1 OR DstAS = 2) -- c\nAND /* x */ Proto = 6",
	`InIfName = "'; DROP TABLE flows; --"`, "InIfName = 'a\\'b'", "SrcAS = 1)", "((", "SrcCountry = \"\xff\x00\"",
}

// allowedWords are the bare words the compiled SQL may hold besides column names: anything
// else would be filter text that escaped its literal.
var allowedWords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IN": true, "LIKE": true, "ILIKE": true, "BETWEEN": true,
	"has": true, "hasAny": true, "toIPv6": true, "toDateTime": true, "toFixedString": true, "unhex": true,
}

// FuzzParse checks that the parser never panics, and that a filter it accepts compiles, in
// both directions, into SQL made only of column names, known functions and keywords, numbers,
// punctuation and string literals (no filter text outside a literal), and that its canonical
// form parses back to the same SQL.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	cat := testCatalog(f)
	f.Fuzz(func(t *testing.T, text string) {
		flt, err := Parse(cat, text)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if fe.Position.Offset < 0 || fe.Position.Offset > len(text) || fe.Position.Line < 1 || fe.Position.Column < 1 {
				t.Fatalf("error position %+v for %d bytes", fe.Position, len(text))
			}
			return
		}
		for _, reverse := range []bool{false, true} {
			sql := flt.SQL(reverse)
			toks, err := chsql.Lex(sql)
			if err != nil {
				t.Fatalf("SQL %q does not lex: %v", sql, err)
			}
			depth := 0
			for _, tk := range toks {
				switch tk.Kind {
				case chsql.TokenWord:
					if !allowedWords[tk.Text] && cat.Column(tk.Text) == nil {
						t.Fatalf("SQL %q holds the word %q", sql, tk.Text)
					}
				case chsql.TokenIdent:
					t.Fatalf("SQL %q holds a quoted identifier", sql)
				case chsql.TokenPunct:
					switch tk.Text {
					case "(", "[":
						depth++
					case ")", "]":
						depth--
					}
					if depth < 0 {
						t.Fatalf("SQL %q closes a parenthesis it did not open", sql)
					}
				}
			}
			if depth != 0 {
				t.Fatalf("SQL %q leaves parentheses open", sql)
			}
		}
		again, err := Parse(cat, flt.String())
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", flt.String(), err)
		}
		if again.SQL(false) != flt.SQL(false) {
			t.Fatalf("canonical form %q compiles to %q, not %q", flt.String(), again.SQL(false), flt.SQL(false))
		}
		if strings.ContainsAny(flt.SQL(false), "\n\r") {
			t.Fatalf("SQL on several lines: %q", flt.SQL(false))
		}
	})
}
