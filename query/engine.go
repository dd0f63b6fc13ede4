package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Engine runs one SELECT and returns its output in format. The statement also carries its own
// SETTINGS and FORMAT clauses (JSONCompact): the store's executors (engine.Embedded,
// engine.HTTPClient and the running sink's (*store.Sink).Engine()) are Engines as they are.
type Engine interface {
	Query(ctx context.Context, sql, format string) ([]byte, error)
}

// Kinds of EngineError.
const (
	EngineFailed  = "failed"  // the engine refused or failed the query
	EngineTimeout = "timeout" // the query ran past its time (Configuration.Timeout)
	EngineMemory  = "memory"  // the query needed more memory than Configuration.MaxMemory
)

// EngineError is a query the engine did not answer.
type EngineError struct {
	Kind string
	Err  error
}

func (e *EngineError) Error() string {
	switch e.Kind {
	case EngineTimeout:
		return "the query took longer than allowed: narrow the time range or the filter (" + e.Err.Error() + ")"
	case EngineMemory:
		return "the query needs more memory than allowed: narrow the time range, the dimensions or the filter (" + e.Err.Error() + ")"
	}
	return "the query failed: " + e.Err.Error()
}

func (e *EngineError) Unwrap() error { return e.Err }

// classify wraps an engine's error into an *EngineError telling what happened, from the
// ClickHouse error name its messages carry.
func classify(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "TIMEOUT_EXCEEDED") || strings.Contains(msg, "Code: 159"):
		return &EngineError{Kind: EngineTimeout, Err: err}
	case strings.Contains(msg, "MEMORY_LIMIT_EXCEEDED") || strings.Contains(msg, "Code: 241"):
		return &EngineError{Kind: EngineMemory, Err: err}
	}
	return &EngineError{Kind: EngineFailed, Err: err}
}

// result is a parsed JSONCompact answer: the columns' names and types, and the rows.
type result struct {
	Meta []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"meta"`
	// Data holds each row's values: json.Number, string, nil, []any.
	Data [][]any `json:"data"`
}

// parseResult parses the engine's JSONCompact output, which must have at least cols
// columns.
func parseResult(out []byte, cols int) (*result, error) {
	var r result
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return nil, &EngineError{Kind: EngineFailed, Err: fmt.Errorf("reading the engine's answer: %w", err)}
	}
	if len(r.Meta) < cols {
		return nil, &EngineError{Kind: EngineFailed, Err: fmt.Errorf("the answer has %d columns, not %d", len(r.Meta), cols)}
	}
	for i, row := range r.Data {
		if len(row) != len(r.Meta) {
			return nil, &EngineError{Kind: EngineFailed, Err: fmt.Errorf("row %d has %d values for %d columns", i, len(row), len(r.Meta))}
		}
	}
	return &r, nil
}

// The values of a row, read leniently: a null or a value of another type reads as zero.

func cellUint(v any) uint64 {
	switch v := v.(type) {
	case json.Number:
		if n, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return n
		}
		if f, err := v.Float64(); err == nil && f > 0 {
			return uint64(f)
		}
	case string:
		n, _ := strconv.ParseUint(v, 10, 64)
		return n
	}
	return 0
}

func cellInt(v any) int64 {
	switch v := v.(type) {
	case json.Number:
		n, _ := v.Int64()
		return n
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

func cellFloat(v any) float64 {
	switch v := v.(type) {
	case json.Number:
		f, _ := v.Float64()
		return f
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return 0
}

func cellString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return string(v)
	}
	return ""
}

func cellStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = cellString(x)
	}
	return out
}
