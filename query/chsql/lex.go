package chsql

import (
	"errors"
	"fmt"
	"strings"
)

// TokenKind is the kind of a Token.
type TokenKind uint8

const (
	// TokenWord is a bare word: a keyword, a function or a column name.
	TokenWord TokenKind = iota + 1
	// TokenNumber is a number literal.
	TokenNumber
	// TokenString is a single-quoted string literal; Token.Value holds its decoded bytes.
	TokenString
	// TokenIdent is a back-quoted or double-quoted identifier; Value holds its name.
	TokenIdent
	// TokenPunct is an operator or punctuation: ( ) [ ] , . = != <> < <= > >= + - * / % ->
	// :: ?
	TokenPunct
)

// Token is one token of a statement.
type Token struct {
	Kind   TokenKind
	Text   string // as written
	Value  string // decoded value of a string literal or quoted identifier
	Offset int
}

// Lex splits sql into tokens the way ClickHouse's lexer does, skipping white space. It
// returns an error for what that lexer treats as a comment (--, /* */, # and #!, which
// String never writes outside a literal), for an unterminated literal, for an escape that
// String does not write, and for any byte it does not know. A string literal's boundary is
// found as the engine finds it (the first quote neither escaped by a backslash nor doubled),
// then its content is decoded with the escapes \\, \', \xHH and the doubled quote.
func Lex(sql string) ([]Token, error) {
	var out []Token
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && strings.HasPrefix(sql[i:], "--"), c == '/' && strings.HasPrefix(sql[i:], "/*"), c == '#':
			return nil, fmt.Errorf("comment at offset %d", i)
		case c == '\'':
			end, value, err := lexString(sql, i)
			if err != nil {
				return nil, err
			}
			out = append(out, Token{Kind: TokenString, Text: sql[i:end], Value: value, Offset: i})
			i = end
		case c == '`' || c == '"':
			j := i + 1
			var b strings.Builder
			for {
				if j >= len(sql) {
					return nil, fmt.Errorf("unterminated identifier at offset %d", i)
				}
				if sql[j] == c {
					if j+1 < len(sql) && sql[j+1] == c {
						b.WriteByte(c)
						j += 2
						continue
					}
					break
				}
				if sql[j] == '\\' {
					return nil, fmt.Errorf("escape in identifier at offset %d", j)
				}
				b.WriteByte(sql[j])
				j++
			}
			out = append(out, Token{Kind: TokenIdent, Text: sql[i : j+1], Value: b.String(), Offset: i})
			i = j + 1
		case isWordStart(c):
			j := i + 1
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
			out = append(out, Token{Kind: TokenWord, Text: sql[i:j], Offset: i})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(sql) && (isWordByte(sql[j]) || sql[j] == '.') {
				j++
			}
			out = append(out, Token{Kind: TokenNumber, Text: sql[i:j], Offset: i})
			i = j
		default:
			n := punctLen(sql[i:])
			if n == 0 {
				return nil, fmt.Errorf("unexpected byte %q at offset %d", c, i)
			}
			out = append(out, Token{Kind: TokenPunct, Text: sql[i : i+n], Offset: i})
			i += n
		}
	}
	return out, nil
}

func isWordStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isWordByte(c byte) bool { return isWordStart(c) || (c >= '0' && c <= '9') }

var puncts = []string{"!=", "<>", "<=", ">=", "->", "::", "(", ")", "[", "]", ",", ".", "=", "<", ">", "+", "-", "*", "/", "%", "?"}

func punctLen(s string) int {
	for _, p := range puncts {
		if strings.HasPrefix(s, p) {
			return len(p)
		}
	}
	return 0
}

// lexString reads the string literal starting at sql[start] (a quote): its end, as
// ClickHouse's lexer finds it, and its decoded value.
func lexString(sql string, start int) (end int, value string, err error) {
	// The boundary, as Lexer.cpp's quotedString finds it.
	i := start + 1
	for {
		j := strings.IndexAny(sql[i:], `'\`)
		if j < 0 {
			return 0, "", fmt.Errorf("unterminated string at offset %d", start)
		}
		i += j
		if sql[i] == '\\' {
			if i+1 >= len(sql) {
				return 0, "", fmt.Errorf("unterminated string at offset %d", start)
			}
			i += 2
			continue
		}
		i++
		if i < len(sql) && sql[i] == '\'' {
			i++
			continue
		}
		break
	}
	end = i
	// The content, with the escapes String writes.
	body := sql[start+1 : end-1]
	var b strings.Builder
	for k := 0; k < len(body); k++ {
		c := body[k]
		switch {
		case c == '\'':
			// Only a doubled quote can be inside (the boundary stopped at a single one).
			b.WriteByte('\'')
			k++
		case c == '\\':
			k++
			switch e := body[k]; e {
			case '\\', '\'':
				b.WriteByte(e)
			case 'x':
				if k+2 >= len(body) {
					return 0, "", errors.New("short \\x escape")
				}
				hi, lo := unhex(body[k+1]), unhex(body[k+2])
				if hi < 0 || lo < 0 {
					return 0, "", fmt.Errorf("bad \\x escape at offset %d", start+1+k)
				}
				b.WriteByte(byte(hi<<4 | lo))
				k += 2
			default:
				return 0, "", fmt.Errorf("escape \\%c that String does not write, at offset %d", e, start+1+k)
			}
		default:
			b.WriteByte(c)
		}
	}
	return end, b.String(), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
