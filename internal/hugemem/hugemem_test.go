package hugemem

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"flowzero/internal/testutil"
)

type owner struct{ a []uint32 }

// TestUint32sReleased checks that the array is zeroed, usable, mapped on huge pages where
// the system gives them, and unmapped once its owner is collected.
func TestUint32sReleased(t *testing.T) {
	before := Mapped()
	o := &owner{}
	o.a = Uint32s(o, 1<<24)
	if len(o.a) != 1<<24 {
		t.Fatalf("len %d", len(o.a))
	}
	for i := range o.a {
		if o.a[i] != 0 {
			t.Fatalf("entry %d is %d, want 0", i, o.a[i])
		}
		o.a[i] = uint32(i)
	}
	if runtime.GOOS != "linux" {
		t.Skip("no mapping outside Linux")
	}
	if got := Mapped() - before; got < 64<<20 {
		t.Fatalf("%d bytes mapped, want at least 64 MiB", got)
	}
	if huge := anonHugePages(t, unsafe.Pointer(&o.a[0])); huge >= 0 {
		t.Logf("AnonHugePages of the mapping: %d kB", huge)
		if thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); strings.Contains(string(thp), "[never]") {
			t.Log("transparent huge pages are off on this system")
		} else if huge == 0 {
			// The kernel may lack free huge pages (fragmented memory): not an error of ours,
			// but worth seeing.
			t.Log("no huge page in the mapping")
		}
	}
	runtime.KeepAlive(o)
	o = nil
	testutil.WaitUntil(t, "the mapping released after its owner is collected", func() bool {
		runtime.GC()
		return Mapped() == before
	})
}

// anonHugePages returns the AnonHugePages (kB) of the mapping holding p in /proc/self/smaps,
// -1 when not found.
func anonHugePages(t *testing.T, p unsafe.Pointer) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return -1
	}
	defer f.Close()
	addr := uintptr(p)
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(strings.Fields(line)[0], "-") {
			in = lo <= addr && addr < hi
			continue
		}
		var kb int
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			fmt.Sscanf(strings.TrimPrefix(line, "AnonHugePages:"), "%d", &kb)
			return kb
		}
	}
	return -1
}
