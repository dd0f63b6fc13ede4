package query

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"flowzero/query/chsql"
)

// MaxRawSQLResult bounds the result of a statement of RawSQL, in bytes (the engine's
// max_result_bytes: past it the statement fails rather than fill the collector's memory).
const MaxRawSQLResult = 64 << 20

// RawSQLRequest is a read-only statement of the user's (`flowzero store query` while the
// collector holds the embedded store), and the output format it wants.
type RawSQLRequest struct {
	SQL string `json:"sql"`
	// Format is a ClickHouse output format (TabSeparated when empty).
	Format string `json:"format"`
}

// RawSQLResult is the statement's output, in the format asked.
type RawSQLResult struct {
	Format string `json:"format"`
	Output string `json:"output"`
}

var formatName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{0,63}$`)

// RawSQL runs one SELECT (or WITH ... SELECT) of the user's. The statement runs inside a
// subquery, so that nothing but a SELECT parses, with the query's time and memory limits and
// MaxRawSQLResult. It may read only the engine's tables: every table it names (after FROM,
// JOIN, a comma of a FROM clause or IN, at any depth) must be listed in system.tables or
// be a WITH name in scope, and the functions reaching outside the database (file, url, s3,
// remote...: the engine's table functions but those of safeTableFunctions, and
// tableNameFunctions) are refused. The embedded engine (clickhouse-local) resolves any
// other name in its default database to the file at that path, even on the store's
// read-only connections (readonly = 2, which a statement cannot change): see
// docs/design/query.md.
func (s *Service) RawSQL(ctx context.Context, req RawSQLRequest) (*RawSQLResult, error) {
	return s.rawSQL(ctx, req, s.cfg.Timeout, "")
}

// rawSQL is RawSQL with a time limit (at most the configuration's) and more settings
// (", name = value..." already quoted) after the limits.
func (s *Service) rawSQL(ctx context.Context, req RawSQLRequest, timeout time.Duration, extra string) (*RawSQLResult, error) {
	format := req.Format
	if format == "" {
		format = "TabSeparated"
	}
	if !formatName.MatchString(format) {
		return nil, fieldError("format", "%q is not a ClickHouse output format name", format)
	}
	funcs, err := s.tableFunctions(ctx)
	if err != nil {
		return nil, err
	}
	tables, err := s.knownTables(ctx)
	if err != nil {
		return nil, err
	}
	sql, err := readOnlySQL(req.SQL, funcs, tables)
	if err != nil {
		return nil, err
	}
	stmt := fmt.Sprintf("SELECT * FROM (\n%s\n)\nSETTINGS max_execution_time = %d, max_memory_usage = %d, "+
		"max_result_bytes = %d, result_overflow_mode = 'throw'%s",
		sql, int64(timeout/time.Second), s.cfg.MaxMemory, MaxRawSQLResult, extra)
	if len(stmt) > MaxStatementBytes {
		return nil, fieldError("sql", "%d bytes with the collector's wrapper, over the engine's %d (max_query_size)", len(stmt), MaxStatementBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	defer cancel()
	out, err := s.engine.Query(ctx, stmt, format)
	if err != nil {
		return nil, classify(err)
	}
	return &RawSQLResult{Format: format, Output: string(out)}, nil
}

// safeTableFunctions are the table functions a statement of RawSQL may call: they read
// nothing outside the database. loop is not one: loop(database, table) resolves a table by
// name, a file path in the embedded engine's default database.
var safeTableFunctions = map[string]bool{"numbers": true, "numbers_mt": true, "zeros": true, "zeros_mt": true,
	"generate_series": true, "generateseries": true, "generaterandom": true, "values": true, "null": true,
	"view": true, "viewifpermitted": true, "merge": true, "dictionary": true, "format": true}

// tableNameFunctions are the functions (lower case) taking a table by its name in a string
// or an identifier argument, which the embedded engine resolves to a file as it does a
// table name: hasColumnInTable infers the file's schema, joinGet opens it. The IN family
// (in, notIn, globalIn, nullIn...) is checked instead: its second argument is a table
// position (inFunctions).
var tableNameFunctions = map[string]bool{"hascolumnintable": true, "joinget": true, "joingetornull": true}

// inFunctions are the function forms of IN: their second argument, like the right side of
// the IN operator, may name a table.
var inFunctions = map[string]bool{"in": true, "notin": true, "globalin": true, "globalnotin": true,
	"nullin": true, "notnullin": true, "globalnullin": true, "globalnotnullin": true,
	"inignoreset": true, "notinignoreset": true, "globalinignoreset": true, "globalnotinignoreset": true,
	"nullinignoreset": true, "notnullinignoreset": true, "globalnullinignoreset": true, "globalnotnullinignoreset": true}

// tableFunctions reads the names of the engine's table functions (lower case), once.
func (s *Service) tableFunctions(ctx context.Context) (map[string]bool, error) {
	s.funcsMu.Lock()
	defer s.funcsMu.Unlock()
	if s.funcs != nil {
		return s.funcs, nil
	}
	res, err := s.run(ctx, "SELECT name FROM system.table_functions", 1, 0)
	if err != nil {
		return nil, err
	}
	funcs := map[string]bool{"file": true} // also a function reading a file
	for _, row := range res.Data {
		funcs[strings.ToLower(cellString(row[0]))] = true
	}
	s.funcs = funcs
	return funcs, nil
}

// tableSet is what a statement of RawSQL may read: the engine's tables, by database and
// name, and those of the current database (what an unqualified name resolves to).
type tableSet struct {
	qualified map[[2]string]bool
	current   map[string]bool
}

// knownTables reads the engine's tables from system.tables, for each statement (tables
// come and go; the list is a few hundred rows). The embedded engine's default database
// lists its own tables only, never the files it resolves names to.
func (s *Service) knownTables(ctx context.Context) (tableSet, error) {
	res, err := s.run(ctx, "SELECT database, name, database = currentDatabase() FROM system.tables", 3, 0)
	if err != nil {
		return tableSet{}, err
	}
	t := tableSet{qualified: map[[2]string]bool{}, current: map[string]bool{}}
	for _, row := range res.Data {
		db, name := cellString(row[0]), cellString(row[1])
		t.qualified[[2]string{db, name}] = true
		if cellString(row[2]) == "1" || row[2] == true {
			t.current[name] = true
		}
	}
	return t, nil
}

// readOnlySQL checks that sql is one SELECT statement (WITH ... SELECT included) without
// SETTINGS or FORMAT clauses, calling none of funcs but the safe table functions, reading
// only tables, subqueries and WITH names, and returns it without its trailing semicolon.
func readOnlySQL(sql string, funcs map[string]bool, tables tableSet) (string, error) {
	sql = strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n")
	if sql == "" {
		return "", fieldError("sql", "empty statement")
	}
	toks, err := chsql.Lex(sql)
	if err != nil {
		return "", fieldError("sql", "%v (one statement, without comments)", err)
	}
	if first := strings.ToUpper(toks[0].Text); toks[0].Kind != chsql.TokenWord || (first != "SELECT" && first != "WITH") {
		return "", fieldError("sql", "only SELECT statements run through the collector, not %s (SHOW and DESCRIBE are SELECTs from system.tables and system.columns)", toks[0].Text)
	}
	c := tableCheck{toks: toks, funcs: funcs, tables: tables, frames: []*sqlFrame{{}}}
	if err := c.run(); err != nil {
		return "", err
	}
	return sql, nil
}

// sqlFrame is what tableCheck knows of one level of parentheses (the statement is the
// first).
type sqlFrame struct {
	// ctes are the WITH names (name AS (SELECT ...)) defined at this level so far.
	ctes map[string]bool
	// defines is the WITH name whose body these parentheses hold: it becomes visible when
	// they close (a body does not see its own name: the engine resolves it as a table).
	defines string
	// call is the lower-case name of the function these parentheses are the arguments of
	// ("" for a subquery or an expression). A function's arguments do not see the WITH
	// names outside them (view(SELECT * FROM x) resolves x as a table).
	call string
	// fromList: in a FROM clause, where a comma starts another table.
	fromList bool
	// operandUsed: the first FROM of extract/trim/substring/overlay, or IN of position,
	// was seen (an operand, not a table).
	operandUsed bool
	// inArgs counts the commas of an IN function's arguments: after the first one, a table
	// may be named.
	inArgs int
	// setOp: after UNION, EXCEPT or INTERSECT, before the next SELECT: a WITH there starts
	// a query that does not see the WITH names before it.
	setOp bool
}

// tableCheck walks a statement's tokens once and refuses anything in a table position
// that is not a table of the engine, a subquery, a table function or a WITH name in scope.
type tableCheck struct {
	toks   []chsql.Token
	funcs  map[string]bool
	tables tableSet
	frames []*sqlFrame
}

// clauseWords end a FROM clause (its commas no longer separate tables).
var clauseWords = map[string]bool{"WHERE": true, "PREWHERE": true, "GROUP": true, "ORDER": true, "LIMIT": true,
	"HAVING": true, "WINDOW": true, "QUALIFY": true, "OFFSET": true, "SELECT": true, "ARRAY": true,
	"UNION": true, "EXCEPT": true, "INTERSECT": true, "WITH": true}

// operandWords are keywords a parenthesis may follow without being a function's arguments.
var operandWords = map[string]bool{"IN": true, "FROM": true, "JOIN": true, "AS": true, "AND": true, "OR": true,
	"NOT": true, "ON": true, "USING": true, "WHERE": true, "PREWHERE": true, "HAVING": true, "SELECT": true,
	"BY": true, "THEN": true, "ELSE": true, "WHEN": true, "CASE": true, "DISTINCT": true, "UNION": true,
	"ALL": true, "EXCEPT": true, "INTERSECT": true, "IS": true, "LIKE": true, "ILIKE": true, "BETWEEN": true,
	"WITH": true, "LIMIT": true, "OFFSET": true, "QUALIFY": true, "INTERVAL": true, "ANY": true, "GLOBAL": true}

func (c *tableCheck) top() *sqlFrame { return c.frames[len(c.frames)-1] }

func (c *tableCheck) word(i int) string {
	if i < 0 || i >= len(c.toks) || c.toks[i].Kind != chsql.TokenWord {
		return ""
	}
	return strings.ToUpper(c.toks[i].Text)
}

func (c *tableCheck) is(i int, text string) bool {
	return i >= 0 && i < len(c.toks) && c.toks[i].Text == text
}

// name returns a word's text or a quoted identifier's name.
func (c *tableCheck) name(i int) string {
	if c.toks[i].Kind == chsql.TokenIdent {
		return c.toks[i].Value
	}
	return c.toks[i].Text
}

func (c *tableCheck) isName(i int) bool {
	return i >= 0 && i < len(c.toks) && (c.toks[i].Kind == chsql.TokenWord || c.toks[i].Kind == chsql.TokenIdent)
}

func (c *tableCheck) run() error {
	for i, t := range c.toks {
		switch t.Text {
		case "(":
			f := &sqlFrame{}
			switch {
			case c.word(i-1) == "IN":
				if !c.inOperator(i - 1) {
					f.call = "in" // in(x, t), not x IN (1, 2)
				}
			case c.isName(i-1) && (c.toks[i-1].Kind == chsql.TokenIdent || !operandWords[c.word(i-1)]):
				f.call = strings.ToLower(c.name(i - 1))
			}
			if c.word(i-1) == "AS" && c.isName(i-2) && (c.word(i+1) == "SELECT" || c.word(i+1) == "WITH") {
				f.defines = c.name(i - 2) // WITH name AS (SELECT ...)
			}
			c.frames = append(c.frames, f)
			continue
		case ")":
			if len(c.frames) == 1 {
				return fieldError("sql", "unbalanced ) at byte %d", t.Offset)
			}
			f := c.top()
			c.frames = c.frames[:len(c.frames)-1]
			if f.defines != "" {
				if p := c.top(); p.ctes == nil {
					p.ctes = map[string]bool{f.defines: true}
				} else {
					p.ctes[f.defines] = true
				}
			}
			continue
		case ",":
			f := c.top()
			if f.fromList {
				if err := c.table(i+1, "a comma of a FROM clause"); err != nil {
					return err
				}
			}
			if inFunctions[f.call] {
				if f.inArgs++; f.inArgs == 1 {
					if err := c.inRight(i + 1); err != nil {
						return err
					}
				}
			}
			continue
		}
		if !c.isName(i) {
			continue
		}
		if c.is(i+1, "(") { // a function: format(...)
			name := strings.ToLower(c.name(i))
			if (c.funcs[name] && !safeTableFunctions[name]) || tableNameFunctions[name] {
				return fieldError("sql", "%s at byte %d: functions reading outside the database are refused here", t.Text, t.Offset)
			}
			continue
		}
		if t.Kind != chsql.TokenWord {
			continue
		}
		f := c.top()
		w := strings.ToUpper(t.Text)
		if clauseWords[w] {
			f.fromList = false
		}
		switch w {
		case "SETTINGS":
			return fieldError("sql", "SETTINGS at byte %d: the collector sets the statement's settings", t.Offset)
		case "FORMAT":
			return fieldError("sql", "FORMAT at byte %d: give the format apart (flowzero store query --format)", t.Offset)
		case "INTO":
			return fieldError("sql", "INTO at byte %d: the statement may not write", t.Offset)
		case "UNION", "INTERSECT":
			f.setOp = true
		case "EXCEPT":
			f.setOp = !c.is(i-1, "*") // SELECT * EXCEPT (column) is not a set operation
		case "SELECT":
			f.setOp = false
		case "WITH":
			if f.setOp {
				f.ctes, f.setOp = nil, false
			}
		case "FROM":
			switch {
			case c.word(i-1) == "FILL": // ORDER BY x WITH FILL FROM expr
			case c.word(i-1) == "DISTINCT" && (c.word(i-2) == "IS" || c.word(i-2) == "NOT"): // IS [NOT] DISTINCT FROM
			case (f.call == "extract" || f.call == "trim" || f.call == "substring" || f.call == "overlay") && !f.operandUsed:
				f.operandUsed = true // extract(DAY FROM t), trim(BOTH ' ' FROM s)
			default:
				f.fromList = true
				if err := c.table(i+1, "FROM"); err != nil {
					return err
				}
			}
		case "JOIN":
			if c.word(i-1) == "ARRAY" { // ARRAY JOIN takes arrays
				f.fromList = false
				continue
			}
			f.fromList = true
			if err := c.table(i+1, "JOIN"); err != nil {
				return err
			}
		case "USING":
			if !c.is(i+1, "(") {
				f.fromList = false // USING a, b: columns
			}
		case "IN":
			if f.call == "position" && !f.operandUsed {
				f.operandUsed = true // position(needle IN haystack)
				continue
			}
			if err := c.inRight(i + 1); err != nil {
				return err
			}
		}
	}
	if depth := len(c.frames) - 1; depth != 0 {
		return fieldError("sql", "%d parentheses left open", depth)
	}
	return nil
}

// inOperator tells whether the IN word at i, followed by a parenthesis, is the operator
// (after an operand) rather than the function in(a, b).
func (c *tableCheck) inOperator(i int) bool {
	if i == 0 {
		return false
	}
	p := c.toks[i-1]
	switch p.Kind {
	case chsql.TokenNumber, chsql.TokenString, chsql.TokenIdent:
		return true
	case chsql.TokenPunct:
		return p.Text == ")" || p.Text == "]"
	}
	return !operandWords[strings.ToUpper(p.Text)]
}

// inRight checks the right side of IN (or the second argument of an IN function), which
// may be a list, a subquery, a literal or a table.
func (c *tableCheck) inRight(i int) error {
	if !c.isName(i) || c.is(i+1, "(") {
		return nil // a literal, a list, a subquery (checked in turn) or a function
	}
	return c.table(i, "IN")
}

// table checks the table position at i (after what).
func (c *tableCheck) table(i int, after string) error {
	if i >= len(c.toks) {
		return nil // the engine refuses the statement
	}
	t := c.toks[i]
	switch {
	case t.Text == "(":
		return nil // a subquery, checked in turn
	case t.Kind == chsql.TokenString:
		return fieldError("sql", "%s at byte %d after %s: a string is read as a file path here; name a table (system.tables)", t.Text, t.Offset, after)
	case !c.isName(i):
		return fieldError("sql", "%s at byte %d after %s: a table, a subquery or a table function is expected", t.Text, t.Offset, after)
	case c.is(i+1, "("):
		return nil // a table function, checked in turn
	}
	if c.is(i+1, ".") {
		if !c.isName(i+2) || c.is(i+3, ".") {
			return fieldError("sql", "%s at byte %d after %s: a table is database.table", t.Text, t.Offset, after)
		}
		if !c.tables.qualified[[2]string{c.name(i), c.name(i + 2)}] {
			return fieldError("sql", "%s.%s at byte %d after %s: no such table in the database (system.tables): only tables, subqueries and WITH names are read here",
				t.Text, c.toks[i+2].Text, t.Offset, after)
		}
		return nil
	}
	name := c.name(i)
	for k := len(c.frames) - 1; k >= 0; k-- {
		f := c.frames[k]
		if f.ctes[name] {
			return nil
		}
		if f.call != "" {
			break // a function's arguments do not see the WITH names outside
		}
	}
	if c.tables.current[name] {
		return nil
	}
	return fieldError("sql", "%s at byte %d after %s: no such table in the current database (system.tables) nor WITH name: only tables, subqueries and WITH names are read here (name tables with their database: flowzero.flows)",
		t.Text, t.Offset, after)
}
