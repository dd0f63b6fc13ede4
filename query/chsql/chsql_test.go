package chsql

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", `''`},
		{"transit: Cogent", `'transit: Cogent'`},
		{"it's", `'it\'s'`},
		{`back\slash`, `'back\\slash'`},
		{"a\nb\tc\x00d\x7f", `'a\x0Ab\x09c\x00d\x7F'`},
		{"Zürich", `'Zürich'`},
		{"\xff\xfe", `'\xFF\xFE'`},
		{"100\\%", `'100\\%'`},
		{"'; DROP TABLE flows; --", `'\'; DROP TABLE flows; --'`},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %s, want %s", c.in, got, c.want)
		}
		checkRoundTrip(t, c.in)
	}
}

func TestIdent(t *testing.T) {
	if got := Table("flowzero", "flows_1m"); got != "`flowzero`.`flows_1m`" {
		t.Errorf("Table = %s", got)
	}
	if got := Ident("a`b"); got != "`a``b`" {
		t.Errorf("Ident = %s", got)
	}
}

// checkRoundTrip checks that the literal of s, inside a statement, is one string token
// that decodes to s, is followed by the rest of the statement, and holds no control byte
// and no invalid UTF-8.
func checkRoundTrip(t *testing.T, s string) {
	t.Helper()
	lit := String(s)
	if !utf8.ValidString(lit) {
		t.Fatalf("String(%q) = %q: invalid UTF-8", s, lit)
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] < 0x20 || lit[i] == 0x7f {
			t.Fatalf("String(%q) = %q: control byte at %d", s, lit, i)
		}
	}
	toks, err := Lex("SELECT x = " + lit + " AND y")
	if err != nil {
		t.Fatalf("String(%q) = %s: %v", s, lit, err)
	}
	if len(toks) != 6 || toks[3].Kind != TokenString || toks[3].Value != s || toks[4].Text != "AND" || toks[5].Text != "y" {
		t.Fatalf("String(%q) = %s: tokens %+v", s, lit, toks)
	}
}

// FuzzString proves that no text breaks out of the literal String writes: ClickHouse's
// lexer ends the literal exactly where String ended it and decodes it to the same bytes.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "'", `\`, `\'`, `''`, "\\x41", "\x00", "a\nb", "\xff", "é", "--", "/*", "#!", "`", `"`, "' OR 1=1 --"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkRoundTrip(t, s)
	})
}

func TestLexRefuses(t *testing.T) {
	for _, sql := range []string{"a -- b", "a /* b */", "a # b", `'a`, `'a\`, `'\n'`, "a ; b", "`a"} {
		if _, err := Lex(sql); err == nil {
			t.Errorf("Lex(%q) accepted", sql)
		}
	}
	toks, err := Lex("has(DstASPath, 1299) AND SrcAddr BETWEEN toIPv6('::ffff:192.0.2.0') AND x != 0x1F")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, tk := range toks {
		texts = append(texts, tk.Text)
	}
	if got := strings.Join(texts, "|"); got != "has|(|DstASPath|,|1299|)|AND|SrcAddr|BETWEEN|toIPv6|(|'::ffff:192.0.2.0'|)|AND|x|!=|0x1F" {
		t.Errorf("tokens %s", got)
	}
}
