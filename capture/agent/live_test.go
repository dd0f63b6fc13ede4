//go:build linux

package agent

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"flowzero/capture/internal/capturetest"
	"flowzero/internal/testutil"
)

// TestLiveCapture captures on one end of a veth pair whose other end lives in a network
// namespace made by the test, with a filter that keeps one UDP port out of two.
func TestLiveCapture(t *testing.T) {
	skipUnlessRoot(t, "live capture (network namespace, veth, AF_PACKET)")
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("live capture test needs iproute2's ip command")
	}
	id := os.Getpid() % 100000
	ns, host, peer := fmt.Sprintf("fzcap%d", id), fmt.Sprintf("fzc%da", id), fmt.Sprintf("fzc%db", id)
	subnet := fmt.Sprintf("10.%d.%d", 100+id%100, id/100%250)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run("link", "set", peer, "netns", ns)
	run("addr", "add", subnet+".1/24", "dev", host)
	run("link", "set", host, "up")
	run("-n", ns, "addr", "add", subnet+".2/24", "dev", peer)
	run("-n", ns, "link", "set", peer, "up")
	run("-n", ns, "link", "set", "lo", "up")

	s, scfg := startServer(t)
	defer s.Stop()
	acfg := liveConfig("live1", s.Addr().String(), host)
	acfg.Live.Filter = "udp and dst port 9999"
	acfg.Live.SnapLength = 128
	a := newAgent(t, acfg)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}

	// Packets leave through the host end toward the namespace; the kernel answers ARP there
	// and holds the first packets until it has. Unconnected: the namespace answers with ICMP
	// port unreachable, which a connected socket would turn into write errors.
	conn, err := net.ListenPacket("udp4", subnet+".1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst := &net.UDPAddr{IP: net.ParseIP(subnet + ".2"), Port: 9999}
	otherDst := &net.UDPAddr{IP: net.ParseIP(subnet + ".2"), Port: 9998}
	const n = 20
	big := make([]byte, 1000)
	for i := range n {
		payload := fmt.Appendf(nil, "flowzero live %02d ", i)
		if i == n-1 {
			payload = append(payload, big...) // longer than the snap length
		}
		if _, err := conn.WriteTo(payload, dst); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteTo([]byte("filtered out"), otherDst); err != nil {
			t.Fatal(err)
		}
	}
	// A last packet the filter keeps: once it is captured, so is every packet sent before it
	// (one ring, in order), the filtered ones included.
	const last = "flowzero live end"
	if _, err := conn.WriteTo([]byte(last), dst); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the live packets", func() bool { return s.Stats("live1").Packets >= n+1 })
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	got := capturetest.ReadPcapng(t, scfg.Output.Path)
	frames := got["live1:"+host]
	if len(frames) != n+1 || len(got) != 1 {
		var seen []string
		for _, f := range frames {
			seen = append(seen, fmt.Sprintf("%d bytes %q at %v", len(f.Data), f.Data[min(42, len(f.Data)):min(60, len(f.Data))], f.Time.Format("15:04:05.000000")))
		}
		t.Fatalf("%d packets on %d interfaces (%v), want %d on live1:%s; agent %+v; packets: %s", len(frames), len(got), capturetest.Keys(got), n+1, host, st, strings.Join(seen, ", "))
	}
	if string(frames[n].Data[42:]) != last {
		t.Fatalf("last packet %q, want %q", frames[n].Data[42:], last)
	}
	for i, f := range frames[:n] {
		want := fmt.Sprintf("flowzero live %02d ", i)
		// Ethernet 14 + IPv4 20 + UDP 8.
		if len(f.Data) < 42+len(want) || string(f.Data[42:42+len(want)]) != want {
			t.Fatalf("packet %d: %q", i, f.Data)
		}
		if i == n-1 && (len(f.Data) != 128 || f.Length != 42+len(want)+len(big)) {
			t.Fatalf("packet %d: %d bytes captured of %d, want 128 of %d", i, len(f.Data), f.Length, 42+len(want)+len(big))
		}
		// Kernel timestamps are on the machine's clock.
		if d := time.Since(f.Time); d < 0 || d > time.Minute {
			t.Fatalf("packet %d timestamp %v", i, f.Time)
		}
	}
	if st.Captured != n+1 || st.Sent != n+1 {
		t.Fatalf("agent stats %+v", st)
	}
}

// skipUnlessRoot skips a test of what only root may do, saying so.
func skipUnlessRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("%s needs root: run the tests as root to cover it", what)
	}
}
