package server

import (
	"io"
	"testing"

	"flowzero/capture/internal/capturetest"
	"flowzero/capture/wire"
	"flowzero/internal/health"
	"flowzero/internal/testutil"
)

// FuzzFrameRecords decodes arbitrary frame payloads and writes them as the server does, to an
// output that discards: no input panics, and every packet of the frame is written or counted
// as a server drop.
func FuzzFrameRecords(f *testing.F) {
	pkts := capturetest.EthernetFrames(f, 8)
	join := func(recs ...[]byte) []byte {
		var b []byte
		for _, r := range recs {
			b = append(b, r...)
		}
		return b
	}
	eth0 := interfaceRecord(f, 0, "eth0")
	drops := wire.AppendDropReport(nil, &wire.DropReport{Interface: wire.AllInterfaces, Kernel: 3, Agent: 4})
	beat := wire.AppendHeartbeat(nil, &wire.Heartbeat{Time: testutil.Now().UnixNano(), Captured: 9})
	f.Add(uint32(4), join(eth0, packetRecord(pkts[0]), drops, packetRecord(pkts[1])))
	f.Add(uint32(3), join(packetRecord(pkts[2]), eth0, packetRecord(pkts[3])))
	f.Add(uint32(6), join(eth0, interfaceRecord(f, 70, "eth1"), beat, packetRecord(pkts[4]), packetRecord(pkts[5]), packetRecord(pkts[6])))
	f.Add(uint32(2), join(eth0, packetRecord(pkts[7])[:30]))
	f.Fuzz(func(t *testing.T, records uint32, payload []byte) {
		cfg := DefaultConfiguration()
		cfg.Output.Path = "-"
		cfg.MaxInterfacesPerAgent = 2
		s := &Server{cfg: cfg, deps: testDeps(Dependencies{Stdout: io.Discard}), log: quiet, metrics: newServerMetrics(nil),
			clock: testutil.Clock(), health: health.NewState(testutil.Clock())}
		s.shared = s.newOutputFile("")
		st := &agentState{name: "fuzz", m: s.metrics.forAgent("fuzz"), out: s.shared}
		var recs frameRecords
		n, err := recs.decode(wire.FrameHeader{Records: records}, payload)
		if err == nil && n != uint64(len(recs.packets)) {
			t.Fatalf("%d packets counted, %d decoded", n, len(recs.packets))
		}
		if n < uint64(len(recs.packets)) {
			t.Fatalf("%d packets counted, fewer than the %d decoded", n, len(recs.packets))
		}
		for i, o := range recs.others {
			if o.at > len(recs.packets) || (i > 0 && o.at < recs.others[i-1].at) {
				t.Fatalf("record %d placed at packet %d of %d", i, o.at, len(recs.packets))
			}
		}
		var conn connInterfaces
		_ = s.writeFrame(st, &conn, wire.FrameHeader{Records: records, Seq: 1}, &recs, err, n)
		if err := s.shared.w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := st.stats.Packets + st.stats.DropServer; got != n {
			t.Fatalf("%d packets written and %d dropped, the frame holds %d", st.stats.Packets, st.stats.DropServer, n)
		}
	})
}
