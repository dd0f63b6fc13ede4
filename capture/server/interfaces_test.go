package server

import (
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/internal/capturetest"
	"flowzero/capture/wire"
	"flowzero/internal/pcapfile"
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
