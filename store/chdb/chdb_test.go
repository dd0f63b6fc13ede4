//go:build chdb

package chdb

import (
	"errors"
	"strings"
	"testing"
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
