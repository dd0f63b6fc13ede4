//go:build linux

package schema

import (
	"syscall"
	"unsafe"
)

// threadCPUTime is the CPU time consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID).
func threadCPUTime() int64 {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
