package store

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"flowzero/internal/health"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// fakeServer answers like ClickHouse's HTTP interface: the flows table's row of
// system.tables, and INSERTs failing with the statuses of fail, in turn, then succeeding.
type fakeServer struct {
	mu      sync.Mutex
	table   string // "engine\tcreate_table_query" of system.tables, "" none
	fail    []int
	inserts []string // query parameter of every INSERT
	bodies  [][]byte
	headers []string
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.headers = append(f.headers, r.Header.Get("X-ClickHouse-User")+":"+r.Header.Get("X-ClickHouse-Key"))
	q := r.URL.Query().Get("query")
	if q == "" {
		if strings.Contains(string(body), "system.tables") && f.table != "" {
			io.WriteString(w, f.table+"\n")
		}
		return
	}
	f.inserts = append(f.inserts, q)
	f.bodies = append(f.bodies, body)
	if len(f.fail) > 0 {
		status := f.fail[0]
		f.fail = f.fail[1:]
		w.Header().Set("X-ClickHouse-Exception-Code", "999")
		w.WriteHeader(status)
		io.WriteString(w, "Code: 999. DB::Exception: failed (test)")
	}
}

func newTestServerSink(t *testing.T, f *fakeServer, logs io.Writer) *ServerSink {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := schema.New(schema.Configuration{Enabled: []string{"DatagramPartition", "DatagramOffset", "DatagramIndex"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.ClickHouse.URL = srv.URL
	cfg.ClickHouse.User, cfg.ClickHouse.Password = "flowzero", "s3cret"
	cfg.Server.Retries = 2
	sink, err := NewServerSink(nil, cfg, Dependencies{Schema: s, Clock: testutil.Clock(),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sink.sleep = func(context.Context, time.Duration) error { return nil }
	return sink
}

// unitOf returns n length-delimited flow messages of schema s.
func unitOf(t *testing.T, n int) []byte {
	t.Helper()
	s, err := schema.New(schema.Configuration{Enabled: []string{"DatagramPartition", "DatagramOffset", "DatagramIndex"}})
	if err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	var data []byte
	for i := range n {
		fm.AppendUint(schema.ColumnBytes, uint64(100+i))
		fm.AppendUint(schema.ColumnDatagramOffset, uint64(i))
		data = append(data, fm.Finalize()...)
	}
	return data
}

// TestServerSinkInsertsUnits checks the INSERT of a unit: Native data into the flows table,
// the unit's token and deduplicate_blocks_in_dependent_materialized_views in its SETTINGS,
// the credentials in headers; a failure (HTTP 5xx) is tried again with the same token and
// statement, a refused statement (HTTP 4xx) is not; a unit that fails every attempt is
// returned as an error, counted and shown in the health report, and no log line quotes the
// password.
func TestServerSinkInsertsUnits(t *testing.T) {
	f := &fakeServer{table: "MergeTree\tCREATE TABLE flowzero.flows (...) ENGINE = MergeTree SETTINGS non_replicated_deduplication_window = 10000"}
	var logs bytes.Buffer
	sink := newTestServerSink(t, f, &logs)
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := unitOf(t, 3)
	if err := sink.InsertUnit(ctx, "flowzero-datagrams-2-100-199", data, 3); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := f.inserts[0]
	f.mu.Unlock()
	for _, want := range []string{"INSERT INTO `flowzero`.`flows` (", "insert_deduplication_token = 'flowzero-datagrams-2-100-199'",
		"deduplicate_blocks_in_dependent_materialized_views = 1", " FORMAT Native"} {
		if !strings.Contains(got, want) {
			t.Errorf("INSERT %q lacks %q", got, want)
		}
	}
	if !strings.HasSuffix(got, " FORMAT Native") {
		t.Errorf("INSERT %q does not end with its format", got)
	}

	// Two 5xx, then success: three attempts with the same statement.
	f.mu.Lock()
	f.fail = []int{http.StatusServiceUnavailable, http.StatusInternalServerError}
	f.mu.Unlock()
	if err := sink.InsertUnit(ctx, "flowzero-datagrams-2-200-299", data, 3); err != nil {
		t.Fatalf("retried insert: %v", err)
	}
	f.mu.Lock()
	if n := len(f.inserts); n != 4 || f.inserts[1] != f.inserts[3] || f.inserts[2] != f.inserts[3] || !bytes.Equal(f.bodies[1], f.bodies[3]) {
		t.Errorf("%d INSERTs; the retries must repeat the statement and its token", n)
	}
	f.mu.Unlock()
	if r := sink.Health(); r.Status != health.OK || r.Counters["flows-inserted"] != 6 {
		t.Errorf("after retries that succeeded: %+v", r)
	}

	// A refused statement: one attempt, an error, degraded.
	f.mu.Lock()
	f.fail = []int{http.StatusBadRequest}
	f.mu.Unlock()
	if err := sink.InsertUnit(ctx, "flowzero-datagrams-2-300-399", data, 3); err == nil || !strings.Contains(err.Error(), "flowzero-datagrams-2-300-399") {
		t.Errorf("refused insert: %v", err)
	}
	// Every attempt failing.
	f.mu.Lock()
	f.fail = []int{500, 500, 500}
	f.mu.Unlock()
	if err := sink.InsertUnit(ctx, "flowzero-datagrams-2-400-499", data, 3); err == nil {
		t.Error("no error after every attempt failed")
	}
	f.mu.Lock()
	if n := len(f.inserts); n != 4+1+3 {
		t.Errorf("%d INSERTs, want 8 (no retry of a 4xx, 3 attempts of a 5xx)", n)
	}
	for _, h := range f.headers {
		if h != "flowzero:s3cret" {
			t.Errorf("credentials sent as %q", h)
		}
	}
	f.mu.Unlock()
	r := sink.Health()
	if r.Status != health.Degraded || r.Counters["units-failed"] != 2 || !strings.Contains(r.Reason, "INSERT into the server failed") {
		t.Errorf("after failed units: %+v", r)
	}
	if strings.Contains(logs.String(), "s3cret") || !strings.Contains(logs.String(), "insert into the server failed") {
		t.Errorf("logs:\n%s", logs.String())
	}

	// Batches (mode all) are refused and counted.
	b := output.NewBatchPool(1024, 1).Get()
	b.Append(data)
	if sink.Send(b) {
		t.Error("a batch accepted")
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := sink.InsertUnit(ctx, "t", data, 3); err == nil {
		t.Error("a unit inserted after Stop")
	}
}

// TestServerSinkChecksTables checks that the sink does not start without the flows table, or
// with one that does not remember deduplication tokens, and says what to run.
func TestServerSinkChecksTables(t *testing.T) {
	for _, tc := range []struct{ table, want string }{
		{"", "create it with `flowzero store migrate`"},
		{"MergeTree\tCREATE TABLE flowzero.flows (...) ENGINE = MergeTree ORDER BY x", "does not remember deduplication tokens"},
	} {
		sink := newTestServerSink(t, &fakeServer{table: tc.table}, io.Discard)
		if err := sink.Start(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("table %q: %v, want %q", tc.table, err, tc.want)
		}
	}
	sink := newTestServerSink(t, &fakeServer{table: "ReplicatedMergeTree\tCREATE TABLE flowzero.flows (...)"}, io.Discard)
	if err := sink.Start(); err != nil {
		t.Errorf("a Replicated table: %v", err)
	}
}
