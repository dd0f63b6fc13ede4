package filter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Position is a place in a filter: a byte offset from 0, and the line and column (in
// characters) from 1.
type Position struct {
	Offset int `json:"offset"`
	Line   int `json:"line"`
	Column int `json:"column"`
}

// Error is a filter that does not parse or does not fit the columns: what is wrong, where,
// and what could have come there instead.
type Error struct {
	Message  string
	Position Position
	// Expected lists what the filter could have had at Position ("a column name", "AND").
	Expected []string
}

func (e *Error) Error() string {
	return fmt.Sprintf("filter: line %d, column %d: %s", e.Position.Line, e.Position.Column, e.Message)
}

// positionOf returns the position of a byte offset of text.
func positionOf(text string, offset int) Position {
	offset = min(max(offset, 0), len(text))
	before := text[:offset]
	line := 1 + strings.Count(before, "\n")
	lineStart := strings.LastIndexByte(before, '\n') + 1
	return Position{Offset: offset, Line: line, Column: 1 + utf8.RuneCountInString(before[lineStart:])}
}

// describe names a token for an error message.
func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the filter"
	case tString:
		return "the string " + truncate(t.text)
	}
	return fmt.Sprintf("%q", truncate(t.text))
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	r := []rune(s)
	return string(r[:40]) + "…"
}

// joinOr writes "a, b or c".
func joinOr(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
