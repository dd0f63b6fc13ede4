// Package chsql writes the parts of ClickHouse SQL that carry values. Every literal the
// query layer emits goes through String or Ident, so that no text a user typed can end a
// literal early and become SQL: a filter value, a column alias, a table name.
//
// String escapes the quote and the backslash, and writes every control byte and every byte
// that is not part of valid UTF-8 as \xHH: the literal stays on one line, prints safely in
// an HTTP header or a log, and decodes to the same bytes in ClickHouse (its lexer ends a
// string at the first quote not escaped by a backslash or doubled; readQuotedString decodes
// \\, \' and \xHH). Lex, a tokenizer following the engine's lexer, lets tests and fuzz
// targets check what a statement is made of.
package chsql

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789ABCDEF"

// AppendString appends s to dst as a single-quoted ClickHouse string literal.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '\'')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '\\':
			dst = append(dst, '\\', c)
			i++
		case c < 0x20 || c == 0x7f:
			dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			i++
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
				i++
				continue
			}
			dst = append(dst, s[i:i+size]...)
			i += size
		}
	}
	return append(dst, '\'')
}

// String returns s as a single-quoted ClickHouse string literal.
func String(s string) string {
	return string(AppendString(make([]byte, 0, len(s)+2), s))
}

// Ident returns name as a back-quoted ClickHouse identifier (a database or table name).
// Back quotes are doubled; names the configuration accepts are plain identifiers anyway.
func Ident(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// Table returns database.table, both back-quoted.
func Table(database, table string) string {
	return Ident(database) + "." + Ident(table)
}

// Uint returns v as a ClickHouse number literal.
func Uint(v uint64) string { return strconv.FormatUint(v, 10) }

// Int returns v as a ClickHouse number literal.
func Int(v int64) string { return strconv.FormatInt(v, 10) }
