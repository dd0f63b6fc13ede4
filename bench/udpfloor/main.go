// Command udpfloor is the floor of an inlet's CPU per datagram: it receives UDP datagrams as
// flowzero's collector does (SO_REUSEPORT sockets, one worker each, recvmmsg(2) of up to 16
// datagrams through the Go poller, SO_RXQ_OVFL and SO_TIMESTAMPNS) and drops them. Whatever
// an inlet spends per datagram above what this process spends at the same rate is the
// inlet's own work: packing records, the Kafka producer and its connections.
// scripts/bench-collector-split.sh runs it as the mode "floor" (or "floor:gather=1ms",
// sleeping like the inlet's batch-wait after a read that did not fill its batch), and reads
// flowzero_collector_datagrams_total from its /metrics as it does from a collector's.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const readBatch = 16

func main() {
	listen := flag.String("listen", "127.0.0.1:2055", "UDP address to receive on")
	httpAddr := flag.String("http", "127.0.0.1:8080", "address of the /metrics listener")
	workers := flag.Int("workers", 2, "SO_REUSEPORT sockets, one worker each")
	rcvbuf := flag.Int("receive-buffer", 32<<20, "socket receive buffer in bytes")
	gather := flag.Duration("gather", 0, "sleep after a read of fewer than 16 datagrams (0: none)")
	blocking := flag.Bool("blocking", false, "read with blocking recvmmsg(2) calls on a locked OS thread instead of the Go poller")
	ring := flag.String("afpacket", "", "read from an AF_PACKET ring on this interface instead of UDP sockets")
	blockTimeout := flag.Duration("block-timeout", 5*time.Millisecond, "with -afpacket: retire a block after this long")
	produce := flag.String("produce", "", "with -afpacket: write the datagrams to this Kafka broker, packed as the inlet does, with a minimal producer")
	topic := flag.String("topic", "udpfloor", "with -produce: the topic, created with -partitions")
	partitions := flag.Int("partitions", 8, "with -produce: partitions of the topic, one per produce request in turn")
	linger := flag.Duration("linger", 5*time.Millisecond, "with -produce: how long a produce request stays open")
	crcByRecord := flag.Bool("crc-by-record", false, "with -produce: compute the CRC32C a record at a time as each closes, not over the request at flush")
	flag.Parse()

	var datagrams, bytes, delivered atomic.Uint64
	var prod *producer
	if *produce != "" {
		if *ring == "" {
			log.Fatal("-produce needs -afpacket")
		}
		prod = newProducer(*produce, *topic, *partitions, *linger, 1<<20-64<<10, &delivered)
		prod.crcByRecord = *crcByRecord
	}
	if *ring != "" {
		_, p, err := net.SplitHostPort(*listen)
		if err != nil {
			log.Fatal(err)
		}
		port, err := net.LookupPort("udp", p)
		if err != nil {
			log.Fatal(err)
		}
		defer dropAll(*listen).Close()
		go receiveRing(*ring, uint16(port), *blockTimeout, 0, &datagrams, &bytes, prod)
		*workers = 0
	}
	for range *workers {
		conn, err := listenReusePort(*listen, *rcvbuf)
		if err != nil {
			log.Fatal(err)
		}
		if *blocking {
			go receiveBlocking(conn, &datagrams, &bytes)
		} else {
			go receive(conn, *gather, &datagrams, &bytes)
		}
	}
	http.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "flowzero_collector_datagrams_total %d\nflowzero_collector_bytes_total %d\nflowzero_collector_kernel_drops_total 0\n",
			datagrams.Load(), bytes.Load())
		if prod != nil {
			fmt.Fprintf(w, "flowzero_inlet_datagrams_sent_total %d\nflowzero_inlet_datagrams_delivered_total %d\nflowzero_inlet_datagrams_dropped_total 0\n",
				datagrams.Load(), delivered.Load())
		}
	})
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	go func() { log.Fatal(http.ListenAndServe(*httpAddr, nil)) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
}

func listenReusePort(addr string, rcvbuf int) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			for _, o := range [][2]int{{unix.SO_REUSEPORT, 1}, {unix.SO_RXQ_OVFL, 1}, {unix.SO_TIMESTAMPNS, 1}, {unix.SO_RCVBUFFORCE, rcvbuf}} {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], o[1]); serr != nil {
					if o[0] == unix.SO_RCVBUFFORCE {
						serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
					}
					if serr != nil {
						return
					}
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// batch is what one recvmmsg(2) reads into: up to readBatch datagrams, their sources and
// their control messages, in buffers allocated once.
type batch struct {
	msgs  [readBatch]unix.Mmsghdr
	iovs  [readBatch]unix.Iovec
	names [readBatch][unix.SizeofSockaddrInet6]byte
	oobs  [readBatch][64]byte
}

func newBatch() *batch {
	b := &batch{}
	for i := range b.msgs {
		buf := make([]byte, 65527)
		b.iovs[i].Base = &buf[0]
		b.iovs[i].SetLen(len(buf))
		h := &b.msgs[i].Hdr
		h.Name = &b.names[i][0]
		h.Iov = &b.iovs[i]
		h.Iovlen = 1
		h.Control = &b.oobs[i][0]
	}
	return b
}

// recv calls recvmmsg(2) once on fd with flags, after resetting the lengths it overwrites.
func (b *batch) recv(fd uintptr, flags int) (int, syscall.Errno) {
	for i := range b.msgs {
		h := &b.msgs[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.SetControllen(len(b.oobs[i]))
		b.msgs[i].Len = 0
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.msgs[0])), readBatch, uintptr(flags), 0, 0)
	return int(n), errno
}

// count adds the n datagrams read to the counters.
func (b *batch) count(n int, datagrams, bytes *atomic.Uint64) {
	total := 0
	for i := range n {
		total += int(b.msgs[i].Len)
	}
	datagrams.Add(uint64(n))
	bytes.Add(uint64(total))
}

// receive reads as collector/readbatch.go does (through the poller), and drops what it reads.
func receive(conn *net.UDPConn, gather time.Duration, datagrams, bytes *atomic.Uint64) {
	rc, err := conn.SyscallConn()
	if err != nil {
		log.Fatal(err)
	}
	b := newBatch()
	n := 0
	read := func(fd uintptr) bool {
		for {
			r, errno := b.recv(fd, 0)
			switch errno {
			case 0:
				n = r
				return true
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			}
			log.Fatal(errno)
		}
	}
	for {
		if err := rc.Read(read); err != nil {
			log.Fatal(err)
		}
		b.count(n, datagrams, bytes)
		if n < readBatch && gather > 0 {
			time.Sleep(gather)
		}
	}
}

// receiveBlocking reads with recvmmsg(2) in blocking mode (MSG_WAITFORONE: it returns once at
// least one datagram is there) on a thread of its own: the kernel wakes the thread directly,
// without the poller's epoll_wait and the hand-off to the goroutine's thread.
func receiveBlocking(conn *net.UDPConn, datagrams, bytes *atomic.Uint64) {
	runtime.LockOSThread()
	rc, err := conn.SyscallConn()
	if err != nil {
		log.Fatal(err)
	}
	var fd uintptr
	if cerr := rc.Control(func(f uintptr) { fd = f; err = unix.SetNonblock(int(f), false) }); cerr != nil {
		log.Fatal(cerr)
	}
	if err != nil {
		log.Fatal(err)
	}
	b := newBatch()
	for {
		n, errno := b.recv(fd, unix.MSG_WAITFORONE)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			log.Fatal(errno)
		}
		b.count(n, datagrams, bytes)
	}
}
