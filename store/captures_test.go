//go:build chdb

package store

import (
	"flowzero/schema"
	"flowzero/store/internal/storetest"
	"testing"
)

// TestCaptureFlowsThroughSink stores every flow the decoders produce from the real captures,
// with every column enabled, and reads each one back from the engine: the rows are exactly
// the decoded messages (checkStoredFlows), and the aggregated tables sum to them for every
// dimension, with flows_1m pre-aggregated by the sink and then fed by its view.
func TestCaptureFlowsThroughSink(t *testing.T) {
	s := storetest.AllColumnsSchema(t)
	msgs := storetest.CaptureMessages(t, s)
	if len(msgs) < 100 {
		t.Fatalf("only %d flows decoded from the captures", len(msgs))
	}
	sink := storeCaptureFlows(t, s, msgs, true)
	if _, ok := sink.DDL().PreAggregated(); !ok || sink.agg == nil {
		t.Fatal("every column enabled: the sink does not pre-aggregate")
	}
	// The aggregated tables sum to the flows, for every dimension.
	checkAggregates(t, sink.Conn(), sink.DDL())
	storetest.CheckStoredFlows(t, sink.Conn(), s, msgs)
	t.Logf("%d flows from the captures stored and read back", len(msgs))

	// The same flows with the view grouping flows_1m (embedded.pre-aggregate off).
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	sink = storeCaptureFlows(t, s, msgs, false)
	if sink.agg != nil {
		t.Fatal("pre-aggregate off: the sink pre-aggregates")
	}
	checkAggregates(t, sink.Conn(), sink.DDL())
}

// storeCaptureFlows stores msgs through a new sink, pre-aggregating or not, and flushes it.
func storeCaptureFlows(t *testing.T, s *schema.Schema, msgs [][]byte, preAggregate bool) *Sink {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 256 << 10
	cfg.Embedded.PreAggregate = preAggregate
	sink := startSink(t, cfg, s)
	for _, m := range msgs {
		sink.Write(m)
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	return sink
}
