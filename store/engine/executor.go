package engine

import (
	"context"
	"errors"
	"strings"

	"flowzero/store/chdb"
)

// Executor runs statements on ClickHouse. Query returns the statement's output in format
// (a ClickHouse output format such as TabSeparated, JSON or JSONCompact; "" is TabSeparated)
// unless the statement says FORMAT itself.
type Executor interface {
	Exec(ctx context.Context, sql string) error
	Query(ctx context.Context, sql, format string) ([]byte, error)
}

// Args are the settings every connection to the embedded engine needs: the schema may use
// LowCardinality(IPv6) for addresses with few values (exporters, next hops), which ClickHouse
// only creates when asked (HTTPClient.Exec asks too).
func Args() []string {
	return []string{"--allow_suspicious_low_cardinality_types=1"}
}

// Embedded runs statements in the in-process engine, one at a time per connection.
// Statements cannot be cancelled there: ctx is only checked before each one.
type Embedded struct {
	Conn *chdb.Conn
}

// Exec runs a statement.
func (e Embedded) Exec(ctx context.Context, sql string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.Conn.Exec(sql)
}

// Query runs a statement and returns its output in format.
func (e Embedded) Query(ctx context.Context, sql, format string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.Conn.Query(sql, format)
}

// QueryRows runs a query and splits its TabSeparated output into rows of fields. Values are
// unescaped for the characters DDL names and comments can hold.
func QueryRows(ctx context.Context, e Executor, sql string) ([][]string, error) {
	out, err := e.Query(ctx, sql, "TabSeparated")
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Split(line, "\t")
		for i, f := range fields {
			fields[i] = unescapeTSV(f)
		}
		rows = append(rows, fields)
	}
	return rows, nil
}

var tsvUnescaper = strings.NewReplacer(`\\`, `\`, `\t`, "\t", `\n`, "\n", `\'`, "'", `\0`, "\x00")

func unescapeTSV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return tsvUnescaper.Replace(s)
}

// EmptyEngine stands for a ClickHouse that holds nothing yet, such as an embedded data
// directory not created: its system tables are empty, so a migration's plan against it creates
// every object. It runs no statement.
type EmptyEngine struct{}

// Exec refuses: there is no engine to run statements in.
func (EmptyEngine) Exec(context.Context, string) error {
	return errors.New("store: no engine to run statements in (EmptyEngine)")
}

// Query returns no rows.
func (EmptyEngine) Query(context.Context, string, string) ([]byte, error) { return nil, nil }
