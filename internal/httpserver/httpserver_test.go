package httpserver

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/httpserver/httpservertest"
	flowtest "flowzero/internal/testutil"
)

// serve runs New on a loopback listener until the test ends and returns its address.
func serve(t *testing.T, h http.Handler, to Timeouts, badHost prometheus.Counter) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(ln, h, to, badHost)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestDefaultTimeouts: reads are bounded, writes are not (profiles stream for long).
func TestDefaultTimeouts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := New(ln, http.NotFoundHandler(), DefaultTimeouts, nil)
	if srv.ReadHeaderTimeout != 10*time.Second || srv.ReadTimeout != 30*time.Second ||
		srv.IdleTimeout != 2*time.Minute || srv.WriteTimeout != 0 {
		t.Fatalf("timeouts: header %v, read %v, idle %v, write %v", srv.ReadHeaderTimeout,
			srv.ReadTimeout, srv.IdleTimeout, srv.WriteTimeout)
	}
}

// TestSlowBodyIsCut: a body sent one byte at a time no longer holds the connection past
// the read timeout.
func TestSlowBodyIsCut(t *testing.T) {
	var bodyErr error
	done := make(chan struct{})
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, bodyErr = io.ReadAll(r.Body)
		close(done)
	}), Timeouts{ReadHeader: time.Second, Read: 300 * time.Millisecond, Idle: time.Second}, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	httpservertest.DribbleBody(t, conn, "/", done)
	if !errors.Is(bodyErr, os.ErrDeadlineExceeded) {
		t.Fatalf("reading the slow body: %v, want a deadline error", bodyErr)
	}
}

// TestIdleConnectionIsClosed: a kept-alive connection that sends nothing more is closed
// after the idle timeout, not after the (longer) read timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		Timeouts{ReadHeader: time.Minute, Read: time.Minute, Idle: 200 * time.Millisecond}, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v, want the server to close it (EOF)", err)
	}
}

// TestLongHandlerAnswers: a handler that runs longer than the read and idle timeouts (a CPU
// profile) keeps its request context and delivers its answer. The header's timeout, which
// ends before the handler starts, is long: a client slower than a short one to send its
// request would have had its connection closed.
func TestLongHandlerAnswers(t *testing.T) {
	const timeout = 200 * time.Millisecond
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			http.Error(w, "canceled", http.StatusServiceUnavailable)
		case <-time.After(5 * timeout):
			io.WriteString(w, "profile")
		}
	}), Timeouts{ReadHeader: flowtest.WaitTimeout, Read: timeout, Idle: timeout}, nil)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "profile" {
		t.Fatalf("long handler answered %q, %v; want \"profile\"", body, err)
	}
}

func TestLoopbackHost(t *testing.T) {
	badHost := prometheus.NewCounter(prometheus.CounterOpts{Name: "bad_host_total", Help: "test"})
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), DefaultTimeouts, badHost)
	for _, tc := range []struct {
		host string
		code int
	}{
		{"127.0.0.1:8080", 200},
		{"localhost:9000", 200}, // a tunnel to another port
		{"LOCALHOST", 200},
		{"[::1]:8080", 200},
		{"[::1]", 200},
		{"127.9.9.9", 200},
		{"attacker.example:8080", 403}, // a name re-pointed at 127.0.0.1
		{"attacker.example", 403},
		{"localhost.attacker.example", 403},
		{"192.0.2.1:8080", 403},
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("Host %q: status %d, want %d", tc.host, resp.StatusCode, tc.code)
		}
	}
	if got := testutil.ToFloat64(badHost); got != 4 {
		t.Errorf("bad Host counted %v times, want 4", got)
	}
	if !loopbackHost("") {
		t.Error("an empty Host (HTTP/1.0) is refused")
	}
	// Bound to every address, the server answers whatever Host the network uses for it.
	if isLoopback(&net.TCPAddr{IP: net.IPv6zero, Port: 8080}) || !isLoopback(&net.TCPAddr{IP: net.IPv6loopback}) {
		t.Error("isLoopback is wrong about [::] or [::1]")
	}
}
