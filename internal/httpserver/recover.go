package httpserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/lograte"
)

// Recover returns h answering 500 for a request whose handler panics, counted in panics and
// logged with the stack (at most a few lines a minute), instead of net/http's closed
// connection and a line on stderr. A panic with http.ErrAbortHandler (a handler giving up
// on a client) goes on as net/http expects.
func Recover(h http.Handler, panics prometheus.Counter, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	rate := lograte.New(5, time.Minute)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			panics.Inc()
			if ok, _ := rate.Allow(time.Now()); ok {
				log.Error("HTTP handler panicked", "method", r.Method, "path", r.URL.Path,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			}
			// When the handler had already written its header, this only ends the body.
			http.Error(w, "internal error: the handler failed (see the collector's log)", http.StatusInternalServerError)
		}()
		h.ServeHTTP(w, r)
	})
}
