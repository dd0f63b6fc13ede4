package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "state")
	if err := WriteFile(path, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "first" {
		t.Fatalf("after the first write: %q, %v", b, err)
	}
	// A write that fails half way (a full disk) leaves the old file whole and no temporary
	// file behind.
	broken := errors.New("no space left on device")
	err := Write(path, func(w io.Writer) error {
		w.Write([]byte("sec"))
		return broken
	})
	if !errors.Is(err, broken) {
		t.Fatalf("failed write returned %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "first" {
		t.Errorf("after a failed write: %q, %v, want the old file", b, err)
	}
	if err := WriteFile(path, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "second" {
		t.Errorf("after the second write: %q, %v", b, err)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil || len(entries) != 1 {
		t.Errorf("directory holds %v (%v), want the file alone", entries, err)
	}
}
