package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHTTPClient(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RawQuery+" user="+r.Header.Get("X-ClickHouse-User")+" key="+r.Header.Get("X-ClickHouse-Key")+" body="+string(body))
		mu.Unlock()
		switch {
		case strings.HasPrefix(string(body), "SELECT 1"):
			io.WriteString(w, "1\n")
		case strings.Contains(string(body), "bad"):
			w.Header().Set("X-ClickHouse-Exception-Code", "62")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "Code: 62. DB::Exception: Syntax error\n")
		case strings.Contains(string(body), "late"):
			// An exception after the status line was sent: only the header tells.
			w.Header().Set("X-ClickHouse-Exception-Code", "241")
			io.WriteString(w, "partial output\nCode: 241. DB::Exception: Memory limit exceeded\n")
		}
	}))
	defer srv.Close()
	c, err := NewHTTPClient(HTTPConfiguration{URL: srv.URL + "/?database=flowzero", User: "flowzero", Password: "s3cret", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := c.Query(ctx, "SELECT 1", "")
	if err != nil || string(out) != "1\n" {
		t.Fatalf("Query = %q, %v", out, err)
	}
	if err := c.Exec(ctx, "CREATE TABLE t (a LowCardinality(IPv6)) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	err = c.Exec(ctx, "bad statement")
	var se *ServerError
	if !errors.As(err, &se) || se.Status != 400 || se.Code != "62" || !strings.Contains(se.Msg, "Syntax error") {
		t.Fatalf("error = %#v", err)
	}
	if _, err := c.Query(ctx, "SELECT late", "JSON"); !errors.As(err, &se) || se.Code != "241" {
		t.Fatalf("exception after 200: %v", err)
	}
	if err := c.Insert(ctx, "INSERT INTO t FORMAT Protobuf", strings.NewReader("\x02\x08\x01")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POST database=flowzero&default_format=TabSeparated&wait_end_of_query=1 user=flowzero key=s3cret body=SELECT 1",
		"POST allow_suspicious_low_cardinality_types=1&database=flowzero&wait_end_of_query=1 user=flowzero key=s3cret body=CREATE TABLE t (a LowCardinality(IPv6)) ENGINE = Memory",
		"POST allow_suspicious_low_cardinality_types=1&database=flowzero&wait_end_of_query=1 user=flowzero key=s3cret body=bad statement",
		"POST database=flowzero&default_format=JSON&wait_end_of_query=1 user=flowzero key=s3cret body=SELECT late",
		"POST database=flowzero&query=INSERT+INTO+t+FORMAT+Protobuf user=flowzero key=s3cret body=\x02\x08\x01",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := NewHTTPClient(HTTPConfiguration{URL: "http://u:p@h:8123/"}); err == nil {
		t.Error("credentials in the URL must be refused")
	}
	srv.Close()
	if err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("no error from a closed server")
	}
}

// TestHTTPClientBoundsResponses checks that a response body is read up to
// max-response-bytes: an answer of exactly the limit is returned, a longer one is an error
// (not cut), and an error response quotes the end of its body, where ClickHouse writes an
// exception that comes after the output.
func TestHTTPClientBoundsResponses(t *testing.T) {
	const limit = 4096
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch q := string(body); q {
		case "exact":
			w.Write(bytes.Repeat([]byte("x"), limit))
		case "over":
			w.Write(bytes.Repeat([]byte("x"), limit+1))
		case "endless":
			for range 1000 { // 64 MiB unless the client stops reading
				if _, err := w.Write(bytes.Repeat([]byte("y"), 64<<10)); err != nil {
					return
				}
			}
		case "late":
			w.Header().Set("X-ClickHouse-Exception-Code", "241")
			w.Write(bytes.Repeat([]byte("row\n"), 750)) // 3000 bytes: under the limit, over the quote
			io.WriteString(w, "Code: 241. DB::Exception: Memory limit exceeded\n")
		}
	}))
	defer srv.Close()
	c, err := NewHTTPClient(HTTPConfiguration{URL: srv.URL, Timeout: 5 * time.Second, MaxResponseBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, err := c.Query(ctx, "exact", ""); err != nil || len(out) != limit {
		t.Errorf("a body of the limit: %d bytes, %v", len(out), err)
	}
	for _, q := range []string{"over", "endless"} {
		if out, err := c.Query(ctx, q, ""); !errors.Is(err, ErrResponseTooLarge) || out != nil {
			t.Errorf("%s: %d bytes, %v; want ErrResponseTooLarge", q, len(out), err)
		}
	}
	var se *ServerError
	if _, err := c.Query(ctx, "late", ""); !errors.As(err, &se) || se.Code != "241" ||
		!strings.HasSuffix(se.Msg, "Memory limit exceeded") || len(se.Msg) > errorMessageBytes+len("…") {
		t.Errorf("a long answer ending with an exception: %v", err)
	}
}

// secretURLs hold a password where none is allowed, or do not parse.
var secretURLs = []string{
	"ftp://flowzero:s3cret@ch.example:8123",     // wrong scheme
	"ftp://ch.example:8123/?password=s3cret",    // wrong scheme, password in the query
	"http://flowzero:s3cret%zz@ch.example:8123", // does not parse
	"https://flowzero:s3cret@ch.example:8443",   // credentials in the URL
	"https://ch.example:8443/?user=flowzero&password=s3cret",
	"https://ch.example:8443/?password=s3cret",
	"https://ch.example:8443/?user=s3cret",
	"http:/flowzero:s3cret@ch.example:8123", // one slash: no host, the rest is a path
	"flowzero:s3cret@ch.example:8123",       // no scheme: an opaque URL
}

// TestHTTPErrorsHideSecrets checks that the errors about a server URL name the key and never
// quote the password it holds, and that a failed request does not quote the URL's query.
func TestHTTPErrorsHideSecrets(t *testing.T) {
	const secret = "s3cret"
	for _, u := range secretURLs {
		cfg := DefaultHTTPConfiguration()
		cfg.URL = u
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "url: ") || strings.Contains(err.Error(), secret) {
			t.Errorf("Validate(%s): %v", u, err)
		}
		if _, err := NewHTTPClient(cfg); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("NewHTTPClient(%s): %v", u, err)
		}
	}
	// The query parameter holding credentials is named, so that it can be found.
	cfg := DefaultHTTPConfiguration()
	cfg.URL = "http://ch.example:8123/?database=flowzero&password=" + secret
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `"password" query parameter`) ||
		!strings.Contains(err.Error(), "clickhouse.password") {
		t.Errorf("password in the query: %v", err)
	}

	// A request that fails quotes no query, whatever clickhouse.url holds (a client made
	// before the parameters were refused, or another parameter that is a secret).
	base, err := url.Parse("http://127.0.0.1:1/?password=" + secret + "&user=flowzero&quota_key=" + secret)
	if err != nil {
		t.Fatal(err)
	}
	c := &HTTPClient{base: base, maxBytes: 1 << 20, client: &http.Client{Timeout: 5 * time.Second}}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Exec":   c.Exec(ctx, "SELECT 1"),
		"Insert": c.Insert(ctx, "INSERT INTO t FORMAT Native", strings.NewReader("")),
	} {
		if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "?") ||
			!strings.Contains(err.Error(), "http://127.0.0.1:1/") {
			t.Errorf("%s against a closed port: %v", name, err)
		}
	}
}
