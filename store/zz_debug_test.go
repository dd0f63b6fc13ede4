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
	// first 1000 messages
	var msgs [][]byte
	for len(b) > 0 && len(msgs) < 5000 {
		n, w := uvarint(b)
		msgs = append(msgs, b[:w+n])
		b = b[w+n:]
	}
	cfg := testConfig(t, t.TempDir())
	cfg.Resolutions = nil
	c, ddl := benchOpen(&testing.B{}, cfg, s)
	defer c.Close()
	for i, m := range msgs {
		if _, err := c.QueryBytes(append([]byte(ddl.InsertPrefix()), m...), ""); err != nil {
			t.Fatalf("msg %d (%d bytes) %x: %v", i, len(m), m, err)
		}
	}
}
