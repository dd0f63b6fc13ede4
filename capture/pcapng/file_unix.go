//go:build unix

package pcapng

import (
	"os"
	"syscall"
	"time"
)

// SetBlocking clears O_NONBLOCK on f's descriptor.
func SetBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}

// Pollable returns f when Go's poller already waits on it. For a pipe or FIFO opened blocking
// (stdout of "flowzero capture server -w - | tshark -r -"), it returns a duplicate of the
// descriptor in non-blocking mode, which the poller then waits on: its writes take deadlines,
// so Stop can cut a write to a stalled reader short, as for a FIFO output. O_NONBLOCK is
// shared by every descriptor of the pipe's end, so f's own writes can then fail with EAGAIN
// on a full pipe: the server is the only writer of its output. Anything else comes back as is.
func Pollable(f *os.File) *os.File {
	if f.SetWriteDeadline(time.Time{}) == nil {
		return f
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return f
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	dup := -1
	_ = rc.Control(func(fd uintptr) {
		d, err := syscall.Dup(int(fd))
		if err != nil {
			return
		}
		if syscall.SetNonblock(d, true) != nil {
			_ = syscall.Close(d)
			return
		}
		dup = d
	})
	if dup < 0 {
		return f
	}
	// A duplicate, not f's descriptor: the new *os.File closes it when collected.
	return os.NewFile(uintptr(dup), f.Name())
}
