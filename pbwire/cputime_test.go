package pbwire

import (
	"runtime"
	"testing"
)

// The machine is shared and noisy: wall-clock ns/op include the time other processes hold the
// core. Each benchmark also reports the CPU time of its own thread per operation, which only
// counts the time the loop actually ran (wall-clock time where the OS gives no thread clock).

// cpuTimer measures the thread CPU time of a benchmark loop.
type cpuTimer struct{ start int64 }

// startCPU pins the goroutine to its thread and starts measuring.
func startCPU(b *testing.B) cpuTimer {
	b.ReportAllocs()
	runtime.LockOSThread()
	b.ResetTimer()
	return cpuTimer{threadCPUTime()}
}

// stop reports the CPU time per operation as the cpu-ns/op metric.
func (c cpuTimer) stop(b *testing.B) {
	elapsed := threadCPUTime() - c.start
	runtime.UnlockOSThread()
	b.ReportMetric(float64(elapsed)/float64(b.N), "cpu-ns/op")
}
