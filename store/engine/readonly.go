package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"flowzero/store/chdb"
)

// ReadOnly runs read-only statements on the embedded engine over connections of its own, at
// most size at a time (a statement beyond waits for one, or for its context), opened when
// first needed on the data directory the engine holds. Each connection is a session of the
// engine with readonly = 2 (settings may change, data and tables not) and max_result_bytes
// bounding an answer, so that queries from other components (the query API) run beside the
// sink's inserts without waiting for them and without changing what they store. A
// statement whose context ends is stopped (KILL QUERY) and returns the context's error. It
// is safe for concurrent use.
type ReadOnly struct {
	path string
	args []string
	// tokens holds one token per connection that may be in use.
	tokens chan struct{}
	// tag starts every statement, with its number: how KILL QUERY finds it.
	tag string
	seq atomic.Uint64

	mu      sync.Mutex
	idle    []*chdb.Conn
	control *chdb.Conn // runs KILL QUERY, opened with the first
	closed  bool
	running sync.WaitGroup
}

// ErrClosed is returned by a ReadOnly closed (its sink stopped).
var ErrClosed = errors.New("store: the embedded engine is closed")

// readOnlyPools numbers the ReadOnly of the process, for their statements' tags.
var readOnlyPools atomic.Uint64

// NewReadOnly returns the read-only statements of the embedded engine holding path, over up
// to size connections opened with args (Args and the connection settings of the caller, such
// as --max_threads) and answers bounded to maxResultBytes. Nothing is opened before the
// first statement.
func NewReadOnly(path string, size int, maxResultBytes int64, args ...string) *ReadOnly {
	size = max(size, 1)
	args = append(args[:len(args):len(args)], "--readonly=2",
		"--max_result_bytes="+strconv.FormatInt(maxResultBytes, 10), "--result_overflow_mode=throw")
	return &ReadOnly{
		path:   path,
		args:   args,
		tokens: make(chan struct{}, size),
		tag:    fmt.Sprintf("/* flowzero read-only %d ", readOnlyPools.Add(1)),
	}
}

// Exec runs a statement and discards its output.
func (p *ReadOnly) Exec(ctx context.Context, sql string) error {
	_, err := p.Query(ctx, sql, "TabSeparated")
	return err
}

// Query runs a statement and returns its output in format ("" is TabSeparated) unless the
// statement says FORMAT. A statement that writes is refused by the engine (Code: 164,
// READONLY); an answer larger than the bound fails (Code: 396, TOO_MANY_ROWS_OR_BYTES).
func (p *ReadOnly) Query(ctx context.Context, sql, format string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case p.tokens <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	conn, err := p.take()
	if err != nil {
		<-p.tokens
		return nil, err
	}
	// The statement runs in its own goroutine so that Query returns when ctx ends; the
	// connection and the token go back when the engine is done with it.
	tag := p.tag + strconv.FormatUint(p.seq.Add(1), 10) + " */ "
	type answer struct {
		out []byte
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer p.running.Done()
		out, err := conn.Query(tag+sql, format)
		p.put(conn)
		<-p.tokens
		done <- answer{out, err}
	}()
	select {
	case a := <-done:
		return a.out, a.err
	case <-ctx.Done():
		p.kill("startsWith(query, '" + tag + "')")
		return nil, ctx.Err()
	}
}

// take returns an idle connection, or a new one; the caller holds a token and, when take
// succeeds, a count in running.
func (p *ReadOnly) take() (*chdb.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.running.Add(1)
		return c, nil
	}
	if p.control == nil {
		c, err := chdb.Open(p.path, p.args...)
		if err != nil {
			return nil, fmt.Errorf("store: read-only connection: %w", err)
		}
		p.control = c
	}
	c, err := chdb.Open(p.path, p.args...)
	if err != nil {
		return nil, fmt.Errorf("store: read-only connection: %w", err)
	}
	p.running.Add(1)
	return c, nil
}

// put gives a connection back, or closes it once the pool is closed.
func (p *ReadOnly) put(c *chdb.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return
	}
	p.idle = append(p.idle, c)
}

// kill stops the statements matching where (an expression on system.processes), without
// waiting for them to stop.
func (p *ReadOnly) kill(where string) {
	p.mu.Lock()
	c := p.control
	p.mu.Unlock()
	if c != nil {
		// Best effort: a statement not stopped still ends, and its connection goes back.
		_ = c.Exec("KILL QUERY WHERE " + where + " ASYNC")
	}
}

// Close stops the statements running, waits for them to end and closes the connections;
// later statements return ErrClosed. The engine's data directory stays open as long as
// another connection holds it (the sink's).
func (p *ReadOnly) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	p.kill("startsWith(query, '" + p.tag + "')")
	p.running.Wait()
	for _, c := range idle {
		c.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.control != nil {
		p.control.Close()
		p.control = nil
	}
	return nil
}
