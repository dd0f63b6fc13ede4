// Package httpservertest holds test helpers for the servers built by httpserver.
package httpservertest

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// DribbleBody sends on conn a POST to path announcing a body of 1000 bytes, then sends it
// one byte every 20 ms (20 s in all) until done is closed. The test fails when done is not
// closed within 10 s: the server did not give up on the slow body.
func DribbleBody(t testing.TB, conn net.Conn, path string, done <-chan struct{}) {
	t.Helper()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(10 * time.Second)
	for {
		select {
		case <-done:
			return
		case <-giveUp:
			t.Fatal("the server is still reading the slow body after 10 s")
		case <-tick.C:
			conn.Write([]byte{'x'}) // fails once the server has closed the connection
		}
	}
}
