package httpserver

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRecover: a handler's panic answers 500, counted and logged with its stack, on a real
// server that keeps serving; http.ErrAbortHandler still aborts the response.
func TestRecover(t *testing.T) {
	panics := prometheus.NewCounter(prometheus.CounterOpts{Name: "panics"})
	var logs bytes.Buffer
	mux := http.NewServeMux()
	mux.HandleFunc("/panic", func(http.ResponseWriter, *http.Request) {
		var m map[int]func()
		m[1]() // a nil function, as a missing state migration was
	})
	mux.HandleFunc("/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	srv := httptest.NewServer(Recover(mux, panics, slog.New(slog.NewTextHandler(&logs, nil))))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/panic")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "internal error") {
		t.Errorf("panic: %d %q, want 500", resp.StatusCode, body)
	}
	if n := promtest.ToFloat64(panics); n != 1 {
		t.Errorf("panics = %v, want 1", n)
	}
	if !strings.Contains(logs.String(), "path=/panic") || !strings.Contains(logs.String(), "recover_test.go") {
		t.Errorf("log: %s", logs.String())
	}
	if _, err := http.Get(srv.URL + "/abort"); err == nil {
		t.Error("ErrAbortHandler: the response was not aborted")
	}
	if n := promtest.ToFloat64(panics); n != 1 {
		t.Errorf("panics after an abort = %v, want 1", n)
	}
	resp, err = http.Get(srv.URL + "/ok")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after the panics: %v %v", resp, err)
	}
	resp.Body.Close()
}
