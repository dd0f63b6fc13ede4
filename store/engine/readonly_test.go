//go:build chdb

package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowzero/internal/testutil"
	"flowzero/store/chdb"
)

// slowQuery runs for a minute unless stopped, one row a second.
const slowQuery = "SELECT sleepEachRow(1) FROM numbers(60) SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = 0"

// running counts the statements of p running in the engine, seen from c.
func running(t *testing.T, c *chdb.Conn, p *ReadOnly) string {
	t.Helper()
	out, err := c.Query("SELECT count() FROM system.processes WHERE startsWith(query, '"+p.tag+"')", "")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestReadOnly runs statements through a ReadOnly of one connection beside a writing
// connection: the output in the format asked, writes refused, answers bounded, a statement
// waiting for the busy connection and one running both stopped by their context (the
// connection then answers cleanly), and Close stopping what runs.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	w, err := chdb.Open(dir, Args()...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Exec("CREATE TABLE t (a UInt64, s String) ENGINE = MergeTree ORDER BY a"); err != nil {
		t.Fatal(err)
	}
	if err := w.Exec("INSERT INTO t SELECT number, toString(number) FROM numbers(3)"); err != nil {
		t.Fatal(err)
	}
	p := NewReadOnly(dir, 1, 4096, Args()...)
	defer p.Close()
	ctx := context.Background()
	for format, want := range map[string]string{
		"":             "0\t0\n1\t1\n2\t2\n",
		"TabSeparated": "0\t0\n1\t1\n2\t2\n",
		"JSONCompact":  `"data": [ ["0", "0"], ["1", "1"], ["2", "2"] ]`,
		"JSONEachRow":  "{\"a\":\"0\",\"s\":\"0\"}\n{\"a\":\"1\",\"s\":\"1\"}\n{\"a\":\"2\",\"s\":\"2\"}\n",
	} {
		out, err := p.Query(ctx, "SELECT a, s FROM t ORDER BY a SETTINGS output_format_json_quote_64bit_integers = 1", format)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		got := string(out)
		if format == "JSONCompact" {
			got = strings.Join(strings.Fields(got), " ")
			want = strings.Join(strings.Fields(want), " ")
		}
		if !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", format, out, want)
		}
	}
	for _, sql := range []string{"INSERT INTO t VALUES (9, 'x')", "DROP TABLE t", "ALTER TABLE t DELETE WHERE 1", "SELECT 1 SETTINGS readonly = 0"} {
		if err := p.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), "Code: 164") {
			t.Errorf("%s: %v, want READONLY (Code: 164)", sql, err)
		}
	}
	if out, err := p.Query(ctx, "SELECT number FROM numbers(100000)", ""); err == nil || !strings.Contains(err.Error(), "Code: 396") {
		t.Errorf("an answer over the bound: %d bytes, %v, want TOO_MANY_ROWS_OR_BYTES (Code: 396)", len(out), err)
	}
	// The connection answers cleanly after the refused statements.
	if out, err := p.Query(ctx, "SELECT count() FROM t", ""); err != nil || string(out) != "3\n" {
		t.Fatalf("count = %q, %v", out, err)
	}

	// A slow statement holds the only connection; another waits for it until its context
	// ends, then the slow one is stopped by its own.
	slowCtx, stopSlow := context.WithCancel(ctx)
	var slowDone atomic.Bool
	slowErr := make(chan error, 1)
	go func() {
		_, err := p.Query(slowCtx, slowQuery, "")
		slowDone.Store(true)
		slowErr <- err
	}()
	testutil.WaitUntil(t, "the slow statement running", func() bool { return running(t, w, p) == "1" })
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := p.Query(waitCtx, "SELECT 1", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a statement waiting for the busy connection: %v, want its context's deadline", err)
	}
	cancel()
	// The writing connection does not wait for the slow statement.
	if _, err := w.Insert("INSERT INTO t", "RowBinary", []byte{5, 0, 0, 0, 0, 0, 0, 0, 1, 'x'}); err != nil {
		t.Fatal(err)
	}
	if slowDone.Load() {
		t.Fatal("the INSERT waited for the read-only statement")
	}
	stopSlow()
	if err := <-slowErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the slow statement: %v, want context.Canceled", err)
	}
	testutil.WaitUntil(t, "the slow statement stopped in the engine", func() bool { return running(t, w, p) == "0" })
	if out, err := p.Query(ctx, "SELECT count() FROM t", ""); err != nil || string(out) != "4\n" {
		t.Errorf("after the stopped statement: %q, %v", out, err)
	}

	// Close stops what runs and refuses what comes.
	go p.Query(ctx, slowQuery, "")
	testutil.WaitUntil(t, "another slow statement running", func() bool { return running(t, w, p) == "1" })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if running(t, w, p) != "0" {
		t.Error("Close left a statement running")
	}
	if _, err := p.Query(ctx, "SELECT 1", ""); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if out, err := w.Query("SELECT count() FROM t", ""); err != nil || string(out) != "4\n" {
		t.Errorf("the writing connection after Close: %q, %v", out, err)
	}
}
