//go:build chdb

package chdb

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"flowzero/internal/testutil"
)

// One process holds one data directory at a time, so the tests run in order and each closes
// what it opened.

func TestQueryAndErrors(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v := Version(); !strings.HasPrefix(v, "26.") {
		t.Errorf("Version() = %q, want the 26.x library make fetches", v)
	}
	out, err := c.Query("SELECT number, toString(number * 2) FROM numbers(3)", "CSV")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "0,\"0\"\n1,\"2\"\n2,\"4\"\n"; got != want {
		t.Fatalf("CSV = %q, want %q", got, want)
	}
	_, err = c.Query("SELECT nope FROM nowhere", "CSV")
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "Code: 60") || !strings.Contains(e.Msg, "nowhere") {
		t.Fatalf("error for a missing table = %v, want Code 60 (UNKNOWN_TABLE)", err)
	}
	// The connection still works after an error.
	if out, err := c.Query("SELECT 1+1", ""); err != nil || string(out) != "2\n" {
		t.Fatalf("after an error: %q, %v", out, err)
	}
	if _, err := c.Query("", ""); err == nil {
		t.Fatal("an empty statement must be an error")
	}
}

func TestInlineBinaryInsertAndPersistence(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec("CREATE TABLE t (a UInt32, s String) ENGINE = MergeTree ORDER BY a"); err != nil {
		t.Fatal(err)
	}
	data := []byte{7, 0, 0, 0, 3, 'a', 0, '\n', 9, 0, 0, 0, 0}
	res, err := c.Insert("INSERT INTO t", "RowBinary", data)
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsWritten != 2 {
		t.Errorf("RowsWritten = %d, want 2", res.RowsWritten)
	}
	if _, err := Open(t.TempDir()); err == nil {
		t.Fatal("opening a second data directory while one is open must fail")
	}
	c.Close()
	if err := c.Exec("SELECT 1"); err == nil {
		t.Fatal("a closed connection must refuse statements")
	}

	c, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Query("SELECT a, hex(s) FROM t ORDER BY a", "TSV")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "7\t61000A\n9\t\n"; got != want {
		t.Fatalf("after reopening: %q, want %q", got, want)
	}
}

// TestInsertBinaryStream streams RowBinary rows whose bytes hold newlines, NULs and a
// semicolon through Insert, in several chunks that split a row.
func TestInsertBinaryStream(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec("CREATE TABLE b (a UInt32, s String) ENGINE = MergeTree ORDER BY a"); err != nil {
		t.Fatal(err)
	}
	row1 := []byte{0x0a, 0x0a, 0, 0, 4, '\n', '\n', ';', 0}
	row2 := []byte{0x0d, 0x0a, 0, 0, 2, ';', '\n'}
	res, err := c.Insert("INSERT INTO b", "RowBinary", row1[:3], row1[3:], row2)
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsWritten != 2 {
		t.Errorf("RowsWritten = %d", res.RowsWritten)
	}
	out, err := c.Query("SELECT a, hex(s) FROM b ORDER BY a", "TSV")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "2570\t0A0A3B00\n2573\t3B0A\n"; got != want {
		t.Errorf("read back %q, want %q", got, want)
	}
	// A malformed stream is an error, and the connection still works.
	if _, err := c.Insert("INSERT INTO b", "RowBinary", []byte{1, 2}); err == nil {
		t.Error("a truncated row must be an error")
	}
	if _, err := c.Insert("INSERT INTO nowhere", "RowBinary", row2); err == nil {
		t.Error("an unknown table must be an error")
	}
	if out, err := c.Query("SELECT count() FROM b", ""); err != nil || string(out) != "2\n" {
		t.Errorf("after errors: %q, %v", out, err)
	}
}

// TestQueryErrorLeavesNoOutput makes a statement fail after it wrote rows: the next
// statement's output holds only its own rows (chDB keeps the failed one's otherwise).
func TestQueryErrorLeavesNoOutput(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, format := range []string{"TabSeparated", "JSON"} {
		if _, err := c.Query("SELECT throwIf(number = 5) FROM numbers(10) SETTINGS max_block_size = 1", format); err == nil {
			t.Fatal("throwIf did not fail")
		}
		if out, err := c.Query("SELECT 1", "TabSeparated"); err != nil || string(out) != "1\n" {
			t.Errorf("after a failure in %s: %q, %v", format, out, err)
		}
	}
}

// TestConnectionsRunConcurrently opens a second connection on the same data directory: it
// is a session of the same engine (it sees the first one's tables), its statements do not
// wait for the first connection's (a statement sleeping on one, an INSERT completes on the
// other), and closing it leaves the first one working.
func TestConnectionsRunConcurrently(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dir, "--readonly=2")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Exec("CREATE TABLE t (a UInt64) ENGINE = MergeTree ORDER BY a"); err != nil {
		t.Fatal(err)
	}
	if err := b.Exec("INSERT INTO t VALUES (1)"); err == nil || !strings.Contains(err.Error(), "Code: 164") {
		t.Errorf("INSERT on a readonly connection: %v, want READONLY (Code: 164)", err)
	}
	var done atomic.Bool
	slow := make(chan error)
	go func() {
		// Up to a minute, stopped by KILL QUERY once the INSERT is through.
		_, err := b.Query("/* slow */ SELECT sleepEachRow(1) FROM numbers(60) SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = 0", "")
		done.Store(true)
		slow <- err
	}()
	testutil.WaitUntil(t, "the slow statement in system.processes", func() bool {
		out, err := a.Query("SELECT count() FROM system.processes WHERE startsWith(query, '/* slow */')", "")
		return err == nil && string(out) == "1\n"
	})
	if _, err := a.Insert("INSERT INTO t", "RowBinary", []byte{7, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if done.Load() {
		t.Fatal("the INSERT waited for the other connection's statement")
	}
	if out, err := a.Query("SELECT sum(a) FROM t", ""); err != nil || string(out) != "7\n" {
		t.Errorf("sum = %q, %v", out, err)
	}
	if err := a.Exec("KILL QUERY WHERE startsWith(query, '/* slow */') ASYNC"); err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err == nil || !strings.Contains(err.Error(), "Code: 394") {
		t.Errorf("killed statement: %v, want QUERY_WAS_CANCELLED (Code: 394)", err)
	}
	if out, err := b.Query("SELECT count() FROM t", ""); err != nil || string(out) != "1\n" {
		t.Errorf("after the kill, on the killed statement's connection: %q, %v", out, err)
	}
	b.Close()
	if out, err := a.Query("SELECT count() FROM t", ""); err != nil || string(out) != "1\n" {
		t.Errorf("after closing the other connection: %q, %v", out, err)
	}
}

// TestSecondProcessRefused: a second process opening a data directory this one holds is
// refused with an error saying why (chDB locks the directory's status file), rather than two
// engines writing the same parts. The test runs itself as the second process.
func TestSecondProcessRefused(t *testing.T) {
	if dir := os.Getenv("FLOWZERO_CHDB_SECOND_PROCESS_DIR"); dir != "" {
		c, err := Open(dir)
		if err != nil {
			fmt.Println("second process:", err)
			os.Exit(3)
		}
		c.Exec("INSERT INTO t VALUES (2)")
		c.Close()
		os.Exit(0)
	}
	dir := t.TempDir()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec("CREATE TABLE t (x UInt8) ENGINE = MergeTree ORDER BY x"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSecondProcessRefused$")
	cmd.Env = append(os.Environ(), "FLOWZERO_CHDB_SECOND_PROCESS_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(string(out), "in use by another process") {
		t.Errorf("second process on the same directory: %v, want it refused (exit 3) saying why:\n%s", err, out)
	}
}
