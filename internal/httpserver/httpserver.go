// Package httpserver builds flowzero's HTTP servers (the collector's metrics and API, the
// capture agent's metrics), so that every listener gets the same timeouts and guards.
//
// A client that sends its request slowly (a body at one byte every few seconds) must not
// hold a connection and a goroutine forever: the whole request has a deadline, and so has
// an idle kept-alive connection. There is no write timeout, as CPU profiles and traces
// stream for as long as they are asked to; the read timeout does not cut them either, as
// net/http lifts the read deadline once the request is read.
//
// A server bound to a loopback address only answers requests whose Host is localhost or a
// loopback address: otherwise a web page the operator opens could reach it through a DNS
// name that the page's owner re-points at 127.0.0.1 (DNS rebinding) and read its answers.
package httpserver

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Timeouts bound how long a client may take.
type Timeouts struct {
	// ReadHeader bounds the request line and headers.
	ReadHeader time.Duration
	// Read bounds the whole request, body included.
	Read time.Duration
	// Idle bounds the wait for the next request on a kept-alive connection.
	Idle time.Duration
}

// DefaultTimeouts are the timeouts of every flowzero HTTP server.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Idle: 2 * time.Minute}

// New returns the server for h on ln (the caller runs Serve(ln)). When ln is bound to a
// loopback address, requests with another Host are refused (403) and counted in
// badHost, which may be nil.
func New(ln net.Listener, h http.Handler, t Timeouts, badHost prometheus.Counter) *http.Server {
	if isLoopback(ln.Addr()) {
		h = loopbackHostOnly(h, badHost)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		IdleTimeout:       t.Idle,
	}
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ok && ip.Unmap().IsLoopback()
}

// loopbackHostOnly refuses requests whose Host is neither localhost nor a loopback address.
// The port is not checked, so that a tunnel to another local port (ssh -L) still works.
func loopbackHostOnly(h http.Handler, badHost prometheus.Counter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			if badHost != nil {
				badHost.Inc()
			}
			http.Error(w, "this server is bound to loopback: address it as localhost or by a loopback address", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine without going through
// DNS. An empty Host (HTTP/1.0) comes from no browser and is accepted.
func loopbackHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
