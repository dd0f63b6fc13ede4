package rib_test

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"

	"flowzero/internal/testdata"
	"flowzero/rib"
	"flowzero/rib/mrt"
)

// BenchmarkLoadMRT loads the synthetic 4-peer full table (4,248,184 RIB entries) with the
// options of `flowzero rib load` (gc=400: mrt.Options.GCPercent) and with the garbage
// collector's default target (gc=100), and reports the load time (wall, and CPU seconds of
// the whole process: the parser, the decompressing goroutine and the garbage collector, a
// figure that a busy machine inflates less) and the heap in use after GC per route (the table
// is kept alive while measuring).
func BenchmarkLoadMRT(b *testing.B) {
	path := testdata.Path(b, "rib", "synth-rib-fulltable-4peers.mrt.gz")
	for _, gc := range []int{400, 100} {
		b.Run(fmt.Sprintf("gc=%d", gc), func(b *testing.B) {
			var seconds, cpu, perRoute float64
			for b.Loop() {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				r := rib.NewTable(rib.DefaultConfiguration())
				cpu0 := cpuSeconds()
				st, err := mrt.LoadFile(r, path, mrt.Options{GCPercent: gc})
				cpu += cpuSeconds() - cpu0
				if err != nil {
					b.Fatal(err)
				}
				if st.RIBEntries != 4248184 || st.Corrupt != 0 {
					b.Fatalf("loaded %d entries, %d corrupt", st.RIBEntries, st.Corrupt)
				}
				seconds += st.Duration.Seconds()
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				routes := r.Stats().Routes
				perRoute += float64(after.HeapAlloc-before.HeapAlloc) / float64(routes)
				runtime.KeepAlive(r)
			}
			b.ReportMetric(seconds/float64(b.N), "s/load")
			b.ReportMetric(cpu/float64(b.N), "cpu-s/load")
			b.ReportMetric(perRoute/float64(b.N), "bytes/route")
		})
	}
}

// cpuSeconds is the user and system CPU time of the process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
