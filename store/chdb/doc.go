// Package chdb is a small cgo binding to chDB's libchdb.so: the real ClickHouse engine running
// inside the flowzero process, with its tables in a local data directory.
//
// The binding is built only with the build tag `chdb` (make fetches the library into
// .cache/chdb, see scripts/chdb.sh and mk/store.mk); without the tag the package offers the same
// API and every call returns ErrNotBuilt, so a pure-Go build of flowzero still works.
//
// Design notes:
//   - The engine is process-wide: one data directory per process. Open on a second directory
//     while a connection is open fails; after every connection is closed another directory
//     may be opened.
//   - A connection runs one statement at a time; Conn serializes its callers with a mutex.
//     Several connections on the same data directory are sessions of the one engine, each
//     with its own settings (Open's args), whose statements run concurrently: a query on one
//     does not wait for an INSERT on another. KILL QUERY ... ASYNC from one stops another's
//     statement (SYNC did not return in chDB 26.7).
//   - A statement that fails after writing rows leaves them in chDB's output buffer, handed
//     out with the next statement's output: Conn drains them after every failure.
//   - chDB's own signal handlers are disabled before the first connection: the Go runtime owns
//     SIGSEGV, SIGPROF, SIGURG and friends.
//   - Statements go to chdb_query_n; INSERT data goes through chDB's streaming insert
//     (chdb_stream_insert/append/done), never inline in a statement: the engine splits
//     statement text into queries and would cut binary data at some newline bytes.
package chdb

import "errors"

// ErrNotBuilt is returned by every function of a binary built without the `chdb` tag.
var ErrNotBuilt = errors.New("chdb: this flowzero binary was built without the embedded ClickHouse engine: " +
	"build one with `make build-chdb` (it fetches libchdb.so and builds with -tags chdb)")

// Error is an error reported by the engine for a statement.
type Error struct {
	Query string // the statement, shortened
	Msg   string // the engine's message (starts with "Code: NNN." for ClickHouse errors)
}

func (e *Error) Error() string { return "chdb: " + e.Msg + " (in " + e.Query + ")" }

// Result is the output of a statement plus the engine's statistics.
type Result struct {
	Data         []byte  // output in the requested format, copied out of the engine
	RowsRead     uint64  // rows in the result set
	RowsWritten  uint64  // rows written, including those written by materialized views
	BytesWritten uint64  // bytes written
	Elapsed      float64 // seconds
}
