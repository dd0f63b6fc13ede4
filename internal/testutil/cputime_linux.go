package testutil

import (
	"syscall"
	"unsafe"
)

const clockThreadCPUTime = 3

// ThreadCPUTime is the CPU time of the calling thread in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
func ThreadCPUTime() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
