package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on amd64 and arm64 (with 4 KiB pages).
const hugePage = 2 << 20

// alloc maps size bytes, aligned on a huge page so that every huge page of the range can be
// one, and asks for huge pages. It returns the aligned range and the whole mapping, nil when
// the mapping fails (the caller then uses the heap).
func alloc(size int) (b, m []byte) {
	if size < hugePage {
		return nil, nil
	}
	m, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil
	}
	off := 0
	if r := uintptr(unsafe.Pointer(unsafe.SliceData(m))) % hugePage; r != 0 {
		off = int(hugePage - r)
	}
	b = m[off : off+size : off+size]
	// Without transparent huge pages (or where madvise refuses), the array works on small
	// pages.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	mapped.Add(int64(len(m)))
	return b, m
}

func release(m []byte) {
	if unix.Munmap(m) == nil {
		mapped.Add(-int64(len(m)))
	}
}
