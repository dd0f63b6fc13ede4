//go:build chdb

package store

import (
	"context"
	"strings"
	"testing"

	"flowzero/schema"
	"flowzero/store/internal/storetest"
)

// TestSinkAcknowledge: Acknowledge fails once for the batches dropped for a full queue since
// the previous call, and succeeds when everything written was inserted.
func TestSinkAcknowledge(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 1024
	cfg.Embedded.QueueLength = 1
	cfg.Resolutions = nil
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	for i := range 1000 {
		sink.Write(storetest.Flows[i%len(storetest.Flows)].Encode(fm))
	}
	if err := sink.Acknowledge(context.Background()); err == nil || !strings.Contains(err.Error(), "queue full") {
		t.Fatalf("after drops: %v, want the queue-full error", err)
	}
	sink.Write(storetest.Flows[0].Encode(fm))
	if err := sink.Acknowledge(context.Background()); err != nil {
		t.Fatalf("without drops: %v", err)
	}
	if got := storetest.Query(t, sink.Conn(), "SELECT count() FROM flowzero.flows"); got == "0" {
		t.Error("nothing inserted")
	}
}
