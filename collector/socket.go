package collector

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// openSockets binds n UDP sockets to addr with SO_REUSEPORT, so the kernel spreads exporters
// over them, and asks each for SO_RXQ_OVFL, so every datagram carries the socket's count of
// datagrams the kernel dropped for lack of buffer. With port 0 the first socket picks the port
// and the others join it. SO_TIMESTAMPNS gives each datagram the time the kernel received it,
// since a worker reads several at once. It returns the receive buffer size the kernel granted.
// The sockets take the family of addr's host (listenNetwork).
func openSockets(addr string, n, rcvbuf int) ([]*net.UDPConn, int, error) {
	network := listenNetwork(addr)
	// The kernel may give a socket with SO_REUSEPORT that binds port 0 a port that another
	// socket of the same user holds with SO_REUSEPORT (it could share it): the first socket
	// binds port 0 without it, so that its port is free, and takes it once bound.
	_, port, _ := net.SplitHostPort(addr)
	reuseAfterBind := port == "0"
	var granted int
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			s := int(fd)
			if !reuseAfterBind {
				if serr = setReusePort(s); serr != nil {
					return
				}
			}
			if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); serr != nil {
				serr = fmt.Errorf("SO_RXQ_OVFL: %w", serr)
				return
			}
			if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); serr != nil {
				serr = fmt.Errorf("SO_TIMESTAMPNS: %w", serr)
				return
			}
			if rcvbuf > 0 {
				// SO_RCVBUFFORCE ignores rmem_max but needs CAP_NET_ADMIN.
				if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
					_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
				}
			}
			if v, err := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
				granted = v / 2 // the kernel reports twice the usable size (bookkeeping overhead)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	var conns []*net.UDPConn
	for i := range n {
		pc, err := lc.ListenPacket(context.Background(), network, addr)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, 0, fmt.Errorf("listen %s (socket %d of %d): %w", addr, i+1, n, err)
		}
		conn := pc.(*net.UDPConn)
		conns = append(conns, conn)
		if i == 0 {
			if reuseAfterBind {
				if err := rawControl(conn, setReusePort); err != nil {
					conn.Close()
					return nil, 0, fmt.Errorf("listen %s: %w", addr, err)
				}
				reuseAfterBind = false
			}
			// Join the port the first socket got (matters for port 0 in tests).
			addr = conn.LocalAddr().String()
		}
	}
	return conns, granted, nil
}

func setReusePort(fd int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fmt.Errorf("SO_REUSEPORT: %w", err)
	}
	return nil
}

// rawControl runs fn on conn's file descriptor.
func rawControl(conn *net.UDPConn, fn func(fd int) error) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// listenNetwork is the network a listener's sockets are bound in: udp4 for an IPv4 host,
// udp6 for an IPv6 one, udp (dual-stack) for an empty host or [::]. Go binds 0.0.0.0 in
// network udp as a dual-stack [::] socket, which would take IPv6 datagrams too.
func listenNetwork(addr string) string {
	if bothFamilies(addr) {
		return "udp"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "udp"
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Unmap().Is4() {
		return "udp4"
	}
	return "udp6"
}

// socketControl reads the control messages of a datagram without allocating
// (syscall.ParseSocketControlMessage allocates): the SO_RXQ_OVFL counter of kernel drops and
// the SO_TIMESTAMPNS receive time (the machine's clock, Unix seconds and nanoseconds), each
// with whether it was there.
func socketControl(oob []byte) (c control) {
	const hdr = unix.SizeofCmsghdr
	for len(oob) >= hdr {
		// struct cmsghdr { size_t cmsg_len; int cmsg_level; int cmsg_type; } on 64-bit Linux.
		l := int(binary.NativeEndian.Uint64(oob[0:8]))
		level := int32(binary.NativeEndian.Uint32(oob[8:12]))
		typ := int32(binary.NativeEndian.Uint32(oob[12:16]))
		if l < hdr || l > len(oob) {
			return c
		}
		if level == unix.SOL_SOCKET {
			switch {
			case typ == unix.SO_RXQ_OVFL && l >= hdr+4:
				c.drops, c.hasDrops = binary.NativeEndian.Uint32(oob[hdr:hdr+4]), true
			case typ == unix.SCM_TIMESTAMPNS && l >= hdr+16: // struct timespec
				c.sec = int64(binary.NativeEndian.Uint64(oob[hdr : hdr+8]))
				c.nsec = int64(binary.NativeEndian.Uint64(oob[hdr+8 : hdr+16]))
				c.hasTime = true
			}
		}
		next := (l + 7) &^ 7 // CMSG_ALIGN
		if next > len(oob) {
			return c
		}
		oob = oob[next:]
	}
	return c
}

// control is what socketControl reads.
type control struct {
	drops     uint32
	hasDrops  bool
	sec, nsec int64
	hasTime   bool
}

// socketInode returns the inode of a socket, its key in /proc/net/udp.
func socketInode(conn *net.UDPConn) (uint64, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil {
		return 0, err
	}
	return st.Ino, serr
}

// udpSocket is one UDP socket of this process's network namespace, as /proc/net/udp and
// /proc/net/udp6 list them.
type udpSocket struct {
	local netip.AddrPort
	uid   uint32
	inode uint64
	drops uint32
}

// procUDPSockets reads every UDP socket of the network namespace.
func procUDPSockets() []udpSocket {
	var out []udpSocket
	for _, name := range []string{"/proc/self/net/udp", "/proc/self/net/udp6"} {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
			if i == 0 || len(f) < 13 {
				continue
			}
			local, ok := parseProcAddr(f[1])
			uid, err0 := strconv.ParseUint(f[7], 10, 32)
			ino, err1 := strconv.ParseUint(f[9], 10, 64)
			drops, err2 := strconv.ParseUint(f[12], 10, 32)
			if ok && err0 == nil && err1 == nil && err2 == nil {
				out = append(out, udpSocket{local: local, uid: uint32(uid), inode: ino, drops: uint32(drops)})
			}
		}
	}
	return out
}

// parseProcAddr reads an address of /proc/net/udp{,6}: the address as 32-bit words in hex,
// each printed from the machine's byte order, a colon, the port in hex.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	if !ok || (len(hexAddr) != 8 && len(hexAddr) != 32) {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var b [16]byte
	for w := 0; w < len(hexAddr)/8; w++ {
		v, err := strconv.ParseUint(hexAddr[8*w:8*w+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, false
		}
		binary.NativeEndian.PutUint32(b[4*w:], uint32(v))
	}
	if len(hexAddr) == 8 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), uint16(port)), true
	}
	return netip.AddrPortFrom(netip.AddrFrom16(b), uint16(port)), true
}

// socketOwners finds the processes holding the sockets of inodes, from their descriptors
// in /proc/PID/fd (those of the processes this one may read: its user's, or all as root),
// and describes each as "pid 1234 (flowzero)".
func socketOwners(inodes map[uint64]bool) map[uint64][]string {
	out := map[uint64][]string{}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir("/proc/" + p.Name() + "/fd")
		if err != nil {
			continue
		}
		var comm string
		for _, fd := range fds {
			link, err := os.Readlink("/proc/" + p.Name() + "/fd/" + fd.Name())
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
			if err != nil || !inodes[ino] {
				continue
			}
			if comm == "" {
				c, _ := os.ReadFile("/proc/" + p.Name() + "/comm")
				comm = strings.TrimSpace(string(c))
			}
			who := fmt.Sprintf("pid %d (%s)", pid, comm)
			if pid == os.Getpid() {
				who += ", this process"
			}
			if l := out[ino]; len(l) == 0 || l[len(l)-1] != who {
				out[ino] = append(l, who)
			}
		}
	}
	return out
}

// procUDPDrops reads the drop counter of every UDP socket of this process's network
// namespace from /proc/net/udp and /proc/net/udp6, by inode. SO_RXQ_OVFL only reports drops
// along with a received datagram; this also sees the drops after the last one.
func procUDPDrops() map[uint64]uint32 {
	out := map[uint64]uint32{}
	for _, s := range procUDPSockets() {
		out[s.inode] = s.drops
	}
	return out
}
