package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/agent"
	"flowzero/capture/internal/capturetest"
	"flowzero/capture/wire"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testutil"
)

// rawAgent speaks the wire protocol by hand, to send frames a real agent never would.
type rawAgent struct {
	t    testing.TB
	conn net.Conn
	fb   wire.FrameBuilder
}

// dialRaw connects as agent name (instance id) and returns the server's welcome.
func dialRaw(t testing.TB, addr, name string, id uint64) (*rawAgent, wire.Welcome) {
	t.Helper()
	return dialRawCaps(t, addr, name, id, 0)
}

// dialRawCaps is dialRaw announcing the capabilities caps.
func dialRawCaps(t testing.TB, addr, name string, id uint64, caps uint16) (*rawAgent, wire.Welcome) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testutil.WaitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	hello, err := wire.AppendHello(nil, &wire.Hello{Version: wire.Version, AgentID: id, AgentName: name, Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(testutil.WaitTimeout))
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	var b [wire.WelcomeLen]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		t.Fatalf("reading welcome: %v", err)
	}
	wel, err := wire.ParseWelcome(b[:])
	if err != nil {
		t.Fatal(err)
	}
	return &rawAgent{t: t, conn: c}, wel
}

// send writes one frame of the given records (each a complete record, see packetRecord).
func (r *rawAgent) send(seq uint64, records ...[]byte) {
	r.t.Helper()
	r.fb.Reset(seq)
	for _, rec := range records {
		r.fb.Buf = append(r.fb.Buf, rec...)
		r.fb.Records++
	}
	frame, err := r.fb.Finish(nil)
	if err != nil {
		r.t.Fatal(err)
	}
	_ = r.conn.SetWriteDeadline(time.Now().Add(testutil.WaitTimeout))
	if _, err := r.conn.Write(frame); err != nil {
		r.t.Fatal(err)
	}
}

// waitAck reads acknowledgements until one covers seq.
func (r *rawAgent) waitAck(seq uint64) {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(testutil.WaitTimeout))
	var b [wire.AckLen]byte
	for {
		if _, err := io.ReadFull(r.conn, b[:]); err != nil {
			r.t.Fatalf("waiting for the acknowledgement of frame %d: %v", seq, err)
		}
		rec, _, err := wire.NextRecord(b[:])
		if err != nil {
			r.t.Fatal(err)
		}
		if got, err := rec.Ack(); err == nil && got >= seq {
			return
		}
	}
}

func interfaceRecord(t testing.TB, index uint32, name string) []byte {
	rec, err := wire.AppendInterface(nil, &wire.Interface{Index: index, LinkType: 1, SnapLength: 65535, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func packetRecord(f pcapfile.Frame) []byte {
	return wire.AppendPacket(nil, &wire.Packet{Timestamp: f.Time.UnixNano(), Length: uint32(f.Length), Data: f.Data})
}

// TestMalformedFrameRefusedWhole sends a frame with a malformed packet record between good
// ones: nothing of it reaches the file, its five packet records count as server drops, it is
// acknowledged (so an agent would not send it again) and the connection goes on.
func TestMalformedFrameRefusedWhole(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 10)
	cfg := testServerConfig(t)
	s := startServer(t, cfg)
	defer s.Stop()
	ra, wel := dialRaw(t, s.Addr().String(), "raw", 7)
	if wel.Status != wire.StatusOK || wel.LastSeq != 0 {
		t.Fatalf("welcome %+v", wel)
	}
	ra.send(0, interfaceRecord(t, 0, "eth0"))
	ra.send(1, packetRecord(pkts[0]), packetRecord(pkts[1]), packetRecord(pkts[2]))
	ra.waitAck(1)
	// A packet record whose body is too short for the packet header.
	bad := []byte{byte(wire.RecordPacket), 0, 0, 0, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	ra.send(2, packetRecord(pkts[3]), packetRecord(pkts[4]), bad, packetRecord(pkts[5]), packetRecord(pkts[6]))
	ra.waitAck(2)
	ra.send(3, packetRecord(pkts[7]), packetRecord(pkts[8]), packetRecord(pkts[9]))
	ra.waitAck(3)
	_ = ra.conn.Close()

	// The same agent instance reconnecting is told to resume after frame 3.
	ra, wel = dialRaw(t, s.Addr().String(), "raw", 7)
	if wel.LastSeq != 3 {
		t.Fatalf("welcome after the reconnect says frame %d was the last written, want 3", wel.LastSeq)
	}
	_ = ra.conn.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats("raw")
	if st.Packets != 6 || st.DropServer != 5 || st.Frames != 4 {
		t.Fatalf("server stats %+v, want 6 packets written and 5 dropped in 4 frames (one of interfaces)", st)
	}
	if n := promtest.ToFloat64(s.metrics.errors.WithLabelValues("bad-frame")); n != 1 {
		t.Fatalf("bad-frame errors %v, want 1", n)
	}
	if n := promtest.ToFloat64(s.metrics.drops.WithLabelValues("raw", "server")); n != 5 {
		t.Fatalf("server drops metric %v, want 5", n)
	}
	var want []pcapfile.Frame
	for _, i := range []int{0, 1, 2, 7, 8, 9} {
		want = append(want, pkts[i])
	}
	capturetest.Compare(t, capturetest.ReadPcapng(t, cfg.Output.Path), capturetest.Frames{"raw:eth0": want})
}

// TestUndecompressableFrameDropped sends a frame marked zstd whose payload is not zstd, with
// and without zstd negotiated: the frame is read whole, so the connection goes on; its records
// count as server drops and it is acknowledged, so that the agent does not send it again.
func TestUndecompressableFrameDropped(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 2)
	for _, caps := range []uint16{0, wire.CapZstd} {
		t.Run(fmt.Sprintf("capabilities=%d", caps), func(t *testing.T) {
			cfg := testServerConfig(t)
			s := startServer(t, cfg)
			defer s.Stop()
			ra, _ := dialRawCaps(t, s.Addr().String(), "raw", 7, caps)
			ra.send(1, interfaceRecord(t, 0, "eth0"), packetRecord(pkts[0]))
			ra.waitAck(1)
			garbage := []byte("not a zstd frame")
			frame := make([]byte, wire.FrameHeaderLen, wire.FrameHeaderLen+len(garbage))
			wire.PutFrameHeader(frame, &wire.FrameHeader{Length: uint32(len(garbage)), Records: 3, Seq: 2, RawLength: 100, Flags: wire.FlagZstd})
			if _, err := ra.conn.Write(append(frame, garbage...)); err != nil {
				t.Fatal(err)
			}
			ra.waitAck(2)
			ra.send(3, packetRecord(pkts[1]))
			ra.waitAck(3)
			_ = ra.conn.Close()
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats("raw"); st.Packets != 2 || st.DropServer != 3 || st.Frames != 3 {
				t.Fatalf("server stats %+v, want 2 packets written and 3 dropped in 3 frames", st)
			}
			capturetest.Compare(t, capturetest.ReadPcapng(t, cfg.Output.Path), capturetest.Frames{"raw:eth0": pkts})
		})
	}
}

// TestDecodeFrame decodes frames: every record of a good one, the packets of a refused one.
func TestDecodeFrame(t *testing.T) {
	pktFrame := capturetest.EthernetFrames(t, 1)[0]
	pkt := packetRecord(pktFrame)
	intf := interfaceRecord(t, 0, "eth0")
	join := func(recs ...[]byte) []byte {
		var b []byte
		for _, r := range recs {
			b = append(b, r...)
		}
		return b
	}
	badFlags := append([]byte(nil), pkt...)
	badFlags[2] = 1 // flags must be 0 in version 1
	badName := append([]byte(nil), intf...)
	badName[wire.RecordHeaderLen+6] = 200 // a name longer than the record
	cases := []struct {
		name    string
		records uint32
		payload []byte
		packets uint64
		ok      bool
	}{
		{"good", 3, join(intf, pkt, pkt), 2, true},
		{"count-too-high", 4, join(intf, pkt, pkt), 2, false},
		{"count-too-low", 2, join(intf, pkt, pkt), 2, false},
		{"bad-packet-record", 4, join(pkt, badFlags, pkt, pkt), 4, false},
		// The second record claims more bytes than the payload has: the two records the header
		// announces beyond the first are counted as packets.
		{"truncated-record", 3, join(pkt, pkt[:30]), 3, false},
		{"bad-interface", 3, join(badName, pkt, pkt), 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var recs frameRecords
			n, err := recs.decode(wire.FrameHeader{Records: tc.records}, tc.payload)
			if (err == nil) != tc.ok || n != tc.packets {
				t.Fatalf("decode: %d packets, error %v; want %d packets, ok %v", n, err, tc.packets, tc.ok)
			}
			if tc.ok && (len(recs.packets) != int(tc.packets) || len(recs.others) != int(tc.records)-int(tc.packets) ||
				!bytes.Equal(recs.packets[0].Data, pktFrame.Data) || recs.others[0].intf.Name != "eth0" || recs.others[0].at != 0) {
				t.Fatalf("decoded %+v", recs)
			}
		})
	}
}

// failingWriter stands for an output that fails once: the first write of packet blocks
// returns an error and writes nothing; everything else is kept.
type failingWriter struct {
	mu     sync.Mutex
	failed bool
	b      bytes.Buffer
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failed && len(p) >= 4 && binary.LittleEndian.Uint32(p) == 6 { // an Enhanced Packet Block
		w.failed = true
		return 0, errors.New("no space left on the test device")
	}
	return w.b.Write(p)
}

// TestOutputWriteErrorCounted fails the first write of buffered packets: those packets move
// from written to server drops, the output opens again for the next ones, and written +
// dropped is what the server acknowledged.
func TestOutputWriteErrorCounted(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 7)
	cfg := testServerConfig(t)
	cfg.Output.Path = "-"
	cfg.Output.FlushInterval = time.Hour // the test flushes
	out := &failingWriter{}
	s, err := New(nil, cfg, testDeps(Dependencies{Stdout: out}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ra, _ := dialRaw(t, s.Addr().String(), "full", 1)
	ra.send(0, interfaceRecord(t, 0, "eth0"))
	ra.send(1, packetRecord(pkts[0]), packetRecord(pkts[1]), packetRecord(pkts[2]))
	ra.waitAck(1)
	s.flushOutputs() // fails: the three packets are lost
	ra.send(2, packetRecord(pkts[3]), packetRecord(pkts[4]), packetRecord(pkts[5]), packetRecord(pkts[6]))
	ra.waitAck(2)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats("full")
	if st.Packets != 4 || st.DropServer != 3 {
		t.Fatalf("server stats %+v, want 4 packets written and 3 dropped", st)
	}
	if n := promtest.ToFloat64(s.metrics.errors.WithLabelValues("output")); n != 1 {
		t.Fatalf("output errors %v, want 1", n)
	}
	if n := promtest.ToFloat64(s.metrics.packets.WithLabelValues("full")); n != 4 {
		t.Fatalf("packets metric %v, want 4", n)
	}
	// The output opened again: a new section with the second frame's packets.
	capturetest.Compare(t, capturetest.ReadPcapngFrom(t, &out.b), capturetest.Frames{"full:eth0": pkts[3:]})
}

// TestWelcomeWriteFailedFreesSlot checks that an agent whose connection fails while the
// welcome is written does not keep its max-agents slot: an agent of another name gets in.
func TestWelcomeWriteFailedFreesSlot(t *testing.T) {
	cfg := testServerConfig(t)
	cfg.MaxAgents = 1
	s := startServer(t, cfg)
	defer s.Stop()
	// net.Pipe is synchronous: the hello is written once the server has read it all, and the
	// welcome's write then fails on the closed pipe.
	client, server := net.Pipe()
	sc := &serverConn{c: server, raw: server, done: make(chan struct{}), takenOver: make(chan struct{})}
	s.mu.Lock()
	s.conns[sc] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serve(sc)
	hello, err := wire.AppendHello(nil, &wire.Hello{Version: wire.Version, AgentID: 1, AgentName: "vanished"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write(hello); err != nil {
		t.Fatal(err)
	}
	_ = client.Close()
	<-sc.done
	if _, wel := dialRaw(t, s.Addr().String(), "other", 2); wel.Status != wire.StatusOK {
		t.Fatalf("another agent after a failed welcome: %v, want ok", wel.Status)
	}
}

// TestMaxAgentsBusy connects a second agent to a server that takes one: it is answered busy
// (counted) and retries until the first leaves, while the first agent may still replace its
// own connection.
func TestMaxAgentsBusy(t *testing.T) {
	files := capturetest.Captures(t)[:2]
	cfg := testServerConfig(t)
	cfg.MaxAgents = 1
	s := startServer(t, cfg)
	defer s.Stop()
	first, wel := dialRaw(t, s.Addr().String(), "first", 1)
	if wel.Status != wire.StatusOK {
		t.Fatalf("first agent: %v", wel.Status)
	}
	a := startAgent(t, testAgentConfig("second", s.Addr().String(), files))
	testutil.WaitUntil(t, "a busy answer", func() bool {
		var r agent.RefusedError
		return errors.As(a.LastError(), &r) && r.Status == wire.StatusBusy
	})
	if n := promtest.ToFloat64(s.metrics.errors.WithLabelValues("too-many-agents")); n < 1 {
		t.Fatalf("too-many-agents errors %v", n)
	}
	// A reconnection of the connected agent is not refused, and the connection it replaces
	// (ended before the welcome) is no stream error.
	again, wel := dialRaw(t, s.Addr().String(), "first", 1)
	if wel.Status != wire.StatusOK {
		t.Fatalf("first agent reconnecting: %v", wel.Status)
	}
	for _, reason := range []string{"bad-frame", "truncated-frame"} {
		if n := promtest.ToFloat64(s.metrics.errors.WithLabelValues(reason)); n != 0 {
			t.Fatalf("%s errors %v after a takeover", reason, n)
		}
	}
	_ = first.conn.Close()
	if s.Stats("second").Connections != 0 {
		t.Fatal("the second agent connected while the first was")
	}
	_ = again.conn.Close()
	stats := waitDone(t, a)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	ss := s.Stats("second")
	if stats.Sent != stats.Captured || stats.Connections != 1 || ss.Packets != stats.Sent {
		t.Fatalf("second agent %+v, server %+v: want every packet sent once connected", stats, ss)
	}
}
