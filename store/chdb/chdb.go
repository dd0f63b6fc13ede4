//go:build chdb

package chdb

/*
#cgo LDFLAGS: -L${SRCDIR}/../../.cache/chdb -Wl,-rpath,${SRCDIR}/../../.cache/chdb -lchdb
#include <stdint.h>
#include <stdlib.h>

// The npm package ships no header: these are the declarations of chDB's stable C API
// (programs/local/chdb.h, v26.x) that the binding uses.
typedef struct chdb_result_ { void * internal_data; } chdb_result;
typedef struct chdb_connection_ { void * internal_data; } * chdb_connection;
chdb_connection * chdb_connect(int argc, char ** argv);
void chdb_close_conn(chdb_connection * conn);
chdb_result * chdb_query_n(chdb_connection conn, const char * query, size_t query_len, const char * format, size_t format_len);
void chdb_destroy_query_result(chdb_result * result);
char * chdb_result_buffer(chdb_result * result);
size_t chdb_result_length(chdb_result * result);
double chdb_result_elapsed(chdb_result * result);
uint64_t chdb_result_rows_read(chdb_result * result);
uint64_t chdb_result_rows_written(chdb_result * result);
uint64_t chdb_result_bytes_written(chdb_result * result);
const char * chdb_result_error(chdb_result * result);
const char * chdb_version(void);
typedef struct chdb_insert_stream_ { void * internal_data; } * chdb_insert_stream;
chdb_insert_stream chdb_stream_insert_n(chdb_connection conn, const char * query, size_t query_len, const char * format, size_t format_len);
int chdb_stream_append(chdb_insert_stream stream, const void * data, size_t len);
chdb_result * chdb_stream_done(chdb_insert_stream stream);
void chdb_stream_cancel_insert(chdb_insert_stream stream);
const char * chdb_stream_insert_error(chdb_insert_stream stream);
void chdb_destroy_insert_stream(chdb_insert_stream stream);
void chdb_set_signal_handlers_enabled(int enabled);
*/
import "C"

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// Built reports whether this binary carries the chDB engine.
const Built = true

// engine tracks the process-wide data directory.
var engine struct {
	sync.Mutex
	path  string
	conns int
	init  bool
}

// Conn is a connection to the embedded engine.
type Conn struct {
	mu     sync.Mutex
	c      *C.chdb_connection
	path   string
	closed bool
}

// Version returns the version of the linked library.
func Version() string { return C.GoString(C.chdb_version()) }

// Open connects to the engine with its data in path (created if missing; "" or ":memory:"
// keeps everything in memory). args are extra chDB arguments, for example "--max_threads=2"
// (query-level settings apply to this connection only).
func Open(path string, args ...string) (*Conn, error) {
	if path == "" {
		path = ":memory:"
	} else if path != ":memory:" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("chdb: %w", err)
		}
		path = abs
	}
	engine.Lock()
	defer engine.Unlock()
	if engine.conns > 0 && engine.path != path {
		return nil, fmt.Errorf("chdb: cannot open %q: the engine is already open on %q (one data directory per process)", path, engine.path)
	}
	if !engine.init {
		C.chdb_set_signal_handlers_enabled(0)
		engine.init = true
	}
	argv := append([]string{"flowzero"}, args...)
	if path != ":memory:" {
		argv = append(argv, "--path="+path)
	}
	cargs := make([]*C.char, len(argv))
	for i, a := range argv {
		cargs[i] = C.CString(a)
	}
	defer func() {
		for _, p := range cargs {
			C.free(unsafe.Pointer(p))
		}
	}()
	// argv must live in C memory: chDB may keep pointers while it boots.
	cargv := (**C.char)(C.malloc(C.size_t(len(cargs)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(cargv))
	copy(unsafe.Slice(cargv, len(cargs)), cargs)
	c := C.chdb_connect(C.int(len(cargs)), cargv)
	if c == nil || *c == nil {
		return nil, fmt.Errorf("chdb: cannot connect to %q (bad argument, or the directory is in use by another process)", path)
	}
	engine.path = path
	engine.conns++
	return &Conn{c: c, path: path}, nil
}

// Path returns the data directory of the connection (":memory:" for none).
func (c *Conn) Path() string { return c.path }

// Query runs one statement and returns its output in format (for example "TabSeparated",
// "JSONEachRow", "Protobuf"; "" means TabSeparated). The statement may carry binary input data
// after its FORMAT clause.
func (c *Conn) Query(sql, format string) ([]byte, error) {
	r, err := c.QueryResult(sql, format)
	if err != nil {
		return nil, err
	}
	return r.Data, nil
}

// Exec runs a statement whose output is not needed.
func (c *Conn) Exec(sql string) error {
	_, err := c.QueryResult(sql, "TabSeparated")
	return err
}

// QueryResult is Query with the engine's statistics.
func (c *Conn) QueryResult(sql, format string) (Result, error) {
	return c.query(unsafe.StringData(sql), len(sql), format)
}

// QueryBytes is QueryResult for a statement held in a byte slice, handed to the engine
// without a copy. For INSERT data in a binary format use Insert.
func (c *Conn) QueryBytes(stmt []byte, format string) (Result, error) {
	return c.query(unsafe.SliceData(stmt), len(stmt), format)
}

func (c *Conn) query(p *byte, n int, format string) (Result, error) {
	if format == "" {
		format = "TabSeparated"
	}
	if n == 0 {
		return Result{}, errors.New("chdb: empty statement")
	}
	sql := unsafe.String(p, min(n, 256)) // for error messages only
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return Result{}, errors.New("chdb: connection closed")
	}
	f := unsafe.Pointer(unsafe.StringData(format))
	// Go memory is only borrowed for the duration of the call.
	r := C.chdb_query_n(*c.c, (*C.char)(unsafe.Pointer(p)), C.size_t(n), (*C.char)(f), C.size_t(len(format)))
	if r == nil {
		return Result{}, &Error{Query: shorten(strings.Clone(sql)), Msg: "no result"}
	}
	defer C.chdb_destroy_query_result(r)
	if e := C.chdb_result_error(r); e != nil {
		err := &Error{Query: shorten(strings.Clone(sql)), Msg: C.GoString(e)}
		c.drain()
		return Result{}, err
	}
	res := Result{
		RowsRead:     uint64(C.chdb_result_rows_read(r)),
		RowsWritten:  uint64(C.chdb_result_rows_written(r)),
		BytesWritten: uint64(C.chdb_result_bytes_written(r)),
		Elapsed:      float64(C.chdb_result_elapsed(r)),
	}
	if n := C.chdb_result_length(r); n > 0 {
		res.Data = C.GoBytes(unsafe.Pointer(C.chdb_result_buffer(r)), C.int(n))
	}
	return res, nil
}

// drainStatement has no output: run after a failed statement, its result takes the output
// the failed one left (see drain).
const drainStatement = "SELECT 1 FORMAT Null"

// drain discards the output a statement that failed midway left in the connection: chDB
// (26.7) keeps the rows written before the error and hands them out with the next
// statement's output. Called with c.mu held.
func (c *Conn) drain() {
	q, f := unsafe.StringData(drainStatement), unsafe.StringData("TabSeparated")
	if r := C.chdb_query_n(*c.c, (*C.char)(unsafe.Pointer(q)), C.size_t(len(drainStatement)),
		(*C.char)(unsafe.Pointer(f)), C.size_t(len("TabSeparated"))); r != nil {
		C.chdb_destroy_query_result(r)
	}
}

// Insert runs an INSERT statement without FORMAT clause (for example
// "INSERT INTO t SETTINGS format_schema = 'f.proto:M'") and streams chunks to it as input in
// format, through chDB's streaming insert: the data never goes through the SQL parser, so any
// byte may appear in it. (Data inline in a statement given to Query is cut by the engine's
// multi-statement splitting at some newlines: binary formats must come through here.)
func (c *Conn) Insert(query, format string, chunks ...[]byte) (Result, error) {
	if query == "" || format == "" {
		return Result{}, errors.New("chdb: Insert needs a statement and a format")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return Result{}, errors.New("chdb: connection closed")
	}
	q := unsafe.Pointer(unsafe.StringData(query))
	f := unsafe.Pointer(unsafe.StringData(format))
	st := C.chdb_stream_insert_n(*c.c, (*C.char)(q), C.size_t(len(query)), (*C.char)(f), C.size_t(len(format)))
	if st == nil {
		return Result{}, &Error{Query: shorten(query), Msg: "no insert stream"}
	}
	defer C.chdb_destroy_insert_stream(st)
	if e := C.chdb_stream_insert_error(st); e != nil {
		return Result{}, &Error{Query: shorten(query), Msg: C.GoString(e)}
	}
	for _, chunk := range chunks {
		if len(chunk) == 0 {
			continue
		}
		// The engine copies the chunk before returning.
		if C.chdb_stream_append(st, unsafe.Pointer(unsafe.SliceData(chunk)), C.size_t(len(chunk))) != 0 {
			msg := "append failed"
			if e := C.chdb_stream_insert_error(st); e != nil {
				msg = C.GoString(e)
			}
			C.chdb_stream_cancel_insert(st)
			return Result{}, &Error{Query: shorten(query), Msg: msg}
		}
	}
	r := C.chdb_stream_done(st)
	if r == nil {
		return Result{}, &Error{Query: shorten(query), Msg: "no result"}
	}
	defer C.chdb_destroy_query_result(r)
	if e := C.chdb_result_error(r); e != nil {
		return Result{}, &Error{Query: shorten(query), Msg: C.GoString(e)}
	}
	return Result{
		RowsWritten:  uint64(C.chdb_result_rows_written(r)),
		BytesWritten: uint64(C.chdb_result_bytes_written(r)),
		Elapsed:      float64(C.chdb_result_elapsed(r)),
	}, nil
}

// Close closes the connection. The engine keeps running for the process's other connections;
// when the last one closes, another data directory may be opened.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	C.chdb_close_conn(c.c)
	engine.Lock()
	engine.conns--
	engine.Unlock()
	return nil
}

// shorten cuts a statement for error messages: its inline data (after FORMAT) and what is
// past 200 bytes.
func shorten(q string) string {
	const max = 200
	if i := strings.Index(q, "FORMAT "); i >= 0 {
		// Cut inline data off: an INSERT's rows are binary.
		if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
			q = q[:i+j]
		}
	}
	if len(q) > max {
		return q[:max] + "…"
	}
	return q
}
