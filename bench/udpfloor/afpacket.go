package main

import (
	"encoding/binary"
	"log"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/afpacket"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// receiveRing reads the datagrams for port from an AF_PACKET TPACKET_V3 ring on iface: the
// kernel copies each matching frame into the ring and the reader wakes once per block
// (filled, or retired after blockTimeout) instead of once per few datagrams.
// With a producer, each datagram is packed into its next produce request.
func receiveRing(iface string, port uint16, blockTimeout time.Duration, fanout uint16, datagrams, bytes *atomic.Uint64, p *producer) {
	poll := time.Second
	if p != nil {
		poll = p.linger
	}
	tp, err := afpacket.NewTPacket(afpacket.OptInterface(iface), afpacket.OptFrameSize(1<<16),
		afpacket.OptBlockSize(1<<20), afpacket.OptNumBlocks(64),
		afpacket.OptPollTimeout(poll), afpacket.OptBlockTimeout(blockTimeout),
		afpacket.TPacketVersion3)
	if err != nil {
		log.Fatal(err)
	}
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtType},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 8},
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x0800, SkipTrue: 6},
		bpf.LoadAbsolute{Off: 23, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_UDP, SkipTrue: 4},
		bpf.LoadMemShift{Off: 14},
		bpf.LoadIndirect{Off: 16, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(port), SkipTrue: 1},
		bpf.RetConstant{Val: 1 << 16},
		bpf.RetConstant{Val: 0},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tp.SetBPF(prog); err != nil {
		log.Fatal(err)
	}
	if fanout != 0 {
		if err := tp.SetFanout(afpacket.FanoutHashWithDefrag|afpacket.FanoutHash, fanout); err != nil {
			log.Fatal(err)
		}
	}
	for {
		data, ci, err := tp.ZeroCopyReadPacketData()
		if err == afpacket.ErrTimeout {
			if p != nil {
				p.tick(time.Now())
			}
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		if len(data) < 42 {
			continue
		}
		ihl := int(data[14]&0xf) * 4
		payload := data[14+ihl+8:]
		if p != nil {
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(data[26:30])), binary.BigEndian.Uint16(data[14+ihl:]))
			p.add(ci.Timestamp, src, payload)
		}
		datagrams.Add(1)
		bytes.Add(uint64(len(payload)))
	}
}

// dropAll keeps a UDP socket bound to addr, so that the kernel does not answer the
// datagrams with ICMP port unreachable, and drops what it receives with a socket filter.
func dropAll(addr string) *net.UDPConn {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		log.Fatal(err)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		log.Fatal(err)
	}
	prog := []unix.SockFilter{{Code: 0x06, K: 0}} // ret #0
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
			&unix.SockFprog{Len: 1, Filter: &prog[0]})
	}); err != nil {
		log.Fatal(err)
	}
	if serr != nil {
		log.Fatal(serr)
	}
	return conn
}
