//go:build chdb

package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/testutil"
	"flowzero/schema"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
)

// TestSinkEngineQueriesWhileInserting queries the running sink's engine through Engine while
// writers keep writing: three readers, one per output format, see the flows table grow
// (never shrink, never a torn answer); a statement sleeping on a read-only connection does
// not hold back the sink's inserts and stops with its context; after Stop, statements are
// refused.
func TestSinkEngineQueriesWhileInserting(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 16 << 10 // the writer outpaces the engine: batches beyond the
	// queue are dropped (and counted), which keeps a Flush short
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	e := sink.Engine()
	ctx := context.Background()

	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop) })
	t.Cleanup(halt) // a failed test leaves no writer running
	var writers sync.WaitGroup
	writers.Add(1)
	go func() {
		defer writers.Done()
		fm := s.NewFlowMessage()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			sink.Write(storetest.Flows[i%len(storetest.Flows)].Encode(fm))
		}
	}()

	counts := map[string]func([]byte) (int, error){
		"TabSeparated": func(out []byte) (int, error) { return strconv.Atoi(strings.TrimSpace(string(out))) },
		"JSONCompact": func(out []byte) (int, error) {
			var v struct{ Data [][]int }
			if err := json.Unmarshal(out, &v); err != nil || len(v.Data) != 1 || len(v.Data[0]) != 1 {
				return 0, errors.New("not one value")
			}
			return v.Data[0][0], nil
		},
		"JSON": func(out []byte) (int, error) {
			var v struct{ Data []struct{ N int } }
			if err := json.Unmarshal(out, &v); err != nil || len(v.Data) != 1 {
				return 0, errors.New("not one row")
			}
			return v.Data[0].N, nil
		},
	}
	var readers sync.WaitGroup
	var queries atomic.Int64
	for format, count := range counts {
		readers.Add(1)
		go func() {
			defer readers.Done()
			last := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				out, err := e.Query(ctx, "SELECT toInt32(count()) AS N FROM flowzero.flows", format)
				if err != nil {
					t.Errorf("%s: %v", format, err)
					return
				}
				n, err := count(out)
				if err != nil || n < last {
					t.Errorf("%s: %d flows after %d (%v): %q", format, n, last, err, out)
					return
				}
				last = n
				queries.Add(1)
			}
		}()
	}
	testutil.WaitUntil(t, "10 batches inserted and 30 queries answered while writing", func() bool {
		return promtest.ToFloat64(sink.m.batches) >= 10 && queries.Load() >= 30
	})

	// A statement sleeping on a read-only connection does not hold back the inserts.
	slowCtx, stopSlow := context.WithCancel(ctx)
	var slowDone atomic.Bool
	slowErr := make(chan error, 1)
	go func() {
		_, err := e.Query(slowCtx, "/* slow */ SELECT sleepEachRow(1) FROM numbers(60) SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = 0", "")
		slowDone.Store(true)
		slowErr <- err
	}()
	testutil.WaitUntil(t, "the slow statement running", func() bool {
		return storetest.Query(t, sink.Conn(), "SELECT count() FROM system.processes WHERE query LIKE '%/* slow */%' AND query NOT LIKE '%system.processes%'") == "1"
	})
	batches := promtest.ToFloat64(sink.m.batches)
	testutil.WaitUntil(t, "3 more batches inserted", func() bool { return promtest.ToFloat64(sink.m.batches) >= batches+3 })
	if err := sink.Flush(); err != nil { // pre-aggregated groups included
		t.Fatal(err)
	}
	if slowDone.Load() {
		t.Fatal("the inserts waited for the read-only statement")
	}
	stopSlow()
	if err := <-slowErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the slow statement: %v, want context.Canceled", err)
	}

	halt()
	writers.Wait()
	readers.Wait()
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	out, err := e.Query(ctx, "SELECT count() FROM flowzero.flows", "")
	if stored := promtest.ToFloat64(sink.m.flows); err != nil || strings.TrimSpace(string(out)) != strconv.FormatFloat(stored, 'f', -1, 64) {
		t.Errorf("flows table holds %q (%v), %v inserted", out, err, stored)
	}
	if err := e.Exec(ctx, "TRUNCATE TABLE flowzero.flows"); err == nil || !strings.Contains(err.Error(), "Code: 164") {
		t.Errorf("TRUNCATE through Engine: %v, want READONLY (Code: 164)", err)
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Query(ctx, "SELECT 1", ""); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("after Stop: %v, want engine.ErrClosed", err)
	}
}
