package collector

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// FuzzParseProcAddr: an address field of /proc/net/udp{,6}, however malformed, gives an
// address or false, never a panic; an address given is the one the field encodes (written
// back the kernel's way, it reads the same).
func FuzzParseProcAddr(f *testing.F) {
	for _, s := range []string{
		"0100007F:0807", "00000000:0807", "00000000000000000000000001000000:18BB",
		"0000000000000000FFFF00000100007F:0035", "0100007F", "0100007F:", "0100007F:10000",
		"GG00007F:0807", "0100007F:-1", "100007F:0807", "0100007F:0807:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseProcAddr(s)
		if !ok {
			return
		}
		raw := a.Addr().AsSlice()
		var b strings.Builder
		for w := 0; w < len(raw)/4; w++ {
			fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(raw[4*w:]))
		}
		fmt.Fprintf(&b, ":%04X", a.Port())
		back, ok := parseProcAddr(b.String())
		if !ok || back != a {
			t.Fatalf("%q reads as %s, which written back as %q reads as %s (%v)", s, a, b.String(), back, ok)
		}
	})
}
