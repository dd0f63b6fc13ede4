//go:build chdb

package app

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowzero/internal/testutil"
)

// TestEndToEndStore replays every capture over UDP into the collector with the embedded
// ClickHouse sink and checks that the flows table holds exactly the flows decoded offline.
func TestEndToEndStore(t *testing.T) {
	cfg := testConfig(t)
	cfg.Outputs.File.Enabled = false
	cfg.Outputs.Store.Enabled = true
	cfg.Outputs.Store.Embedded.Path = filepath.Join(t.TempDir(), "chdb")
	cfg.Outputs.Store.Embedded.FlushInterval = 100 * time.Millisecond
	cfg.Outputs.Store.Embedded.MaxThreads = 2
	groups := captureGroups(t)
	_, total := expectedFlows(t, cfg, groups)
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	replayGroups(t, a, groups, total)
	// The collector's batches reach the sink after their interval; then the sink inserts.
	var count int
	testutil.WaitUntil(t, fmt.Sprintf("%d rows in the flows table", total), func() bool {
		if err := a.Store().Flush(); err != nil {
			t.Fatal(err)
		}
		out, err := a.Store().Conn().Query("SELECT count(), sum(Bytes), uniqExact(SrcAddr) FROM flowzero.flows", "TSVRaw")
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(out))
		count, _ = strconv.Atoi(fields[0])
		if count >= total {
			t.Logf("flows table: count %s, sum(Bytes) %s, distinct sources %s", fields[0], fields[1], fields[2])
		}
		return count >= total
	})
	if count != total {
		t.Fatalf("flows table has %d rows, want %d", count, total)
	}
}
