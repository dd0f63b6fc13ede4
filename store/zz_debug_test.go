//go:build chdb

package store

import (
	"testing"
	"flowzero/schema"
)

func TestZZDebug(t *testing.T) {
	s := mustSchema(t, schema.DefaultConfiguration())
	batches, _ := demoBatches(s)
	b := batches[0]
	var msgs [][]byte
	for len(b) > 0 && len(msgs) < 20000 {
		n, w := uvarint(b)
		msgs = append(msgs, b[:w+n])
		b = b[w+n:]
	}
	cfg := testConfig(t, t.TempDir())
	cfg.Resolutions = nil
	c, ddl := benchOpen(&testing.B{}, cfg, s)
	defer c.Close()
	for _, k := range []int{100, 1000, 2000, 2100, 2200, 3000, 20000} {
		var buf []byte
		buf = append(buf, ddl.InsertPrefix()...)
		for _, m := range msgs[:k] {
			buf = append(buf, m...)
		}
		_, err := c.QueryBytes(buf, "")
		t.Logf("k=%d bytes=%d err=%v", k, len(buf), err != nil)
	}
}
