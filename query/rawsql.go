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
// subquery, so that nothing but a SELECT parses, with readonly = 1 (no table functions
// reading files or URLs, no setting changed), the query's time and memory limits and
// MaxRawSQLResult.
func (s *Service) RawSQL(ctx context.Context, req RawSQLRequest) (*RawSQLResult, error) {
	format := req.Format
	if format == "" {
		format = "TabSeparated"
	}
	if !formatName.MatchString(format) {
		return nil, fieldError("format", "%q is not a ClickHouse output format name", format)
	}
	sql, err := readOnlySQL(req.SQL)
	if err != nil {
		return nil, err
	}
	stmt := fmt.Sprintf("SELECT * FROM (\n%s\n)\nSETTINGS readonly = 1, max_execution_time = %d, max_memory_usage = %d, "+
		"max_result_bytes = %d, result_overflow_mode = 'throw'",
		sql, int64(s.cfg.Timeout/time.Second), s.cfg.MaxMemory, MaxRawSQLResult)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout+time.Second)
	defer cancel()
	out, err := s.engine.Query(ctx, stmt, format)
	if err != nil {
		return nil, classify(err)
	}
	return &RawSQLResult{Format: format, Output: string(out)}, nil
}

// readOnlySQL checks that sql is one SELECT statement (WITH ... SELECT included) without
// SETTINGS or FORMAT clauses, and returns it without its trailing semicolon.
func readOnlySQL(sql string) (string, error) {
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
	for i, t := range toks {
		if t.Kind != chsql.TokenWord || i+1 < len(toks) && toks[i+1].Text == "(" { // a function: format(...)
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
	return sql, nil
}
