//go:build chdb

package chdb

import (
	"os"
	"strings"
	"testing"
)

func TestScratch(t *testing.T) {
	f := os.Getenv("SCRATCH")
	if f == "" {
		t.Skip()
	}
	b, _ := os.ReadFile(f)
	c, err := Open(os.Getenv("SCRATCH_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range strings.Split(string(b), ";;\n") {
		q = strings.TrimSpace(q)
		if q == "" {
			continue
		}
		out, err := c.Query(q, "TSV")
		t.Logf("Q: %.150s\n=> %s err=%v", q, out, err)
	}
}
