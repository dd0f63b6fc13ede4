//go:build linux

package capture

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// TestLiveCaptureRawIP captures on a tun device, which delivers raw IP packets: the test writes
// the IP packets of the real captures into the tun and the agent must keep exactly those its
// filter (compiled for raw IP) matches, as gopacket decodes them.
func TestLiveCaptureRawIP(t *testing.T) {
	skipUnlessRoot(t, "tun capture (network namespace, tun device, AF_PACKET)")
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("tun capture needs /dev/net/tun: %v", err)
	}
	_, raw, facts := filterTestFrames(t)
	const filter = "(udp and port 2055) or ip6 or proto 47"
	matches := func(f frameFacts) bool {
		return f.proto == 17 && f.hasPorts && (f.srcPort == 2055 || f.dstPort == 2055) ||
			f.etherType == layers.EthernetTypeIPv6 || f.proto == 47
	}
	var packets, want [][]byte
	for i, p := range raw {
		if p == nil {
			continue
		}
		packets = append(packets, p)
		if matches(facts[i]) {
			want = append(want, p)
		}
	}
	if len(want) == 0 || len(want) == len(packets) {
		t.Fatalf("%d of %d packets match %q: the test does not discriminate", len(want), len(packets), filter)
	}

	s := startServer(t, testServerConfig(t))
	defer s.Stop()
	const tunName = "fztun0"
	acfg := testAgentConfig("tun1", s.Addr().String(), nil)
	acfg.Replay.Files = nil
	acfg.Live.Interfaces = []string{tunName}
	acfg.Live.Filter = filter
	acfg.Live.RingSize = 4 << 20
	a, err := NewAgent(prometheus.NewRegistry(), acfg, quiet)
	if err != nil {
		t.Fatal(err)
	}

	// The tun and the agent's socket live in a network namespace of their own, made on a
	// locked thread that is never unlocked (the thread ends with its goroutine): the
	// packets written into the tun carry real addresses and must not be routed anywhere.
	type opened struct {
		tun int
		err error
	}
	ready := make(chan opened)
	go func() {
		runtime.LockOSThread()
		tun, err := openTunInNewNetns(tunName)
		if err == nil {
			if err = a.Start(); err != nil {
				unix.Close(tun)
			}
		}
		ready <- opened{tun, err}
	}()
	o := <-ready
	if errors.Is(o.err, unix.EPERM) {
		t.Skipf("tun capture: %v (needs CAP_SYS_ADMIN and CAP_NET_ADMIN)", o.err)
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer unix.Close(o.tun)
	for _, p := range packets {
		if _, err := unix.Write(o.tun, p); err != nil {
			t.Fatalf("writing into the tun: %v", err)
		}
	}
	eventually(t, "the tun packets", func() bool { return s.Stats("tun1").Packets >= uint64(len(want)) })
	time.Sleep(50 * time.Millisecond) // a packet the filter should have dropped would be late
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	got := readPcapng(t, s.cfg.Output.Path)["tun1:"+tunName]
	if len(got) != len(want) {
		t.Fatalf("captured %d packets on the tun, want the %d matching %q", len(got), len(want), filter)
	}
	for i, f := range got {
		if f.LinkType != layers.LinkTypeRaw || !bytes.Equal(f.Data, want[i]) {
			t.Fatalf("packet %d: link type %v, %d bytes, want raw IP %x", i, f.LinkType, len(f.Data), want[i])
		}
	}
}

// openTunInNewNetns moves the calling (locked) thread into a new network namespace, creates
// a tun device there without packet information headers, disables IPv6 on it (no router
// solicitations or MLD reports among the test's packets) and brings it up.
func openTunInNewNetns(name string) (int, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return -1, fmt.Errorf("new network namespace: %w", err)
	}
	tun, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(tun)
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(tun, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(tun)
		return -1, fmt.Errorf("TUNSETIFF: %w", err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		unix.Close(tun)
		return -1, err
	}
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Close(tun)
		return -1, err
	}
	defer unix.Close(sock)
	if err := unix.IoctlIfreq(sock, unix.SIOCGIFFLAGS, ifr); err != nil {
		unix.Close(tun)
		return -1, err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(sock, unix.SIOCSIFFLAGS, ifr); err != nil {
		unix.Close(tun)
		return -1, fmt.Errorf("bringing %s up: %w", name, err)
	}
	return tun, nil
}
