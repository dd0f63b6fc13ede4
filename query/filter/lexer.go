package filter

import (
	"strings"
)

type tokenKind uint8

const (
	tEOF    tokenKind = iota
	tWord             // a name, a keyword or a bare value: letters, digits and _ . : / - +
	tString           // a quoted string; value holds it unescaped
	tOp               // = != < <= > >= << !<<
	tLParen
	tRParen
	tComma
)

type token struct {
	kind  tokenKind
	text  string // as written
	value string // a string's value, unescaped
	pos   int    // byte offset of the first byte
	end   int    // byte offset past the last byte
	// open is set on a string whose closing quote is missing (only lexed for completion).
	open bool
}

// lexer splits a filter into tokens, skipping white space and comments.
type lexer struct {
	text string
	// partial accepts an unterminated string at the end, for completion.
	partial bool
	// inComment is set when the text ends inside a -- comment.
	inComment bool
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c == ':' || c == '/' || c == '-' || c == '+' ||
		(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// tokens returns every token, ending with tEOF, or the first lexical error.
func (l *lexer) tokens() ([]token, *Error) {
	var out []token
	s := l.text
	i := 0
	for {
		// White space and comments.
		for i < len(s) {
			switch {
			case s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r':
				i++
			case strings.HasPrefix(s[i:], "--"):
				if nl := strings.IndexByte(s[i:], '\n'); nl >= 0 {
					i += nl + 1
				} else {
					i, l.inComment = len(s), true
				}
			case strings.HasPrefix(s[i:], "/*"):
				end := strings.Index(s[i+2:], "*/")
				if end < 0 {
					return nil, l.errorAt(i, "comment not closed: */ is missing", "*/")
				}
				i += 2 + end + 2
			default:
				goto token
			}
		}
	token:
		if i >= len(s) {
			return append(out, token{kind: tEOF, pos: len(s), end: len(s)}), nil
		}
		start := i
		c := s[i]
		switch {
		case c == '(':
			out = append(out, token{kind: tLParen, text: "(", pos: i, end: i + 1})
			i++
		case c == ')':
			out = append(out, token{kind: tRParen, text: ")", pos: i, end: i + 1})
			i++
		case c == ',':
			out = append(out, token{kind: tComma, text: ",", pos: i, end: i + 1})
			i++
		case c == '=' || c == '<' || c == '>' || c == '!':
			op := ""
			for _, o := range []string{"!<<", "!=", "<<", "<=", ">=", "=", "<", ">"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, l.errorAt(i, `unexpected "!": write != or !<<`, "!=", "!<<")
			}
			if op == "=" && strings.HasPrefix(s[i:], "==") {
				op = "==" // read as =, like ClickHouse
			}
			out = append(out, token{kind: tOp, text: op, value: strings.Replace(op, "==", "=", 1), pos: i, end: i + len(op)})
			i += len(op)
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			closed := false
			for j < len(s) {
				if s[j] == c {
					closed = true
					j++
					break
				}
				if s[j] == '\\' && j+1 < len(s) && (s[j+1] == '\\' || s[j+1] == '"' || s[j+1] == '\'') {
					b.WriteByte(s[j+1])
					j += 2
					continue
				}
				b.WriteByte(s[j])
				j++
			}
			if !closed {
				if !l.partial {
					return nil, l.errorAt(start, "string not closed: its closing "+string(c)+" is missing", string(c))
				}
				out = append(out, token{kind: tString, text: s[start:], value: b.String(), pos: start, end: len(s), open: true})
				return append(out, token{kind: tEOF, pos: len(s), end: len(s)}), nil
			}
			out = append(out, token{kind: tString, text: s[start:j], value: b.String(), pos: start, end: j})
			i = j
		case isWordByte(c) && !strings.HasPrefix(s[i:], "--"):
			j := i
			for j < len(s) && isWordByte(s[j]) && !strings.HasPrefix(s[j:], "--") && !strings.HasPrefix(s[j:], "/*") {
				j++
			}
			out = append(out, token{kind: tWord, text: s[i:j], pos: i, end: j})
			i = j
		default:
			r := []rune(s[i:min(len(s), i+4)])
			return nil, l.errorAt(i, "unexpected character "+quoteRune(r[0]))
		}
	}
}

func quoteRune(r rune) string {
	if r < 0x20 || r == 0x7f {
		return "(a control character)"
	}
	return "\"" + string(r) + "\""
}

func (l *lexer) errorAt(offset int, msg string, expected ...string) *Error {
	return &Error{Message: msg, Position: positionOf(l.text, offset), Expected: expected}
}
