//go:build chdb

package chhttp

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	flowtime "flowzero/internal/testutil"
	"flowzero/query"
	"flowzero/query/internal/querytest"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// TestEngine serves the real engine holding the query layer's data set over ClickHouse's
// HTTP protocol and reads it with clickhouse-go, the client Grafana's ClickHouse data
// source is built on, then with plain HTTP requests as curl sends them.
func TestEngine(t *testing.T) {
	e, err := querytest.Start(flowtime.Now().Truncate(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := query.DefaultConfiguration()
	cfg.Timeout = 5 * time.Minute // as long as a loaded machine needs
	svc, err := query.New(cfg, e.Catalog, e.Engine, fixedClock{e.Anchor}, log)
	if err != nil {
		t.Fatal(err)
	}
	chCfg := query.DefaultClickHouseHTTPConfiguration()
	chCfg.Listen, chCfg.Password = "127.0.0.1:0", "s3cret"
	reg := prometheus.NewRegistry()
	srv, err := New(reg, chCfg, svc, cfg.Timeout, 2, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	addr := srv.Addr().String()

	// The expected sums, from the data set.
	start, end := e.Anchor.Add(-querytest.Recent), e.Anchor
	perBoundary := map[string]uint64{}
	var flows uint64
	for _, f := range e.Flows {
		if !f.Time.Before(start) && f.Time.Before(end) {
			perBoundary[map[uint64]string{1: "external", 2: "internal"}[f.InBoundary]] += f.Bytes * f.SamplingRate
			flows++
		}
	}
	stmt := fmt.Sprintf("SELECT toString(InIfBoundary) AS boundary, sum(Bytes * SamplingRate) AS bytes, count() AS flows "+
		"FROM flowzero.flows WHERE TimeReceived >= toDateTime(%d) AND TimeReceived < toDateTime(%d) "+
		"GROUP BY boundary ORDER BY boundary", start.Unix(), end.Unix())

	t.Run("clickhouse-go", func(t *testing.T) {
		ctx := context.Background()
		conn, err := clickhouse.Open(&clickhouse.Options{
			Addr:     []string{addr},
			Protocol: clickhouse.HTTP,
			Auth:     clickhouse.Auth{Username: "default", Password: "s3cret"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		rows, err := conn.Query(ctx, stmt)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		got := map[string]uint64{}
		var total uint64
		for rows.Next() {
			var boundary string
			var bytes, n uint64
			if err := rows.Scan(&boundary, &bytes, &n); err != nil {
				t.Fatalf("Scan: %v", err)
			}
			got[boundary], total = bytes, total+n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(perBoundary) || total != flows {
			t.Errorf("got %v (%d flows), want %v (%d flows)", got, total, perBoundary, flows)
		}
		// Every column of the flows table (dates, addresses, enums, LowCardinality, arrays,
		// maps of the schema) comes through the Native format the client reads.
		rows, err = conn.Query(ctx, "SELECT * FROM flowzero.flows ORDER BY TimeReceived DESC LIMIT 3")
		if err != nil {
			t.Fatalf("SELECT *: %v", err)
		}
		var nrows int
		for rows.Next() {
			dest := make([]any, len(rows.ColumnTypes()))
			for i, ct := range rows.ColumnTypes() {
				dest[i] = reflect.New(ct.ScanType()).Interface()
			}
			if err := rows.Scan(dest...); err != nil {
				t.Fatalf("SELECT *: Scan: %v", err)
			}
			nrows++
		}
		if err := rows.Err(); err != nil || nrows != 3 || len(rows.Columns()) < 40 {
			t.Errorf("SELECT *: %d rows of %d columns, %v", nrows, len(rows.Columns()), err)
		}
		// The types a Native block may hold, nested ones and LowCardinality included, with
		// their values as the client reads them.
		var (
			u8   uint8
			str  string
			fs   string
			arr  []uint64
			lc   string
			alc  []string
			m    map[string]uint8
			tup  []any
			null *string
			anul []*string
			lcn  *string
			dec  decimal.Decimal
			ip   netip.Addr
			num  uint64
		)
		if err := conn.QueryRow(ctx, "SELECT toUInt8(7), 'x', toFixedString('FR', 2), [1, 2, 3], toLowCardinality('lc'), "+
			"[toLowCardinality('a'), 'b'], map('k', toUInt8(1)), tuple(1, 'a'), CAST(NULL AS Nullable(String)), "+
			"CAST([NULL, 'y'] AS Array(Nullable(String))), CAST('z' AS LowCardinality(Nullable(String))), "+
			"toDecimal64(1.5, 2), toIPv6('2001:db8::1'), number FROM numbers(5) WHERE number = 4").Scan(
			&u8, &str, &fs, &arr, &lc, &alc, &m, &tup, &null, &anul, &lcn, &dec, &ip, &num); err != nil {
			t.Fatalf("types: %v", err)
		}
		if got := strings.TrimSpace(fmt.Sprintln(u8, str, fs, arr, lc, alc, m, tup, null, len(anul), *anul[1], *lcn, dec, ip, num)); got !=
			"7 x FR [1 2 3] lc [a b] map[k:1] [1 a] <nil> 2 y z 1.5 2001:db8::1 4" {
			t.Errorf("types: %s", got)
		}
		// A write is refused with ClickHouse's READONLY code, which the client reports.
		err = conn.Exec(ctx, "INSERT INTO flowzero.flows (Bytes) VALUES (1)")
		if err == nil || !strings.Contains(err.Error(), "164") {
			t.Errorf("INSERT: %v, want code 164 (READONLY)", err)
		}
		// database/sql over the same protocol.
		db := clickhouse.OpenDB(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.HTTP,
			Auth: clickhouse.Auth{Username: "default", Password: "s3cret"}})
		defer db.Close()
		var n uint64
		if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT count() FROM flowzero.flows WHERE TimeReceived >= toDateTime(%d) "+
			"AND TimeReceived < toDateTime(%d)", start.Unix(), end.Unix())).Scan(&n); err != nil || n != flows {
			t.Errorf("database/sql: %d flows, %v; want %d", n, err, flows)
		}
		// Wrong password: the client sees the authentication error.
		bad, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.HTTP,
			Auth: clickhouse.Auth{Username: "default", Password: "wrong"}})
		if err == nil {
			err = bad.Ping(ctx)
			bad.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "516") {
			t.Errorf("wrong password: %v, want code 516", err)
		}
	})

	do := func(t *testing.T, method, rawQuery, body string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+addr+"/?"+rawQuery, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("default", "s3cret")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r io.Reader = res.Body
		if res.Header.Get("Content-Encoding") == "gzip" {
			if r, err = gzip.NewReader(res.Body); err != nil {
				t.Fatal(err)
			}
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(data)
	}
	t.Run("curl", func(t *testing.T) {
		// GET with the statement in the URL and a FORMAT clause, as curl users write it.
		res, out := do(t, "GET", "query="+url.QueryEscape(stmt+" FORMAT JSON"), "", nil)
		var answer struct {
			Data []struct {
				Boundary string      `json:"boundary"`
				Bytes    json.Number `json:"bytes"`
			} `json:"data"`
		}
		if res.StatusCode != 200 || res.Header.Get("X-ClickHouse-Format") != "JSON" || json.Unmarshal([]byte(out), &answer) != nil {
			t.Fatalf("GET: %d %v %s", res.StatusCode, res.Header, out)
		}
		for _, row := range answer.Data {
			if row.Bytes.String() != fmt.Sprint(perBoundary[row.Boundary]) {
				t.Errorf("%s: %s bytes, want %d", row.Boundary, row.Bytes, perBoundary[row.Boundary])
			}
		}
		// POST with the statement as the body, default_format and gzip.
		res, out = do(t, "POST", "default_format=CSV&enable_http_compression=1", stmt, map[string]string{"Accept-Encoding": "gzip"})
		want := fmt.Sprintf("\"external\",%d,", perBoundary["external"])
		if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(out, want) {
			t.Errorf("POST: %d %v %q, want %q...", res.StatusCode, res.Header, out, want)
		}
		for _, c := range []struct{ name, method, query, body, code string }{
			{"write", "POST", "", "ALTER TABLE flowzero.flows DELETE WHERE 1", "164"},
			{"table function", "GET", "query=" + url.QueryEscape("SELECT * FROM file('/etc/passwd')"), "", "164"},
			{"limit setting", "GET", "max_memory_usage=0&query=SELECT+1", "", "164"},
			{"settings clause", "GET", "query=" + url.QueryEscape("SELECT 1 SETTINGS readonly = 0"), "", "164"},
			{"syntax", "GET", "query=SELEC+1", "", "164"},
			{"unknown table", "GET", "query=" + url.QueryEscape("SELECT * FROM flowzero.nope"), "", "60"},
			{"file as a table", "GET", "query=" + url.QueryEscape("SELECT * FROM '/etc/hostname'"), "", "164"},
			{"file in IN", "GET", "query=" + url.QueryEscape("SELECT 'x' IN `/etc/hostname`"), "", "60"},
			{"file setting", "GET", "format_template_row=%2Fetc%2Fhostname&query=" + url.QueryEscape("SELECT 1 FORMAT Template"), "", "164"},
			{"too large", "POST", "", "SELECT '" + strings.Repeat("x", chCfg.MaxBodyBytes) + "'", "307"},
			{"parameters", "GET", "param_x=1&query=" + url.QueryEscape("SELECT {x:UInt8}"), "", "48"},
			{"database", "GET", "database=flowzero&query=SELECT+1", "", "81"},
		} {
			res, out := do(t, c.method, c.query, c.body, nil)
			if res.StatusCode < 400 || res.Header.Get("X-ClickHouse-Exception-Code") != c.code ||
				!strings.HasPrefix(out, "Code: "+c.code+". DB::Exception: ") {
				t.Errorf("%s: %d %s %q, want code %s", c.name, res.StatusCode, res.Header.Get("X-ClickHouse-Exception-Code"), out, c.code)
			}
		}
		if res, out := do(t, "GET", "", "", nil); res.StatusCode != 200 || out != "Ok.\n" {
			t.Errorf("GET /: %d %q", res.StatusCode, out)
		}
	})
	if n := testutil.ToFloat64(srv.metrics.requests[resultBad]); n < 8 {
		t.Errorf("bad-request counter %v", n)
	}
	if n := testutil.ToFloat64(srv.metrics.requests[resultUnauthorized]); n < 1 {
		t.Errorf("unauthorized counter %v", n)
	}
}
