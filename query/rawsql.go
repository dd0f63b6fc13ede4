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
// MaxRawSQLResult; the functions reaching outside the database (file, url, s3, remote...:
// the engine's table functions but those of safeTableFunctions) are refused. readonly = 1
// would refuse them too, but the store's read-only connections run with readonly = 2,
// which a statement cannot change.
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
	sql, err := readOnlySQL(req.SQL, funcs)
	if err != nil {
		return nil, err
	}
	stmt := fmt.Sprintf("SELECT * FROM (\n%s\n)\nSETTINGS max_execution_time = %d, max_memory_usage = %d, "+
		"max_result_bytes = %d, result_overflow_mode = 'throw'%s",
		sql, int64(timeout/time.Second), s.cfg.MaxMemory, MaxRawSQLResult, extra)
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	defer cancel()
	out, err := s.engine.Query(ctx, stmt, format)
	if err != nil {
		return nil, classify(err)
	}
	return &RawSQLResult{Format: format, Output: string(out)}, nil
}

// safeTableFunctions are the table functions a statement of RawSQL may call: they read
// nothing outside the database.
var safeTableFunctions = map[string]bool{"numbers": true, "numbers_mt": true, "zeros": true, "zeros_mt": true,
	"generate_series": true, "generateseries": true, "generaterandom": true, "values": true, "null": true,
	"view": true, "viewifpermitted": true, "merge": true, "dictionary": true, "format": true, "loop": true}

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

// readOnlySQL checks that sql is one SELECT statement (WITH ... SELECT included) without
// SETTINGS or FORMAT clauses, calling none of funcs but the safe table functions, and
// returns it without its trailing semicolon.
func readOnlySQL(sql string, funcs map[string]bool) (string, error) {
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
	depth := 0
	for i, t := range toks {
		switch t.Text {
		case "(":
			depth++
		case ")":
			if depth--; depth < 0 {
				return "", fieldError("sql", "unbalanced ) at byte %d", t.Offset)
			}
		}
		if t.Kind != chsql.TokenWord && t.Kind != chsql.TokenIdent {
			continue
		}
		if i+1 < len(toks) && toks[i+1].Text == "(" { // a function: format(...)
			name := strings.ToLower(t.Text)
			if t.Kind == chsql.TokenIdent {
				name = strings.ToLower(t.Value)
			}
			if funcs[name] && !safeTableFunctions[name] {
				return "", fieldError("sql", "%s at byte %d: functions reading outside the database are refused here", t.Text, t.Offset)
			}
			continue
		}
		if t.Kind != chsql.TokenWord {
			continue
		}
		switch strings.ToUpper(t.Text) {
		case "SETTINGS":
			return "", fieldError("sql", "SETTINGS at byte %d: the collector sets the statement's settings", t.Offset)
		case "FORMAT":
			return "", fieldError("sql", "FORMAT at byte %d: give the format apart (flowzero store query --format)", t.Offset)
		case "INTO":
			return "", fieldError("sql", "INTO at byte %d: the statement may not write", t.Offset)
		}
	}
	if depth != 0 {
		return "", fieldError("sql", "%d parentheses left open", depth)
	}
	return sql, nil
}
