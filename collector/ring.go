package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// A listener with `receive: af-packet` reads its datagrams from AF_PACKET TPACKET_V3 rings
// instead of UDP sockets: the kernel copies each datagram for the port into a block of a ring
// shared with the process, and a worker wakes up once per block (full, or retired after
// block-timeout) instead of once per few datagrams, with no system call per datagram. What a
// UDP socket's receive path checks is done here: IP and UDP checksums, lengths, the
// destination, fragments (IPv4 ones are reassembled by the kernel's fanout defragmentation).
// A UDP socket stays bound to the port, with a filter that drops everything, so that the
// kernel does not answer exporters with ICMP port unreachable.

// ringBlockSize is the size of a ring block: it holds the largest datagram (64 KiB) and
// many ordinary ones.
const ringBlockSize = 1 << 20

// Offsets in struct tpacket_block_desc (hdr.bh1) and struct tpacket3_hdr (linux/if_packet.h).
const (
	blockStatus     = 8
	blockNumPkts    = 12
	blockFirstPkt   = 16
	blockLen        = 20
	blockHeaderSize = 48

	pktNext    = 0
	pktSec     = 4
	pktNsec    = 8
	pktSnaplen = 12
	pktLen     = 16
	pktStatus  = 20
	pktMac     = 24
	pktNet     = 26
	pktVLANTCI = 32 // hv1.tp_vlan_tci
	pktHdrSize = 48
)

// Reasons a frame of the ring is not passed on (flowzero_collector_ring_errors_total).
const (
	ringTruncated = iota // captured shorter than received, or lengths past the frame
	ringMalformed        // IP or UDP header not valid
	ringChecksum         // IP header or UDP checksum wrong
	ringFragment         // an IP fragment not reassembled (IPv6, or IPv4 outside defragmentation)
	ringVLAN             // 802.1Q-tagged on the interface: for a VLAN device, or one the host lacks
	ringReasons
)

var ringReasonNames = [ringReasons]string{"truncated", "malformed", "checksum", "fragment", "vlan"}

// ringDatagram is one datagram of the block being read.
type ringDatagram struct {
	off, len  uint32 // of the UDP payload in the ring
	from      netip.AddrPort
	sec, nsec uint32
}

// ring is one AF_PACKET socket and its mapped ring, read by one worker.
type ring struct {
	f       *os.File // the packet socket, non-blocking, in the Go poller
	rc      syscall.RawConn
	mem     []byte
	blocks  int
	cur     int  // the block read next, or being read
	held    bool // block cur was returned by Read and is released at the next one
	readyFn func(fd uintptr) bool
	dgrams  []ringDatagram
	errs    [ringReasons]prometheus.Counter
	refused atomic.Uint64 // frames not passed on, every reason (for /healthz)
	drops   atomic.Uint64 // tp_drops, summed (the kernel resets them at each read)
}

// ringFilter returns the classic BPF program that takes, of the frames a SOCK_DGRAM packet
// socket sees (the network header first), the UDP datagrams for ap: received (not sent) by
// this host, to ap's address, IPv4 or IPv6 as it is. An unspecified address is refused: the
// ring sees every frame of the interface, routed ones too, and only the destination tells
// those addressed to this host. IPv6 first fragments are taken too, to be counted: they are
// not reassembled.
func ringFilter(ap netip.AddrPort) ([]bpf.RawInstruction, error) {
	const accept, drop = "accept", "drop"
	addr := ap.Addr().Unmap()
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil, fmt.Errorf("af-packet needs a specified address to take datagrams for, not %s", ap.Addr())
	}
	v4 := addr.Is4()
	v6 := !v4
	port := uint32(ap.Port())
	var p prog
	p.add(bpf.LoadExtension{Num: bpf.ExtType})
	p.jump(bpf.JumpGreaterThan, unix.PACKET_MULTICAST, drop, "") // host, broadcast, multicast
	p.add(bpf.LoadExtension{Num: bpf.ExtProto})
	if v4 {
		p.jump(bpf.JumpEqual, unix.ETH_P_IP, "v4", "")
	}
	if v6 {
		p.jump(bpf.JumpEqual, unix.ETH_P_IPV6, "v6", "")
	}
	p.add(bpf.RetConstant{Val: 0})
	if v4 {
		p.label("v4")
		p.add(bpf.LoadAbsolute{Off: 9, Size: 1})
		p.jump(bpf.JumpNotEqual, unix.IPPROTO_UDP, drop, "")
		b := addr.As4()
		p.add(bpf.LoadAbsolute{Off: 16, Size: 4})
		p.jump(bpf.JumpNotEqual, binary.BigEndian.Uint32(b[:]), drop, "")
		p.add(bpf.LoadAbsolute{Off: 6, Size: 2})
		p.jump(bpf.JumpBitsSet, 0x1fff, drop, "") // a later fragment: no UDP header
		p.add(bpf.LoadMemShift{Off: 0})
		p.add(bpf.LoadIndirect{Off: 2, Size: 2})
		p.jump(bpf.JumpEqual, port, accept, drop)
	}
	if v6 {
		p.label("v6")
		b := addr.As16()
		for i := 0; i < 16; i += 4 {
			p.add(bpf.LoadAbsolute{Off: uint32(24 + i), Size: 4})
			p.jump(bpf.JumpNotEqual, binary.BigEndian.Uint32(b[i:]), drop, "")
		}
		p.add(bpf.LoadAbsolute{Off: 6, Size: 1})
		p.jump(bpf.JumpEqual, unix.IPPROTO_UDP, "udp6", "")
		p.jump(bpf.JumpNotEqual, unix.IPPROTO_FRAGMENT, drop, "")
		p.add(bpf.LoadAbsolute{Off: 40, Size: 1}) // the fragment header's next header
		p.jump(bpf.JumpNotEqual, unix.IPPROTO_UDP, drop, "")
		p.add(bpf.LoadAbsolute{Off: 42, Size: 2})
		p.jump(bpf.JumpBitsSet, 0xfff8, drop, "") // a later fragment
		p.add(bpf.LoadAbsolute{Off: 48 + 2, Size: 2})
		p.jump(bpf.JumpEqual, port, accept, drop)
		p.label("udp6")
		p.add(bpf.LoadAbsolute{Off: 40 + 2, Size: 2})
		p.jump(bpf.JumpEqual, port, accept, drop)
	}
	p.label(accept)
	p.add(bpf.RetConstant{Val: 1 << 18})
	p.label(drop)
	p.add(bpf.RetConstant{Val: 0})
	return p.assemble()
}

// prog builds a BPF program with jumps to labels.
type prog struct {
	ins    []bpf.Instruction
	labels map[string]int
	jumps  []progJump
}

type progJump struct {
	at          int
	cond        bpf.JumpTest
	val         uint32
	true, false string // "" is the next instruction
}

func (p *prog) add(i bpf.Instruction) { p.ins = append(p.ins, i) }

func (p *prog) jump(cond bpf.JumpTest, val uint32, t, f string) {
	p.jumps = append(p.jumps, progJump{len(p.ins), cond, val, t, f})
	p.ins = append(p.ins, nil)
}

func (p *prog) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.ins)
}

func (p *prog) assemble() ([]bpf.RawInstruction, error) {
	skip := func(at int, to string) (uint8, error) {
		if to == "" {
			return 0, nil
		}
		target, ok := p.labels[to]
		if !ok || target <= at || target-at-1 > 255 {
			return 0, fmt.Errorf("BPF jump to %q out of reach", to)
		}
		return uint8(target - at - 1), nil
	}
	for _, j := range p.jumps {
		t, err := skip(j.at, j.true)
		if err != nil {
			return nil, err
		}
		f, err := skip(j.at, j.false)
		if err != nil {
			return nil, err
		}
		p.ins[j.at] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: t, SkipFalse: f}
	}
	return bpf.Assemble(p.ins)
}

// openRings opens n rings of size bytes each (whole blocks, at least 2) reading the
// datagrams for ap on iface, in one fanout group that spreads
// them by flow hash and reassembles IPv4 fragments. errs are the counters of the frames not
// passed on, by reason.
func openRings(ap netip.AddrPort, iface string, n, size int, blockTimeout time.Duration, errs [ringReasons]prometheus.Counter) ([]*ring, error) {
	filter, err := ringFilter(ap)
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", iface, err)
	}
	ifindex := ifi.Index
	var rings []*ring
	fanout := -1 // the group's id, once the first ring made it (0 is a valid id)
	for i := range n {
		r, err := openRing(filter, ifindex, size, blockTimeout, fanout)
		if err != nil {
			for _, r := range rings {
				r.Close()
			}
			return nil, fmt.Errorf("AF_PACKET ring %d of %d: %w", i+1, n, err)
		}
		r.errs = errs
		rings = append(rings, r)
		if i == 0 {
			err = r.control(func(fd int) error {
				v, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
				fanout = v & 0xffff
				return err
			})
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("AF_PACKET fanout group: %w", err)
			}
		}
	}
	return rings, nil
}

// openRing opens one ring and joins the fanout group id (a new one when negative).
func openRing(filter []bpf.RawInstruction, ifindex, size int, blockTimeout time.Duration, fanout int) (*ring, error) {
	// Protocol 0 receives nothing until the bind below, when the filter is in place.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w (CAP_NET_RAW is needed)", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	prog := make([]unix.SockFilter, len(filter))
	for i, ins := range filter {
		prog[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, fmt.Errorf("TPACKET_V3: %w", err)
	}
	blocks := max(2, size/ringBlockSize)
	req := unix.TpacketReq3{
		Block_size:     ringBlockSize,
		Block_nr:       uint32(blocks),
		Frame_size:     1 << 16,
		Frame_nr:       uint32(blocks * (ringBlockSize >> 16)),
		Retire_blk_tov: uint32(max(1, blockTimeout.Milliseconds())),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("ring of %d blocks: %w", blocks, err)
	}
	mem, err := unix.Mmap(fd, 0, blocks*ringBlockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	defer func() {
		if !ok {
			unix.Munmap(mem)
		}
	}()
	sll := unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}
	if err := unix.Bind(fd, &sll); err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	flags := unix.PACKET_FANOUT_HASH | unix.PACKET_FANOUT_FLAG_DEFRAG
	if fanout < 0 {
		fanout, flags = 0, flags|unix.PACKET_FANOUT_FLAG_UNIQUEID
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, fanout|flags<<16); err != nil {
		return nil, fmt.Errorf("fanout: %w", err)
	}
	f := os.NewFile(uintptr(fd), "af-packet")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		unix.Munmap(mem)
		ok = true // closed above
		return nil, err
	}
	ok = true
	r := &ring{f: f, rc: rc, mem: mem, blocks: blocks, dgrams: make([]ringDatagram, 0, 1024)}
	r.readyFn = r.ready
	return r, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (r *ring) control(fn func(fd int) error) error {
	var ferr error
	if err := r.rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// block returns block i of the ring.
func (r *ring) block(i int) []byte { return r.mem[i*ringBlockSize : (i+1)*ringBlockSize] }

// status is the atomic word a block's owner is told by: the kernel hands it to the reader
// with TP_STATUS_USER and takes it back when the reader stores TP_STATUS_KERNEL.
func status(block []byte) *uint32 { return (*uint32)(unsafe.Pointer(&block[blockStatus])) }

// ready is the RawConn callback: false asks the poller to wait for a block.
func (r *ring) ready(uintptr) bool {
	return atomic.LoadUint32(status(r.block(r.cur)))&unix.TP_STATUS_USER != 0
}

// Read hands the previous block back to the kernel, waits for the next one and returns the
// number of its datagrams passed on (its other frames are counted by reason).
func (r *ring) Read() (int, error) {
	if r.held {
		atomic.StoreUint32(status(r.block(r.cur)), unix.TP_STATUS_KERNEL)
		r.cur = (r.cur + 1) % r.blocks
		r.held = false
	}
	r.dgrams = r.dgrams[:0]
	if err := r.rc.Read(r.readyFn); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return 0, net.ErrClosed
		}
		return 0, err
	}
	r.held = true
	var bad [ringReasons]int
	r.dgrams = readBlock(r.block(r.cur), uint32(r.cur*ringBlockSize), r.dgrams, &bad)
	for i, n := range bad {
		if n > 0 {
			r.refused.Add(uint64(n))
			if r.errs[i] != nil {
				r.errs[i].Add(float64(n))
			}
		}
	}
	return len(r.dgrams), nil
}

// Datagram is the i-th datagram of the last Read, valid until the next Read.
func (r *ring) Datagram(i int) ([]byte, netip.AddrPort, control) {
	d := &r.dgrams[i]
	return r.mem[d.off : d.off+d.len], d.from, control{sec: int64(d.sec), nsec: int64(d.nsec), hasTime: true}
}

// SetReadDeadline bounds the wait of the next Read (os.ErrDeadlineExceeded).
func (r *ring) SetReadDeadline(t time.Time) error { return r.f.SetReadDeadline(t) }

// Close closes the socket and unmaps the ring: no Read may run or follow.
func (r *ring) Close() error {
	err := r.f.Close()
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
	return err
}

// Drops returns the frames the kernel dropped for lack of room in the ring so far.
func (r *ring) Drops() uint64 {
	_ = r.control(func(fd int) error {
		st, err := unix.GetsockoptTpacketStatsV3(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err == nil {
			r.drops.Add(uint64(st.Drops))
		}
		return err
	})
	return r.drops.Load()
}

// readBlock appends the datagrams of a block (at offset base of the ring) to out, and counts
// the frames it does not pass on in bad. Offsets are checked against the block: a frame past
// it ends the block.
func readBlock(b []byte, base uint32, out []ringDatagram, bad *[ringReasons]int) []ringDatagram {
	if len(b) < blockHeaderSize {
		return out
	}
	n := binary.NativeEndian.Uint32(b[blockNumPkts:])
	off := uint64(binary.NativeEndian.Uint32(b[blockFirstPkt:]))
	end := min(uint64(binary.NativeEndian.Uint32(b[blockLen:])), uint64(len(b)))
	for range n {
		if off < blockHeaderSize || off+pktHdrSize > end {
			bad[ringMalformed]++
			return out
		}
		h := b[off : off+pktHdrSize]
		next := uint64(binary.NativeEndian.Uint32(h[pktNext:]))
		snaplen := uint64(binary.NativeEndian.Uint32(h[pktSnaplen:]))
		mac, netOff := uint64(binary.NativeEndian.Uint16(h[pktMac:])), uint64(binary.NativeEndian.Uint16(h[pktNet:]))
		switch {
		case mac > netOff || off+mac+snaplen > end || netOff-mac > snaplen:
			bad[ringMalformed]++
		case snaplen < uint64(binary.NativeEndian.Uint32(h[pktLen:])):
			bad[ringTruncated]++
		case binary.NativeEndian.Uint32(h[pktStatus:])&unix.TP_STATUS_VLAN_VALID != 0 &&
			binary.NativeEndian.Uint32(h[pktVLANTCI:])&0xfff != 0:
			// The tap sees a tagged frame before the kernel hands it to its VLAN device,
			// or drops it when there is none: a UDP socket gets it from the VLAN device
			// only, so the ring of its parent does not. VLAN 0 (priority) is the host's.
			bad[ringVLAN]++
		default:
			pkt := b[off+netOff : off+mac+snaplen]
			pstatus := binary.NativeEndian.Uint32(h[pktStatus:])
			po, pl, from, reason := parseRingFrame(pkt, pstatus&(unix.TP_STATUS_CSUM_VALID|unix.TP_STATUS_CSUMNOTREADY) != 0)
			if reason >= 0 {
				bad[reason]++
				break
			}
			out = append(out, ringDatagram{
				off:  base + uint32(off+netOff) + uint32(po),
				len:  uint32(pl),
				from: from,
				sec:  binary.NativeEndian.Uint32(h[pktSec:]),
				nsec: binary.NativeEndian.Uint32(h[pktNsec:]),
			})
		}
		if next == 0 {
			return out
		}
		off += next
	}
	return out
}

// parseRingFrame checks an IP packet holding a UDP datagram as the kernel's receive path
// would, and returns where its payload is in pkt and its source; reason is -1, or why it is
// not passed on. csumDone says the UDP checksum was checked by the device or never computed
// (sent by this host).
func parseRingFrame(pkt []byte, csumDone bool) (off, n int, from netip.AddrPort, reason int) {
	if len(pkt) < 1 {
		return 0, 0, from, ringMalformed
	}
	var udp []byte
	var sum uint32 // the pseudo-header's, but for the UDP length
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return 0, 0, from, ringTruncated
		}
		ihl := int(pkt[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(pkt[2:]))
		switch {
		case ihl < 20 || total < ihl+8:
			return 0, 0, from, ringMalformed
		case total > len(pkt) || ihl > len(pkt):
			return 0, 0, from, ringTruncated
		case checksum(pkt[:ihl], 0) != 0xffff:
			return 0, 0, from, ringChecksum
		case binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0: // MF or an offset
			return 0, 0, from, ringFragment
		case pkt[9] != unix.IPPROTO_UDP:
			return 0, 0, from, ringMalformed
		}
		from = netip.AddrPortFrom(netip.AddrFrom4([4]byte(pkt[12:16])), 0)
		udp = pkt[ihl:total]
		sum = sumBytes(pkt[12:20], 0) + unix.IPPROTO_UDP
		off = ihl
	case 6:
		if len(pkt) < 40 {
			return 0, 0, from, ringTruncated
		}
		plen := int(binary.BigEndian.Uint16(pkt[4:]))
		switch {
		case 40+plen > len(pkt):
			return 0, 0, from, ringTruncated
		case pkt[6] == unix.IPPROTO_FRAGMENT:
			return 0, 0, from, ringFragment
		case pkt[6] != unix.IPPROTO_UDP || plen < 8:
			return 0, 0, from, ringMalformed
		}
		from = netip.AddrPortFrom(netip.AddrFrom16([16]byte(pkt[8:24])), 0)
		udp = pkt[40 : 40+plen]
		sum = sumBytes(pkt[8:40], 0) + unix.IPPROTO_UDP
		off = 40
	default:
		return 0, 0, from, ringMalformed
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < 8 || ulen > len(udp) {
		return 0, 0, from, ringMalformed
	}
	udp = udp[:ulen]
	if c := binary.BigEndian.Uint16(udp[6:]); !csumDone && (c != 0 || from.Addr().Is6()) {
		// Over IPv6 the checksum is mandatory: 0 is wrong.
		if c == 0 || checksum(udp, sum+uint32(ulen)) != 0xffff {
			return 0, 0, from, ringChecksum
		}
	}
	from = netip.AddrPortFrom(from.Addr(), binary.BigEndian.Uint16(udp[0:]))
	return off + 8, ulen - 8, from, -1
}

// sumBytes adds b as big-endian 16-bit words to sum (RFC 1071), without folding.
func sumBytes(b []byte, sum uint32) uint32 {
	for len(b) >= 8 {
		sum += uint32(binary.BigEndian.Uint16(b)) + uint32(binary.BigEndian.Uint16(b[2:])) +
			uint32(binary.BigEndian.Uint16(b[4:])) + uint32(binary.BigEndian.Uint16(b[6:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

// checksum is the ones' complement sum of b added to sum, folded to 16 bits: 0xffff when b
// holds its own correct checksum.
func checksum(b []byte, sum uint32) uint16 {
	s := uint64(sum)
	for len(b) >= 8 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	s = uint64(sumBytes(b, 0)) + s
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// dropAll attaches to conn a socket filter that drops every datagram: the UDP socket of an
// af-packet listener holds the port and reads nothing. Datagrams that came before are left
// in its buffer, unread.
func dropAll(conn *net.UDPConn) error {
	prog := []unix.SockFilter{{Code: 0x06, K: 0}} // ret #0
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
			&unix.SockFprog{Len: 1, Filter: &prog[0]})
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_ATTACH_FILTER: %w", serr)
	}
	return nil
}
