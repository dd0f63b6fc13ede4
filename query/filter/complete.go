package filter

import (
	"flowzero/query/catalog"
)

// Context is what may be typed at a cursor in a filter, for completion. The text between
// From and To (the word, operator or open string being typed, Prefix once unquoted) is
// what a completion replaces.
type Context struct {
	From, To int
	Prefix   string
	// Quoted is set when the cursor is inside a quoted string that is not closed.
	Quoted bool
	// Columns: a column name may come. With Column set (a comparison's right side), only
	// the columns that compare with it.
	Columns bool
	// Keywords are the keywords that may come (NOT, AND, OR).
	Keywords []string
	// Column is the column the operators or values are for.
	Column *catalog.Column
	// Operators are the operators Column takes (after its name).
	Operators []Op
	// Op is the operator before a value.
	Op Op
	// Values: a value of Column may come.
	Values bool
}

// Comparable tells whether other may be compared with the context's column (the right side
// of a condition).
func (c Context) Comparable(other *catalog.Column) bool {
	if c.Column == nil {
		return true
	}
	if other == c.Column || family(c.Column) == "" || family(c.Column) != family(other) {
		return false
	}
	if c.Column.Kind == catalog.KindEnum && !equalStrings(c.Column.Enum, other.Enum) {
		return false
	}
	return ordered(c.Column) || c.Op == OpEq || c.Op == OpNe
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Complete returns what may come at byte offset of text. Nothing may come when the cursor
// is inside a comment or after an error.
func Complete(cat *catalog.Catalog, text string, offset int) Context {
	offset = min(max(offset, 0), len(text), MaxLength)
	head := text[:offset]
	ctx := Context{From: offset, To: offset}
	lx := &lexer{text: head, partial: true}
	toks, err := lx.tokens()
	if err != nil || lx.inComment {
		return ctx
	}
	// The token being typed: a word, an operator or an open string ending at the cursor.
	if n := len(toks); n >= 2 {
		last := toks[n-2]
		if last.end == len(head) && (last.kind == tWord || last.kind == tOp || (last.kind == tString && last.open)) {
			ctx.From, ctx.Prefix, ctx.Quoted = last.pos, last.text, last.open
			if last.open {
				ctx.Prefix = last.value
			}
			toks = append(toks[:n-2], token{kind: tEOF, pos: last.pos, end: last.pos})
		}
	}
	p := &parser{cat: cat, text: head, toks: toks}
	if _, perr := p.parse(); perr != nil && perr.Position.Offset != toks[len(toks)-1].pos {
		return ctx // an error before the cursor
	}
	w := p.want
	switch w.stage {
	case stageCondition:
		ctx.Columns = true
		ctx.Keywords = []string{"NOT"}
	case stageOperator:
		ctx.Column = w.column
		ctx.Operators = Operators(w.column)
	case stageValue:
		ctx.Column, ctx.Op, ctx.Values = w.column, w.op, true
		switch w.op {
		case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
			ctx.Columns = family(w.column) != ""
		}
	case stageListValue:
		ctx.Column, ctx.Op, ctx.Values = w.column, w.op, true
	case stageAfter:
		ctx.Keywords = []string{"AND", "OR"}
	}
	return ctx
}
