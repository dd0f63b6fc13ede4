package protozero

import (
	"syscall"
	"unsafe"
)

const clockThreadCPUTime = 3

// threadCPUTime is the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
func threadCPUTime() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
