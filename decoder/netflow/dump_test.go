package netflow

import (
	"os"
	"strings"
	"testing"
)

func TestDump(t *testing.T) {
	files := os.Getenv("NFDUMP")
	if files == "" {
		t.Skip()
	}
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	for i, flows := range decodeFiles(t, d, s, strings.Split(files, ",")...) {
		t.Logf("file %d: %d flows", i, len(flows))
		for _, f := range flows {
			t.Log(f)
		}
	}
}
