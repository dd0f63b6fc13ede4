package server

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/internal/capturetest"
	"flowzero/capture/wire"
	"flowzero/internal/health"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testutil"
)

// TestMaxInterfacesPerAgent announces more interfaces than max-interfaces-per-agent, by name and
// by index: the extra announcements are refused and counted, packets on them count as server
// drops, and the interfaces within the limit go on working, also after a reconnect.
func TestMaxInterfacesPerAgent(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 6)
	cfg := testServerConfig(t)
	cfg.MaxInterfacesPerAgent = 2
	s := startServer(t, cfg)
	defer s.Stop()
	ra, _ := dialRaw(t, s.Addr().String(), "raw", 7)
	on := func(index uint32, f pcapfile.Frame) []byte {
		return wire.AppendPacket(nil, &wire.Packet{Timestamp: f.Time.UnixNano(), Length: uint32(f.Length), Interface: index, Data: f.Data})
	}
	// eth2 is one interface too many; index 3 names eth0 again, one index too many.
	ra.send(1, interfaceRecord(t, 0, "eth0"), interfaceRecord(t, 1, "eth1"), interfaceRecord(t, 2, "eth2"),
		interfaceRecord(t, 3, "eth0"), on(0, pkts[0]), on(1, pkts[1]), on(2, pkts[2]), on(3, pkts[3]))
	ra.waitAck(1)
	_ = ra.conn.Close()
	// A new connection announces its interfaces again: the known ones are still accepted.
	ra, _ = dialRaw(t, s.Addr().String(), "raw", 7)
	ra.send(2, interfaceRecord(t, 5, "eth1"), interfaceRecord(t, 6, "eth3"), on(5, pkts[4]), on(6, pkts[5]))
	ra.waitAck(2)
	_ = ra.conn.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats("raw"); st.Packets != 3 || st.DropServer != 3 {
		t.Fatalf("server stats %+v, want 3 packets written and 3 dropped", st)
	}
	if n := promtest.ToFloat64(s.metrics.errors.WithLabelValues("too-many-interfaces")); n != 3 {
		t.Fatalf("too-many-interfaces errors %v, want 3", n)
	}
	capturetest.Compare(t, capturetest.ReadPcapng(t, cfg.Output.Path), capturetest.Frames{
		"raw:eth0": {pkts[0]}, "raw:eth1": {pkts[1], pkts[4]}})
}

// rawInterfaceRecord builds an interface record by hand, without AppendInterface's checks, as
// a hostile (authenticated) agent may send it.
func rawInterfaceRecord(index uint32, name string) []byte {
	b := binary.LittleEndian.AppendUint16(nil, uint16(wire.RecordInterface))
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(12+len(name)))
	b = binary.LittleEndian.AppendUint32(b, index)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	b = binary.LittleEndian.AppendUint32(b, 65535)
	return append(b, name...)
}

// TestBadInterfaceNameRefused announces interfaces whose names would garble the shared pcapng:
// 65533 bytes (with "raw:" beyond a pcapng option's 16-bit length), one byte over the wire's
// limit, a control character. Each frame is refused whole and counted as bad-frame, its
// packets as server drops, the server reports them in /healthz, and the file, which other
// agents share, stays readable with the good frame's packets.
func TestBadInterfaceNameRefused(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 2)
	cfg := testServerConfig(t)
	s := startServer(t, cfg)
	defer s.Stop()
	ra, _ := dialRaw(t, s.Addr().String(), "raw", 7)
	bad := []string{"\x02\x00\xff\xff" + strings.Repeat("\x00", 65529), strings.Repeat("e", wire.MaxNameLen+1), "eth0\n"}
	for i, name := range bad {
		ra.send(uint64(i+1), rawInterfaceRecord(0, name), packetRecord(pkts[0]))
		ra.waitAck(uint64(i + 1))
	}
	ra.send(4, interfaceRecord(t, 0, "eth0"), packetRecord(pkts[1]))
	ra.waitAck(4)
	_ = ra.conn.Close()
	if n := errorsCount(s, "bad-frame"); n != 3 {
		t.Errorf("bad-frame errors %v, want 3", n)
	}
	if r := s.Health(); r.Status != health.Degraded || !strings.Contains(r.Reason, "dropped by the server") || r.Counters["drops-server"] != 3 {
		t.Errorf("health %+v, want degraded by 3 server drops", r)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats("raw"); st.Packets != 1 || st.DropServer != 3 {
		t.Fatalf("server stats %+v, want 1 packet written and 3 dropped", st)
	}
	got := capturetest.ReadPcapng(t, cfg.Output.Path)
	if len(got) != 1 {
		t.Errorf("interfaces %q, want raw:eth0 alone", capturetest.Keys(got))
	}
	capturetest.Compare(t, got, capturetest.Frames{"raw:eth0": {pkts[1]}})
}

// TestAgentNameWithPercentRefused: with per-agent output and rotate-interval the path goes
// through strftime, so agent "y%Y" would write the file of agent "y2026": the server refuses
// the name at the hello, and "y2026" alone has a file.
func TestAgentNameWithPercentRefused(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 1)
	cfg := testServerConfig(t)
	dir := filepath.Dir(cfg.Output.Path)
	cfg.Output.PerAgent = true
	cfg.Output.RotateInterval = time.Hour
	s := startServer(t, cfg)
	defer s.Stop()
	if _, wel := dialRaw(t, s.Addr().String(), "y%Y", 10); wel.Status != wire.StatusMalformedHello {
		t.Fatalf("agent y%%Y: welcome status %v, want malformed hello", wel.Status)
	}
	if n := errorsCount(s, "bad-hello"); n != 1 {
		t.Errorf("bad-hello errors %v, want 1", n)
	}
	year := testutil.Now().Local().Format("2006")
	ra, _ := dialRaw(t, s.Addr().String(), "y"+year, 11)
	ra.send(1, interfaceRecord(t, 0, "eth0"), packetRecord(pkts[0]))
	ra.waitAck(1)
	_ = ra.conn.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "capture-y"+year+".pcapng" {
		t.Fatalf("files %v, want capture-y%s.pcapng alone", ents, year)
	}
	capturetest.Compare(t, capturetest.ReadPcapng(t, filepath.Join(dir, ents[0].Name())), capturetest.Frames{"y" + year + ":eth0": pkts})
}
