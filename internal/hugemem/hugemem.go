// Package hugemem allocates large arrays that hold no pointers outside the Go heap, with an
// anonymous mapping the kernel is asked to back with transparent huge pages
// (madvise(MADV_HUGEPAGE): this is what makes them huge when the system's setting is
// "madvise", the usual default; the Go runtime does not ask for them). A lookup array of
// 64 MiB on 4 KiB pages costs a TLB miss, hence a page walk that may miss the caches too,
// for nearly every cold entry; on 2 MiB pages its 32 pages stay in the TLB.
//
// The mapping is released when the object that owns it is collected (runtime.AddCleanup):
// the owner must stay reachable while the array is read (runtime.KeepAlive(owner) after the
// last read, in a function that reads the array through the owner). Where mmap fails, or on
// systems without it, the array comes from the Go heap.
package hugemem

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// mapped is the number of bytes currently mapped by this package, for tests and metrics.
var mapped atomic.Int64

// Mapped returns the number of bytes of the mappings not yet released.
func Mapped() int64 { return mapped.Load() }

// Uint32s returns a zeroed array of n uint32, released when owner is collected.
func Uint32s[T any](owner *T, n int) []uint32 {
	b, m := alloc(n * 4)
	if b == nil {
		return make([]uint32, n)
	}
	runtime.AddCleanup(owner, release, m)
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
