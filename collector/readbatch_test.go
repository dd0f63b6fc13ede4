package collector

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"flowzero/internal/testutil"
)

// queued opens a socket as the collector does and sends it n datagrams of different sizes
// from src, which stay queued until read.
func queued(t testing.TB, n int) (*net.UDPConn, *net.UDPConn, [][]byte) {
	t.Helper()
	conns, _, err := openSockets("127.0.0.1:0", 1, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conns[0].Close() })
	src, err := net.DialUDP("udp", nil, conns[0].LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	var sent [][]byte
	for i := range n {
		p := bytes.Repeat([]byte{byte(i)}, 1+i*37%1400)
		if _, err := src.Write(p); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, p)
	}
	return conns[0], src, sent
}

// TestBatchReader: the datagrams queued in a socket are read in batches of up to readBatch,
// each with its payload, source and its own kernel receive time, in order.
func TestBatchReader(t *testing.T) {
	before := time.Now()
	conn, src, sent := queued(t, 2*readBatch+5)
	r, err := newBatchReader(conn)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got [][]byte
	var last time.Time
	for len(got) < len(sent) {
		n, err := r.Read()
		readAt := time.Now()
		if err != nil {
			t.Fatalf("after %d datagrams: %v", len(got), err)
		}
		if n < 1 || n > readBatch {
			t.Fatalf("read %d datagrams", n)
		}
		for i := range n {
			got = append(got, bytes.Clone(r.Payload(i)))
			if from := r.From(i); from.String() != src.LocalAddr().String() {
				t.Errorf("datagram %d from %s, sent from %s", len(got), from, src.LocalAddr())
			}
			ctl := socketControl(r.Control(i))
			at := time.Unix(ctl.sec, ctl.nsec)
			// On loopback the kernel may take the datagram after the sender's write returned.
			if !ctl.hasTime || at.Before(before) || at.After(readAt) || at.Before(last) {
				t.Errorf("datagram %d received at %s (sent after %s, read at %s, previous %s)", len(got), at, before, readAt, last)
			}
			last = at
		}
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("datagram %d: %d bytes, sent %d", i, len(got[i]), len(sent[i]))
		}
	}
	// A deadline ends the wait as with ReadMsgUDP.
	conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if n, err := r.Read(); n != 0 || !isDeadline(err) {
		t.Fatalf("idle socket: %d datagrams, %v", n, err)
	}
}

func isDeadline(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestBatchReaderKernelDrops: the SO_RXQ_OVFL count a batch's datagrams carry is the
// socket's count of kernel drops, as /proc/net/udp shows it.
func TestBatchReaderKernelDrops(t *testing.T) {
	conns, _, err := openSockets("127.0.0.1:0", 1, 1) // the kernel's minimum buffer
	if err != nil {
		t.Fatal(err)
	}
	conn := conns[0]
	defer conn.Close()
	src, err := net.DialUDP("udp", nil, conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ino, err := socketInode(conn)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newBatchReader(conn)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 1000)
	for range 200 {
		src.Write(p)
	}
	readAll := func() (n int, drops uint32) {
		for {
			conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			k, err := r.Read()
			if err != nil {
				if !isDeadline(err) {
					t.Fatal(err)
				}
				return n, drops
			}
			for i := range k {
				if c := socketControl(r.Control(i)); c.hasDrops {
					drops = max(drops, c.drops)
				}
			}
			n += k
		}
	}
	n, _ := readAll()
	src.Write(p) // carries the count of every drop so far
	last, drops := readAll()
	proc := procUDPDrops()[ino]
	if last != 1 || proc == 0 || drops != proc || uint32(n)+proc != 200 {
		t.Fatalf("read %d then %d datagrams, SO_RXQ_OVFL %d, /proc %d (200 sent before the last)", n, last, drops, proc)
	}
}

// TestWorkerForwardBatch: a BatchForwarder gets each worker's datagrams through its own
// ForwardBatch and a Send after each read; the datagrams of a read keep their receive times.
func TestWorkerForwardBatch(t *testing.T) {
	fw := &batchingForwarder{}
	start := testutil.Now()
	c, _, _ := startTestCollector(t, nil, func(d *Dependencies) {
		d.Forward = fw
		d.Decoders = nil
	}, nil)
	defer c.Stop()
	addr := c.ListenAddrs()[0]
	for i := range 40 {
		send(t, addr, fmt.Sprintf("%d:1", i))
	}
	testutil.WaitUntil(t, "40 datagrams sent", func() bool { return fw.sentCount() == 40 })
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.direct != 0 {
		t.Errorf("%d datagrams went through Forward", fw.direct)
	}
	for i, at := range fw.times {
		if at.Before(start.Add(-time.Second)) || at.After(testutil.Now()) {
			t.Errorf("datagram %d received at %s (test started %s)", i, at, start)
		}
	}
}

// TestWorkerGather: while its ForwardBatch holds datagrams not due yet, a worker lets the next
// ones gather in the socket and sends them together when due, even when no more come.
func TestWorkerGather(t *testing.T) {
	fw := &batchingForwarder{wait: 100 * time.Millisecond}
	c, _, _ := startTestCollector(t, func(cfg *Configuration) { cfg.Listeners[0].Workers = 1 }, func(d *Dependencies) {
		d.Forward = fw
		d.Decoders = nil
	}, nil)
	defer c.Stop()
	addr := c.ListenAddrs()[0]
	start := time.Now()
	for i := range 40 {
		send(t, addr, fmt.Sprintf("%d:1", i))
	}
	// Once due, the batch goes after each read of up to readBatch datagrams: 40 gathered
	// datagrams take 3 reads, one more if the first read came before the others arrived, and
	// one more per wait the 40 sends themselves took on a loaded machine. Without gathering,
	// a worker woken per datagram would send up to 40 times.
	sending := time.Since(start)
	testutil.WaitUntil(t, "40 datagrams sent", func() bool { return fw.sentCount() == 40 })
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if most := (40+readBatch-1)/readBatch + 1 + int(sending/fw.wait); fw.sends > most || time.Since(start) < fw.wait {
		t.Errorf("40 datagrams sent in %s went in %d batches (at most %d) after %s (wait %s)", sending, fw.sends, most, time.Since(start), fw.wait)
	}
}

// batchingForwarder records what its batches get.
type batchingForwarder struct {
	mu            sync.Mutex
	direct, sends int
	wait          time.Duration
	times         []time.Time
	sent          int
}

func (f *batchingForwarder) Forward([]byte, netip.AddrPort, time.Time, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.direct++
}

func (f *batchingForwarder) NewBatch() ForwardBatch { return &recordingBatch{f: f, wait: f.wait} }

func (f *batchingForwarder) sentCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}

type recordingBatch struct {
	f    *batchingForwarder
	held []time.Time
	wait time.Duration // Due: wait after the first datagram held
}

func (b *recordingBatch) Add(_ []byte, _ netip.AddrPort, received time.Time, _ string) {
	b.held = append(b.held, received)
}

func (b *recordingBatch) Due() time.Time {
	if b.wait == 0 || len(b.held) == 0 {
		return time.Time{}
	}
	return b.held[0].Add(b.wait)
}

func (b *recordingBatch) Send(now time.Time, all bool) {
	if len(b.held) == 0 || !all && b.wait > 0 && now.Before(b.Due()) {
		return
	}
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	b.f.times = append(b.f.times, b.held...)
	b.f.sent += len(b.held)
	b.f.sends++
	b.held = b.held[:0]
}

// BenchmarkSocketRead reads datagrams of 1,240 bytes (16 NetFlow v9 flows) queued 16 at a
// time in a socket, one per recvmsg (ReadMsgUDPAddrPort, as the workers did) or up to
// readBatch per recvmmsg (batchReader): CPU per datagram of the thread, sending them
// included (the same in both), and allocations.
func BenchmarkSocketRead(b *testing.B) {
	for _, mode := range []string{"recvmsg", "recvmmsg"} {
		b.Run(mode, func(b *testing.B) {
			conn, src, _ := queued(b, 0)
			r, err := newBatchReader(conn)
			if err != nil {
				b.Fatal(err)
			}
			buf, oob := make([]byte, maxDatagram), make([]byte, 64)
			p := make([]byte, 1240)
			var got int
			cpu := testutil.StartCPU(b)
			for i := 0; i < b.N; i += readBatch {
				for range readBatch {
					src.Write(p)
				}
				for n := 0; n < readBatch; {
					if mode == "recvmsg" {
						k, oobn, _, from, err := conn.ReadMsgUDPAddrPort(buf, oob)
						if err != nil {
							b.Fatal(err)
						}
						socketControl(oob[:oobn])
						got += k + int(from.Port())
						n++
						continue
					}
					k, err := r.Read()
					if err != nil {
						b.Fatal(err)
					}
					for j := range k {
						socketControl(r.Control(j))
						got += len(r.Payload(j)) + int(r.From(j).Port())
					}
					n += k
				}
			}
			cpu.Stop(b)
			if got == 0 {
				b.Fatal("nothing read")
			}
		})
	}
}

// TestBatchReaderLargest: the largest UDP payloads, 65,507 bytes over IPv4 and 65,527 over
// IPv6, are read whole, not truncated.
func TestBatchReaderLargest(t *testing.T) {
	for _, tc := range []struct {
		addr string
		size int
	}{{"127.0.0.1:0", 65507}, {"[::1]:0", 65527}} {
		conns, _, err := openSockets(tc.addr, 1, 4<<20)
		if err != nil {
			t.Skipf("%s: %v", tc.addr, err) // no IPv6 loopback on this machine
		}
		defer conns[0].Close()
		src, err := net.DialUDP("udp", nil, conns[0].LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		p := bytes.Repeat([]byte{7}, tc.size)
		if _, err := src.Write(p); err != nil {
			t.Fatalf("%s: sending %d bytes: %v", tc.addr, tc.size, err)
		}
		r, err := newBatchReader(conns[0])
		if err != nil {
			t.Fatal(err)
		}
		conns[0].SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := r.Read()
		if err != nil || n != 1 {
			t.Fatalf("%s: read %d datagrams, %v", tc.addr, n, err)
		}
		if got := r.Payload(0); !bytes.Equal(got, p) {
			t.Errorf("%s: read %d bytes of a datagram of %d", tc.addr, len(got), len(p))
		}
	}
}
