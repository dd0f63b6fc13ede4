// Package filter is flowzero's flow filter language: a lexer and recursive-descent parser
// into an AST checked against the catalog's columns, a compiler from the AST to a ClickHouse
// WHERE expression, and the context completion needs.
//
// # Language
//
//	filter    := [ or ]
//	or        := and { OR and }
//	and       := unary { AND unary }
//	unary     := NOT unary | "(" or ")" | condition
//	condition := column op value | column op column | column (IN | NOTIN) "(" value { "," value } ")"
//	op        := = | != | < | <= | > | >= | << | !<< | LIKE | UNLIKE | ILIKE | IUNLIKE
//
// Keywords and column names are case-insensitive; NOT IN, NOT LIKE and NOT ILIKE are read as
// NOTIN, UNLIKE and IUNLIKE, and == as =. Comments run from -- to the end of the line or
// between /* and */. Strings take single or double quotes; a backslash escapes a backslash or
// either quote, and any other backslash stays (so that LIKE 'a\%' keeps its escape). A bare
// word is a run of letters, digits and _ . : / - +, which holds every address, prefix, MAC
// address, community, AS number and enum value unquoted.
//
// Each column takes the operators and values of its kind (catalog.Kind): an address column
// an address (=, !=) or a prefix (= or << inside it, != or !<< outside); an AS column AS13335
// or 13335; DstASPath, communities and arrays = (contains) and IN (contains any); enums their
// values; ports at most 65535, numbers at most their type's maximum; strings a quoted string.
// A communities column given a large community (65000:1:2) compares the matching large
// communities column. Two columns of the same kind compare with each other (SrcPort <
// DstPort). Values are checked while parsing: an error says what was expected, found what,
// where (line, column and byte offset).
//
// # SQL
//
// The compiler writes every literal through chsql (the one quoting function); numbers are
// written from the parsed integers, addresses from netip's canonical text, so no byte of the
// filter reaches the SQL otherwise. Column names come from the catalog, never from the
// filter's text. With reverse set, each column is replaced by the one of the other direction
// (Src and Dst, In and Out swapped), which bidirectional queries use.
package filter

import (
	"fmt"
	"strings"

	"flowzero/query/catalog"
)

// Limits of a filter, so that a request cannot make the parser or the SQL unbounded.
const (
	MaxLength = 64 << 10
	maxDepth  = 64
)

// Filter is a parsed filter. The zero filter (no condition) matches every flow.
type Filter struct {
	root Expr
	cat  *catalog.Catalog
}

// Root returns the filter's expression, nil for an empty filter.
func (f *Filter) Root() Expr { return f.root }

// Empty tells whether the filter has no condition.
func (f *Filter) Empty() bool { return f == nil || f.root == nil }

// String returns the filter in a canonical form: the columns' names as the schema writes
// them, operators and keywords in capitals, values as the language writes them, the
// parentheses precedence needs. It parses back to the same filter.
func (f *Filter) String() string {
	if f.Empty() {
		return ""
	}
	var b strings.Builder
	format(&b, f.root, 0, f.cat)
	return b.String()
}

// Parse parses a filter against the columns of cat. An empty filter (or only white space
// and comments) is valid and matches everything. Errors are *Error.
func Parse(cat *catalog.Catalog, text string) (*Filter, error) {
	if len(text) > MaxLength {
		return nil, &Error{Message: fmt.Sprintf("the filter is longer than %d bytes", MaxLength), Position: positionOf(text, MaxLength)}
	}
	toks, lerr := (&lexer{text: text}).tokens()
	if lerr != nil {
		return nil, lerr
	}
	p := &parser{cat: cat, text: text, toks: toks}
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	return &Filter{root: root, cat: cat}, nil
}

// stage is what the parser expects next.
type stage uint8

const (
	stageCondition stage = iota // a column, NOT or "("
	stageOperator               // an operator for the column
	stageValue                  // a value, or another column, for the column and operator
	stageListOpen               // "(" after IN or NOTIN
	stageListValue              // a value of the list
	stageListNext               // "," or ")"
	stageAfter                  // AND, OR, ")" when in parentheses, or the end
)

// expectation is what may come at a point of the filter.
type expectation struct {
	stage  stage
	column *catalog.Column
	op     Op
	depth  int // parentheses open
}

type parser struct {
	cat  *catalog.Catalog
	text string
	toks []token
	i    int
	// want is what the parser expected when it read its last token.
	want  expectation
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) expect(s stage, col *catalog.Column, op Op) {
	p.want = expectation{stage: s, column: col, op: op, depth: p.depth}
}

func isKeyword(t token, kw string) bool { return t.kind == tWord && strings.EqualFold(t.text, kw) }

func (p *parser) parse() (Expr, *Error) {
	if p.peek().kind == tEOF {
		p.expect(stageCondition, nil, "")
		return nil, nil
	}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		if t.kind == tRParen {
			return nil, p.errorAt(t, `")" without "(" before it`)
		}
		return nil, p.fail(t)
	}
	return e, nil
}

func (p *parser) or() (Expr, *Error) {
	first, err := p.and()
	if err != nil {
		return nil, err
	}
	terms := []Expr{first}
	for p.expect(stageAfter, nil, ""); isKeyword(p.peek(), "OR"); p.expect(stageAfter, nil, "") {
		p.next()
		e, err := p.and()
		if err != nil {
			return nil, err
		}
		terms = append(terms, e)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return &Or{Terms: flattenOr(terms)}, nil
}

func (p *parser) and() (Expr, *Error) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	terms := []Expr{first}
	for p.expect(stageAfter, nil, ""); isKeyword(p.peek(), "AND"); p.expect(stageAfter, nil, "") {
		p.next()
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		terms = append(terms, e)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return &And{Terms: flattenAnd(terms)}, nil
}

// flattenOr and flattenAnd merge the terms of a nested node of the same operator:
// (a AND b) AND c is a AND b AND c.
func flattenOr(terms []Expr) []Expr {
	var out []Expr
	for _, t := range terms {
		if o, ok := t.(*Or); ok {
			out = append(out, o.Terms...)
		} else {
			out = append(out, t)
		}
	}
	return out
}

func flattenAnd(terms []Expr) []Expr {
	var out []Expr
	for _, t := range terms {
		if a, ok := t.(*And); ok {
			out = append(out, a.Terms...)
		} else {
			out = append(out, t)
		}
	}
	return out
}

func (p *parser) unary() (Expr, *Error) {
	p.expect(stageCondition, nil, "")
	t := p.peek()
	switch {
	case isKeyword(t, "NOT"):
		p.next()
		if p.depth >= maxDepth {
			return nil, p.errorAt(t, fmt.Sprintf("more than %d nested NOT and parentheses", maxDepth))
		}
		p.depth++
		x, err := p.unary()
		p.depth--
		if err != nil {
			return nil, err
		}
		if n, ok := x.(*Not); ok {
			return n.X, nil
		}
		return &Not{X: x}, nil
	case t.kind == tLParen:
		p.next()
		if p.depth >= maxDepth {
			return nil, p.errorAt(t, fmt.Sprintf("more than %d nested NOT and parentheses", maxDepth))
		}
		p.depth++
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if c := p.peek(); c.kind != tRParen {
			return nil, p.fail(c)
		}
		p.next()
		p.depth--
		p.expect(stageAfter, nil, "")
		return e, nil
	}
	return p.condition()
}

func (p *parser) condition() (Expr, *Error) {
	t := p.next()
	if t.kind != tWord {
		return nil, p.fail(t)
	}
	col := p.cat.Column(t.text)
	if col == nil {
		return nil, p.unknownColumn(t)
	}
	if !col.Filter {
		return nil, p.errorAt(t, fmt.Sprintf("filters do not take %s", col.Name))
	}
	cond := &Condition{Column: col, Pos: t.pos}
	p.expect(stageOperator, col, "")
	op, err := p.operator(col)
	if err != nil {
		return nil, err
	}
	cond.Op = op
	if op == OpIn || op == OpNotIn {
		p.expect(stageListOpen, col, op)
		if t := p.next(); t.kind != tLParen {
			return nil, p.fail(t)
		}
		for {
			p.expect(stageListValue, col, op)
			v, err := p.value(col, op, p.next())
			if err != nil {
				return nil, err
			}
			cond.Values = append(cond.Values, v)
			p.expect(stageListNext, col, op)
			t := p.next()
			if t.kind == tRParen {
				break
			}
			if t.kind != tComma {
				return nil, p.fail(t)
			}
		}
		p.expect(stageAfter, nil, "")
		return cond, nil
	}
	p.expect(stageValue, col, op)
	t = p.next()
	v, msg := parseValue(p.cat, col, t)
	if msg != "" {
		// Not a value: another column?
		if t.kind == tWord {
			if right := p.cat.Column(t.text); right != nil {
				if err := p.checkColumns(t, col, op, right); err != nil {
					return nil, err
				}
				cond.Right = right
				p.expect(stageAfter, nil, "")
				return cond, nil
			}
		}
		if t.kind == tEOF || t.kind == tRParen || t.kind == tComma || t.kind == tOp {
			return nil, p.fail(t)
		}
		return nil, p.errorAt(t, msg)
	}
	if err := p.checkValue(t, col, op, v); err != nil {
		return nil, err
	}
	cond.Values = []Value{v}
	if col.Kind == catalog.KindAddress && v.IsPrefix {
		// = and != with a prefix mean inside and outside it.
		switch op {
		case OpEq:
			cond.Op = OpSub
		case OpNe:
			cond.Op = OpNotSub
		}
	}
	p.expect(stageAfter, nil, "")
	return cond, nil
}

// value reads one value of an IN list.
func (p *parser) value(col *catalog.Column, op Op, t token) (Value, *Error) {
	if t.kind != tWord && t.kind != tString {
		return Value{}, p.fail(t)
	}
	v, msg := parseValue(p.cat, col, t)
	if msg != "" {
		return v, p.errorAt(t, msg)
	}
	return v, p.checkValue(t, col, op, v)
}

// checkValue checks what parseValue cannot see alone: the operator with the value.
func (p *parser) checkValue(t token, col *catalog.Column, op Op, v Value) *Error {
	switch {
	case col.Kind == catalog.KindAddress && (op == OpSub || op == OpNotSub) && !v.IsPrefix:
		return p.errorAt(t, fmt.Sprintf("%s takes a prefix (192.0.2.0/24), found %s: use = or != for one address", op, describe(t)))
	case v.IsLarge && p.largeColumn(col) == nil:
		return p.errorAt(t, fmt.Sprintf("%s is a large community, and %s is not enabled", describe(t), largeName(col)))
	}
	return nil
}

// largeName is the name of the large communities column matching a communities column.
func largeName(col *catalog.Column) string {
	return strings.Replace(col.Name, "Communities", "LargeCommunities", 1)
}

// largeColumn returns the large communities column matching a communities column, or nil.
func (p *parser) largeColumn(col *catalog.Column) *catalog.Column {
	return p.cat.Column(largeName(col))
}

// checkColumns checks a comparison of two columns.
func (p *parser) checkColumns(t token, left *catalog.Column, op Op, right *catalog.Column) *Error {
	if op == OpSub || op == OpNotSub || op == OpLike || op == OpUnlike || op == OpILike || op == OpIUnlike {
		return p.errorAt(t, fmt.Sprintf("%s takes a value, not a column", op))
	}
	fl, fr := family(left), family(right)
	if fl == "" || fl != fr || (left.Kind == catalog.KindEnum && strings.Join(left.Enum, ",") != strings.Join(right.Enum, ",")) {
		return p.errorAt(t, fmt.Sprintf("%s (%s) cannot be compared with %s (%s)", left.Name, kindName(left), right.Name, kindName(right)))
	}
	if !ordered(left) && op != OpEq && op != OpNe {
		return p.errorAt(t, fmt.Sprintf("two columns of %s compare with = or != only", kindName(left)))
	}
	return nil
}

// family groups the kinds whose columns compare with each other; "" for none.
func family(c *catalog.Column) string {
	switch c.Kind {
	case catalog.KindPort, catalog.KindNumber:
		return "number"
	case catalog.KindPrefix, catalog.KindString:
		return "string"
	case catalog.KindAddress, catalog.KindAS, catalog.KindMAC, catalog.KindProtocol, catalog.KindEType,
		catalog.KindEnum, catalog.KindTime:
		return string(c.Kind)
	}
	return ""
}

// ordered tells whether < and > compare two columns of c's kind.
func ordered(c *catalog.Column) bool {
	switch c.Kind {
	case catalog.KindPort, catalog.KindNumber, catalog.KindAS, catalog.KindTime:
		return true
	}
	return false
}

// Operators returns the operators a column takes.
func Operators(c *catalog.Column) []Op {
	compare := []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe, OpIn, OpNotIn}
	switch c.Kind {
	case catalog.KindAddress:
		return []Op{OpEq, OpNe, OpSub, OpNotSub, OpIn, OpNotIn}
	case catalog.KindString:
		return []Op{OpEq, OpNe, OpLike, OpUnlike, OpILike, OpIUnlike, OpIn, OpNotIn}
	case catalog.KindAS, catalog.KindPort, catalog.KindNumber, catalog.KindProtocol:
		return compare
	case catalog.KindTime:
		return compare[:6]
	}
	return []Op{OpEq, OpNe, OpIn, OpNotIn}
}

// operator reads the operator after a column.
func (p *parser) operator(col *catalog.Column) (Op, *Error) {
	t := p.next()
	var op Op
	switch {
	case t.kind == tOp:
		op = Op(t.value)
	case t.kind == tWord:
		switch w := strings.ToUpper(t.text); w {
		case "IN", "NOTIN", "LIKE", "UNLIKE", "ILIKE", "IUNLIKE":
			op = Op(w)
		case "NOT":
			n := p.peek()
			switch {
			case isKeyword(n, "IN"):
				op = OpNotIn
			case isKeyword(n, "LIKE"):
				op = OpUnlike
			case isKeyword(n, "ILIKE"):
				op = OpIUnlike
			default:
				return "", p.errorAt(n, "expected IN, LIKE or ILIKE after NOT, found "+describe(n))
			}
			p.next()
		}
	}
	if op == "" {
		return "", p.fail(t)
	}
	for _, o := range Operators(col) {
		if o == op {
			return op, nil
		}
	}
	return "", p.errorAt(t, fmt.Sprintf("%s takes %s, not %s (it holds %s)", col.Name, joinOr(opStrings(Operators(col))), op, kindName(col)))
}

func opStrings(ops []Op) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}

// unknownColumn is the error for a word that is not an enabled column.
func (p *parser) unknownColumn(t token) *Error {
	for _, kw := range []string{"AND", "OR", "NOT", "IN", "NOTIN", "LIKE", "UNLIKE", "ILIKE", "IUNLIKE"} {
		if isKeyword(t, kw) {
			return p.fail(t)
		}
	}
	for _, name := range p.cat.Disabled {
		if strings.EqualFold(name, t.text) {
			return p.errorAt(t, fmt.Sprintf("column %s is not enabled (schema.enabled in the configuration)", name))
		}
	}
	return p.errorAt(t, fmt.Sprintf("unknown column %q", truncate(t.text)))
}

// expected returns what the parser expected, in words.
func (p *parser) expected() []string {
	w := p.want
	switch w.stage {
	case stageCondition:
		return []string{"a column name", "NOT", `"("`}
	case stageOperator:
		return opStrings(Operators(w.column))
	case stageValue:
		out := []string{valueExpected(w.column)}
		if family(w.column) != "" {
			out = append(out, "a column name")
		}
		return out
	case stageListOpen:
		return []string{`"("`}
	case stageListValue:
		return []string{valueExpected(w.column)}
	case stageListNext:
		return []string{`","`, `")"`}
	}
	if w.depth > 0 {
		return []string{"AND", "OR", `")"`}
	}
	return []string{"AND", "OR", "the end of the filter"}
}

// fail is the error for an unexpected token: what was expected, what was found.
func (p *parser) fail(t token) *Error {
	exp := p.expected()
	msg := fmt.Sprintf("expected %s, found %s", joinOr(exp), describe(t))
	if p.want.stage == stageOperator {
		msg = fmt.Sprintf("expected an operator for %s (%s), found %s", p.want.column.Name, joinOr(exp), describe(t))
	}
	return &Error{Message: msg, Position: positionOf(p.text, t.pos), Expected: exp}
}

func (p *parser) errorAt(t token, msg string) *Error {
	return &Error{Message: msg, Position: positionOf(p.text, t.pos), Expected: p.expected()}
}
