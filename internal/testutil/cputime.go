package testutil

import (
	"runtime"
	"testing"
)

// CPUTimer measures the CPU time of a benchmark loop's own thread. The machines are shared and
// noisy: wall-clock ns/op include the time other processes hold the core, the thread's CPU
// time only the time the loop ran.
type CPUTimer struct{ start int64 }

// StartCPU reports allocations, pins the goroutine to its thread, resets the benchmark timer
// and starts measuring.
func StartCPU(b *testing.B) CPUTimer {
	b.ReportAllocs()
	runtime.LockOSThread()
	b.ResetTimer()
	return CPUTimer{ThreadCPUTime()}
}

// Stop reports the CPU time per operation as the cpu-ns/op metric.
func (c CPUTimer) Stop(b *testing.B) {
	elapsed := ThreadCPUTime() - c.start
	runtime.UnlockOSThread()
	b.ReportMetric(float64(elapsed)/float64(b.N), "cpu-ns/op")
}
