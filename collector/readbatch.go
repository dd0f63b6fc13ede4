package collector

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readBatch is the most datagrams a worker reads per system call.
const readBatch = 16

// maxDatagram is the largest UDP payload, so no datagram is truncated: 65,535 bytes less the
// UDP header over IPv6, whose length field leaves out its own header (65,507 over IPv4).
const maxDatagram = 65535 - 8

// batchReader reads up to readBatch datagrams of a socket per recvmmsg(2) into buffers
// allocated once, through the socket's RawConn so that the Go poller waits for data and the
// read deadline applies as with ReadMsgUDP. At low rates a read returns one datagram; when
// the worker falls behind, one system call and one wake-up serve several.
type batchReader struct {
	conn   *net.UDPConn
	rc     syscall.RawConn
	readFn func(fd uintptr) bool // r.read bound once: a read allocates no closure
	msgs   [readBatch]unix.Mmsghdr
	iovs   [readBatch]unix.Iovec
	names  [readBatch][unix.SizeofSockaddrInet6]byte
	oobs   [readBatch][64]byte // SO_RXQ_OVFL (24 bytes) and SO_TIMESTAMPNS (32)
	bufs   [readBatch][]byte
	n      int
	errno  syscall.Errno
}

func newBatchReader(conn *net.UDPConn) (*batchReader, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &batchReader{conn: conn, rc: rc}
	r.readFn = r.read
	for i := range r.msgs {
		r.bufs[i] = make([]byte, maxDatagram)
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(len(r.bufs[i]))
		h := &r.msgs[i].Hdr
		h.Name = &r.names[i][0]
		h.Iov = &r.iovs[i]
		h.Iovlen = 1
		h.Control = &r.oobs[i][0]
	}
	return r, nil
}

// Read waits for datagrams and reads what the socket holds, up to readBatch; it returns how
// many. The error is the socket's (os.ErrDeadlineExceeded at the read deadline, net.ErrClosed
// once closed, or the system call's).
func (r *batchReader) Read() (int, error) {
	r.n, r.errno = 0, 0
	if err := r.rc.Read(r.readFn); err != nil {
		return 0, err
	}
	if r.errno != 0 {
		return 0, r.errno
	}
	return r.n, nil
}

// read is the RawConn callback: false asks the poller to wait for the socket to be readable.
func (r *batchReader) read(fd uintptr) bool {
	for i := range r.msgs {
		h := &r.msgs[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.SetControllen(len(r.oobs[i]))
		h.Flags = 0
		r.msgs[i].Len = 0
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.msgs[0])), readBatch, 0, 0, 0)
		switch errno {
		case 0:
			r.n = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.errno = errno
		return true
	}
}

// datagramReader is what a worker reads: a UDP socket's batchReader or an AF_PACKET ring.
type datagramReader interface {
	// Read waits for datagrams (up to the read deadline) and returns how many it read.
	Read() (int, error)
	// Datagram is the i-th datagram of the last Read (valid until the next Read), its source
	// and what the kernel said of it.
	Datagram(i int) (payload []byte, from netip.AddrPort, ctl control)
	SetReadDeadline(t time.Time) error
	Close() error
}

// Datagram is the i-th datagram of the last Read, its source and its control messages.
func (r *batchReader) Datagram(i int) ([]byte, netip.AddrPort, control) {
	return r.Payload(i), r.From(i), socketControl(r.Control(i))
}

// SetReadDeadline bounds the wait of the next Read.
func (r *batchReader) SetReadDeadline(t time.Time) error { return r.conn.SetReadDeadline(t) }

// Close closes the socket.
func (r *batchReader) Close() error { return r.conn.Close() }

// Payload is the i-th datagram of the last Read; it is valid until the next Read.
func (r *batchReader) Payload(i int) []byte { return r.bufs[i][:r.msgs[i].Len] }

// Control is the i-th datagram's control messages.
func (r *batchReader) Control(i int) []byte { return r.oobs[i][:r.msgs[i].Hdr.Controllen] }

// From is the i-th datagram's source, IPv4 unmapped (the zero AddrPort for an unknown family).
func (r *batchReader) From(i int) netip.AddrPort {
	sa := &r.names[i]
	port := binary.BigEndian.Uint16(sa[2:4])
	switch binary.NativeEndian.Uint16(sa[0:2]) {
	case unix.AF_INET: // struct sockaddr_in: family, port, address
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port)
	case unix.AF_INET6: // struct sockaddr_in6: family, port, flow info, address, scope
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(sa[8:24])).Unmap(), port)
	}
	return netip.AddrPort{}
}
