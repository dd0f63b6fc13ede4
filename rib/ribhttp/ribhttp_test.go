package ribhttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/rib"
	"flowzero/routing"
)

// loadRIB feeds a RIB with the RIPE updates (MRT) and the Juniper vMX BMP captures, through
// the routing component as the collector does.
func loadRIB(tb testing.TB) *rib.RIB {
	tb.Helper()
	cfg := routing.DefaultConfiguration()
	cfg.MRT = []string{testdata.Path(tb, "rib", "ripe-bgpdump-updates.20160811.1600.gz")}
	cfg.BMP.Enabled = true
	cfg.BMP.Listen = "127.0.0.1:0"
	c, err := routing.New(prometheus.NewRegistry(), cfg, routing.Dependencies{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Stop() })
	conn, err := net.Dial("tcp", c.BMPAddr().String())
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	for _, f := range []string{"bmp-init.pcap", "bmp-peers-up.pcap", "bmp-reach.pcap", "bmp-reach-addpath.pcap"} {
		dgs, err := pcapfile.ReadTCP(testdata.Path(tb, "bmp", f))
		if err != nil {
			tb.Fatal(err)
		}
		for _, d := range dgs {
			if _, err := conn.Write(d.Payload); err != nil {
				tb.Fatal(err)
			}
		}
	}
	// The last route of the captures is the Add-Path one.
	testutil.WaitUntil(tb, "the BMP routes", func() bool {
		_, ok := c.Lookup(netip.MustParseAddr("192.0.2.4"))
		return ok
	})
	return c.RIB()
}

func post(t *testing.T, h http.Handler, method, body string) (*httptest.ResponseRecorder, Response) {
	t.Helper()
	req := httptest.NewRequest(method, Path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var resp Response
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("response is not JSON: %v\n%s", err, rec.Body.String())
		}
	}
	return rec, resp
}

func TestLookup(t *testing.T) {
	table := loadRIB(t)
	mux := http.NewServeMux()
	newHandler(t, table).Register(mux)

	rec, resp := post(t, mux, http.MethodPost,
		`{"addresses": ["198.51.100.200", "2001:db8:1::1", "12.231.178.10", "::ffff:192.0.2.4", "10.255.255.1", "bogus\"x"]}`)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s", rec.Code, rec.Body.String())
	}
	if len(resp.Results) != 6 {
		t.Fatalf("%d results", len(resp.Results))
	}
	r := resp.Results
	// BMP: 198.51.100.128/25 from 192.0.2.1 (first peer with this prefix; VPN routes of
	// 2001:db8::7 for the same prefix come after).
	want0 := Result{Address: "198.51.100.200", Found: true, Prefix: "198.51.100.128/25", OriginAS: 396919,
		ASPath: []uint32{65011, 65011, 174, 29447, 396919}, Communities: []string{"65011:12"}, NextHop: "192.0.2.1"}
	if !sameResult(r[0], want0) || r[0].Peer == nil || r[0].Peer.Address != "192.0.2.1" || r[0].Peer.AS != 65011 ||
		r[0].Peer.Router != "127.0.0.1" || r[0].Peer.RD != "0:0" {
		t.Errorf("result 0 = %s", dump(r[0]))
	}
	if r[1].Prefix != "2001:db8:1::/64" || r[1].OriginAS != 174 || r[1].Peer == nil {
		t.Errorf("result 1 = %s", dump(r[1]))
	}
	// MRT: the first peer's path of 12.231.178.0/24.
	if r[2].Prefix != "12.231.178.0/24" || r[2].OriginAS != 6318 || r[2].Peer == nil || r[2].Peer.Router != "" {
		t.Errorf("result 2 = %s", dump(r[2]))
	}
	// IPv4-mapped input answered as IPv4; the Add-Path route has an empty AS path (origin:
	// the peer's AS) and a LOCAL_PREF.
	if r[3].Address != "192.0.2.4" || r[3].Prefix != "192.0.2.4/31" || r[3].OriginAS != 65500 || len(r[3].ASPath) != 0 || r[3].LocalPref == nil || r[3].NextHop != "192.0.2.5" {
		t.Errorf("result 3 = %s", dump(r[3]))
	}
	if r[4].Found || r[4].Prefix != "" || r[4].Error != "" {
		t.Errorf("result 4 = %s", dump(r[4]))
	}
	if r[5].Found || r[5].Address != "bogus\"x" || r[5].Error == "" {
		t.Errorf("result 5 = %s", dump(r[5]))
	}

	// Large communities are rendered as a:b:c.
	var withLC *Result
	_, resp = post(t, mux, http.MethodPost, `{"addresses":["2001:db8:2::1"]}`)
	for _, p := range table.Paths(netip.MustParseAddr("2001:db8:2::1")) {
		if p.Selected && len(p.Attrs.LargeCommunities) > 0 {
			withLC = &resp.Results[0]
		}
	}
	if withLC != nil && !slices.Equal(withLC.LargeCommunities, []string{"65017:400:2"}) {
		t.Errorf("large communities %v", withLC.LargeCommunities)
	}

	for _, tc := range []struct {
		method, body string
		code         int
	}{
		{http.MethodGet, "", http.StatusMethodNotAllowed},
		{http.MethodPost, `{"addresses": [1, 2]}`, http.StatusBadRequest},
		{http.MethodPost, `not json`, http.StatusBadRequest},
		{http.MethodPost, `{"addresses": []}`, http.StatusOK},
	} {
		rec, _ := post(t, mux, tc.method, tc.body)
		if rec.Code != tc.code {
			t.Errorf("%s %q: status %d, want %d", tc.method, tc.body, rec.Code, tc.code)
		}
	}
	// Too many addresses.
	var big bytes.Buffer
	big.WriteString(`{"addresses":[`)
	for i := range MaxAddresses + 1 {
		if i > 0 {
			big.WriteByte(',')
		}
		big.WriteString(`"1.1.1.1"`)
	}
	big.WriteString(`]}`)
	if rec, _ := post(t, mux, http.MethodPost, big.String()); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("too many addresses: status %d", rec.Code)
	}
}

func sameResult(a, b Result) bool {
	return a.Address == b.Address && a.Found == b.Found && a.Prefix == b.Prefix && a.OriginAS == b.OriginAS &&
		slices.Equal(a.ASPath, b.ASPath) && slices.Equal(a.Communities, b.Communities) && a.NextHop == b.NextHop
}

func dump(r Result) string {
	b, _ := json.Marshal(r)
	return fmt.Sprint(string(b))
}

// BenchmarkHTTPLookup posts batches of 1,000 addresses of a real BGP feed through the handler
// (JSON decoding, lookups, encoding) and reports lookups per second.
func BenchmarkHTTPLookup(b *testing.B) {
	table := loadRIB(b)
	h := newHandler(b, table)
	var addrs []string
	for p := range table.All() {
		addrs = append(addrs, p.Addr().Next().String())
	}
	var body bytes.Buffer
	body.WriteString(`{"addresses":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, "%q", addrs[i%len(addrs)])
	}
	body.WriteString(`]}`)
	payload := body.Bytes()
	cpu := testutil.StartCPU(b)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(payload))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
	cpu.Stop(b)
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "lookups/s")
}

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
		fast bool
	}{
		{`{"addresses":["1.1.1.1","2001:db8::1"]}`, []string{"1.1.1.1", "2001:db8::1"}, true},
		{" {\n \"addresses\" : [ \"1.1.1.1\" ,\t\"::1\" ] }\n", []string{"1.1.1.1", "::1"}, true},
		{`{"addresses":[]}`, []string{}, true},
		{`{"addresses":["\u0031.1.1.1"]}`, []string{"1.1.1.1"}, false},
		{`{"other":1,"addresses":["1.1.1.1"]}`, []string{"1.1.1.1"}, false},
	} {
		got, ok := parseRequest([]byte(tc.body))
		if ok != tc.fast || (ok && !slices.Equal(got, tc.want)) {
			t.Errorf("parseRequest(%q) = %q, %v", tc.body, got, ok)
		}
		// Whatever the path, the handler answers for the same addresses.
		rec, resp := post(t, newHandler(t, rib.NewTable(rib.DefaultConfiguration())), http.MethodPost, tc.body)
		if rec.Code != http.StatusOK || len(resp.Results) != len(tc.want) {
			t.Errorf("%q: status %d, %d results", tc.body, rec.Code, len(resp.Results))
		}
		for i := range resp.Results {
			if resp.Results[i].Address != tc.want[i] && netip.MustParseAddr(tc.want[i]).String() != resp.Results[i].Address {
				t.Errorf("%q: result %d for %q", tc.body, i, resp.Results[i].Address)
			}
		}
	}
}

// FuzzRIBLookupRequest checks the request fast path against encoding/json: whenever the fast
// path accepts a body, the standard decoder must read the same addresses from it.
func FuzzRIBLookupRequest(f *testing.F) {
	f.Add([]byte(`{"addresses": ["198.51.100.200", "2001:db8:1::1", "12.231.178.10", "::ffff:192.0.2.4"]}`))
	f.Add([]byte(`{"addresses":[]}`))
	f.Add([]byte(`{"addresses":["\u0031.1.1.1", "x"]}`))
	f.Add([]byte(`{"addresses":["1.1.1.1",]}`))
	f.Add([]byte("{\"addresses\":[\"\x80\"]}")) // invalid UTF-8: encoding/json substitutes U+FFFD
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := parseRequest(body)
		if !ok {
			return
		}
		var req Request
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refuses it: %v", body, err)
		}
		if !slices.Equal(got, req.Addresses) && !(len(got) == 0 && len(req.Addresses) == 0) {
			t.Fatalf("fast path read %q, encoding/json %q", got, req.Addresses)
		}
	})
}

// newHandler returns a handler whose metrics are not registered.
func newHandler(tb testing.TB, table *rib.RIB) *Handler {
	tb.Helper()
	h, err := New(nil, table)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// failingReader fails like a client that goes away in the middle of its body.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// TestRejectedCounted: each refused request is counted under its reason, one fixed series
// per reason; answered requests are not. Requests go through a ServeMux as the app mounts
// the handler (on Path, any method), so that another method reaches the handler, which
// answers 405 with Allow: POST and counts it.
func TestRejectedCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := New(reg, rib.NewTable(rib.DefaultConfiguration()))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux) // on Path, as app.go mounts it through collector.Dependencies.Handlers
	tooMany := `{"addresses":[` + strings.Repeat(`"1.1.1.1",`, MaxAddresses) + `"1.1.1.1"]}`
	const answered = rejectCount
	var want [rejectCount]float64
	for _, tc := range []struct {
		method string
		body   io.Reader
		code   int
		reason reject
	}{
		{http.MethodGet, nil, http.StatusMethodNotAllowed, rejectMethod},
		{http.MethodPut, strings.NewReader(`{"addresses": ["192.0.2.1"]}`), http.StatusMethodNotAllowed, rejectMethod},
		{http.MethodPost, failingReader{}, http.StatusBadRequest, rejectReadBody},
		{http.MethodPost, bytes.NewReader(make([]byte, maxBody+1)), http.StatusRequestEntityTooLarge, rejectBodyTooLarge},
		{http.MethodPost, strings.NewReader(`not json`), http.StatusBadRequest, rejectInvalidJSON},
		{http.MethodPost, strings.NewReader(`{"addresses": [1, 2]}`), http.StatusBadRequest, rejectInvalidJSON},
		{http.MethodPost, strings.NewReader(tooMany), http.StatusRequestEntityTooLarge, rejectTooManyAddresses},
		{http.MethodPost, strings.NewReader(`{"addresses": ["192.0.2.1"]}`), http.StatusOK, answered},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(tc.method, Path, tc.body))
		if rec.Code != tc.code {
			t.Errorf("%s request: status %d, want %d", tc.method, rec.Code, tc.code)
		}
		if tc.reason == rejectMethod && (rec.Header().Get("Allow") != http.MethodPost ||
			!strings.Contains(rec.Body.String(), `"error"`)) {
			t.Errorf("%s request: Allow %q, body %q; want POST and the handler's JSON error",
				tc.method, rec.Header().Get("Allow"), rec.Body.String())
		}
		if tc.reason != answered {
			want[tc.reason]++
		}
		for r := range want {
			if got := promtest.ToFloat64(h.rejected[r]); got != want[r] {
				t.Errorf("after a %d answer: %s counted %v, want %v", rec.Code, rejectNames[r], got, want[r])
			}
		}
	}
	name := "flowzero_rib_lookup_rejected_total"
	if n, err := promtest.GatherAndCount(reg, name); err != nil || n != int(rejectCount) {
		t.Errorf("%d series of %s (%v), want one per reason", n, name, err)
	}
}

// parseRequest collects the addresses scanRequest reads, as the handler does: a first pass
// that checks the shape, then one that reads them.
func parseRequest(body []byte) ([]string, bool) {
	n, ok := scanRequest(body, nil)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, n)
	if m, _ := scanRequest(body, func(s string) { out = append(out, s) }); m != n {
		panic("scanRequest counted differently in its two passes")
	}
	return out, true
}

// writeSizes is a ResponseWriter that keeps only the size of each Write.
type writeSizes struct {
	httptest.ResponseRecorder
	largest, total int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.largest = max(w.largest, len(p))
	w.total += len(p)
	return len(p), nil
}

// TestLookupStreamed: a large answer goes out in chunks of about flushAt bytes as the
// addresses are looked up, not built whole in memory first (issue 24: 32 parallel answers
// of 100,000 addresses took a collector from 384 MB to 1.78 GB), whichever way the request
// is decoded.
func TestLookupStreamed(t *testing.T) {
	table := loadRIB(t)
	h := newHandler(t, table)
	var addrs []string
	for p := range table.All() {
		addrs = append(addrs, p.Addr().Next().String())
	}
	for _, escaped := range []bool{false, true} {
		var body bytes.Buffer
		body.WriteString(`{"addresses":[`)
		for i := range MaxAddresses {
			if i > 0 {
				body.WriteByte(',')
			}
			if escaped && i == 0 {
				body.WriteString(`"\u0031.1.1.1"`) // the standard decoder's path
				continue
			}
			fmt.Fprintf(&body, "%q", addrs[i%len(addrs)])
		}
		body.WriteString(`]}`)
		w := &writeSizes{ResponseRecorder: *httptest.NewRecorder()}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, Path, &body))
		if w.Code != http.StatusOK || w.total < 10<<20 {
			t.Fatalf("status %d, %d bytes answered", w.Code, w.total)
		}
		if w.largest > flushAt+4<<10 {
			t.Errorf("escaped %v: a write of %d bytes for an answer of %d: not streamed", escaped, w.largest, w.total)
		}
	}
}
