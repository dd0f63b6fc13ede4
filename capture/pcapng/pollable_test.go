//go:build linux

package pcapng

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPollable turns a blocking pipe (as a shell hands one to a command's stdout) into one
// whose writes take deadlines, and leaves a regular file as it is.
func TestPollable(t *testing.T) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "pipe-r"), os.NewFile(uintptr(fds[1]), "pipe-w")
	defer r.Close()
	defer w.Close()
	if w.SetWriteDeadline(time.Time{}) == nil {
		t.Fatal("a blocking pipe takes write deadlines: the test would not test Pollable")
	}
	p := Pollable(w)
	if p == w {
		t.Fatal("Pollable returned the blocking pipe itself")
	}
	defer p.Close()
	if err := p.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatalf("deadline on the pollable pipe: %v", err)
	}
	// Nobody reads: once the pipe is full, the write waits and the deadline ends it.
	if _, err := p.Write(make([]byte, 1<<20)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a full pipe: %v, want the deadline exceeded", err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Pollable(f) != f {
		t.Fatal("a regular file was replaced")
	}
}
