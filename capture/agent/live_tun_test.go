//go:build linux

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"flowzero/capture/internal/capturetest"
	"flowzero/internal/testutil"
)

// TestLiveCaptureRawIP captures on a tun device, which delivers raw IP packets: the test writes
// the IP packets of the real captures into the tun and the agent must keep exactly those its
// filter (compiled for raw IP) matches, as gopacket decodes them.
func TestLiveCaptureRawIP(t *testing.T) {
	skipUnlessRoot(t, "tun capture (network namespace, tun device, AF_PACKET)")
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("tun capture needs /dev/net/tun: %v", err)
	}
	_, raw, facts := capturetest.FilterFrames(t)
	const filter = "(udp and port 2055) or ip6 or proto 47"
	matches := func(f capturetest.FrameFacts) bool {
		return f.Proto == 17 && f.HasPorts && (f.SrcPort == 2055 || f.DstPort == 2055) ||
			f.EtherType == layers.EthernetTypeIPv6 || f.Proto == 47
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

	s, scfg := startServer(t)
	defer s.Stop()
	const tunName = "fztun0"
	acfg := liveConfig("tun1", s.Addr().String(), tunName)
	acfg.Live.Filter = filter
	a := newAgent(t, acfg)

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
	// The last matching packet again, last: once it is captured, so is every packet written
	// before it (one ring, in order), those the filter should drop included.
	want = append(want, want[len(want)-1])
	for _, p := range append(packets, want[len(want)-1]) {
		if _, err := unix.Write(o.tun, p); err != nil {
			t.Fatalf("writing into the tun: %v", err)
		}
	}
	testutil.WaitUntil(t, "the tun packets", func() bool { return s.Stats("tun1").Packets >= uint64(len(want)) })
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	got := capturetest.ReadPcapng(t, scfg.Output.Path)["tun1:"+tunName]
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
