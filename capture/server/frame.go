package server

import (
	"errors"
	"log/slog"

	"flowzero/capture/pcapng"
	"flowzero/capture/wire"
	"flowzero/internal/lograte"
)

// connInterfaces maps an agent's interface indexes to pcapng interface ids for one
// connection (agents announce their interfaces again on every connection).
type connInterfaces struct {
	small [64]int32 // index+1 → id+1 for the common small indexes
	large map[uint32]int
	n     int // indexes mapped
	// refusedLog limits the lines about interfaces beyond max-interfaces-per-agent.
	refusedLog lograte.Local
}

func (c *connInterfaces) set(index uint32, id int) {
	if _, ok := c.get(index); !ok {
		c.n++
	}
	if index < uint32(len(c.small)) {
		c.small[index] = int32(id + 1)
		return
	}
	if c.large == nil {
		c.large = map[uint32]int{}
	}
	c.large[index] = id
}

func (c *connInterfaces) get(index uint32) (int, bool) {
	if index < uint32(len(c.small)) {
		id := int(c.small[index]) - 1
		return id, id >= 0
	}
	id, ok := c.large[index]
	return id, ok
}

// frameRecords are the records of one frame, decoded: its packets, and its other records with
// their place among the packets. A connection reuses one for all its frames.
type frameRecords struct {
	packets []wire.Packet
	others  []otherRecord
}

// otherRecord is an interface or drop-report record that comes before packets[at].
type otherRecord struct {
	at   int
	typ  wire.RecordType
	intf wire.Interface
	drop wire.DropReport
}

// maxKeptPackets bounds the packets a frameRecords keeps room for between frames (330 KB):
// enough for a default 256 KiB frame of the smallest packets, so that a connection's rare
// huge frame does not hold its memory for the connection's life.
const maxKeptPackets = 1 << 13

// decode decodes every record of a frame, so that a frame with a malformed record is refused
// whole rather than written in part. On error it returns the number of packets the frame
// holds as far as it can tell: the packet records before the bad one, plus the records the
// header announces beyond it, which cannot be read but are most likely packets (agents send
// packets in frames of their own).
func (r *frameRecords) decode(fh wire.FrameHeader, payload []byte) (packets uint64, err error) {
	if cap(r.packets) > maxKeptPackets {
		r.packets = nil
	}
	r.packets, r.others = r.packets[:0], r.others[:0]
	records := uint32(0)
	for rest := payload; len(rest) > 0; {
		var rec wire.Record
		if rec, rest, err = wire.NextRecord(rest); err != nil {
			break
		}
		records++
		switch rec.Type {
		case wire.RecordPacket:
			r.packets = append(r.packets, wire.Packet{})
			err = rec.Packet(&r.packets[len(r.packets)-1])
		case wire.RecordInterface:
			o := otherRecord{at: len(r.packets), typ: rec.Type}
			if o.intf, err = rec.Interface(); err == nil {
				r.others = append(r.others, o)
			}
		case wire.RecordDropReport:
			o := otherRecord{at: len(r.packets), typ: rec.Type}
			if o.drop, err = rec.DropReport(); err == nil {
				r.others = append(r.others, o)
			}
		}
		// Heartbeats need nothing: reading the frame pushed the read deadline back. Unknown
		// record types are skipped, as the format asks.
		if err != nil {
			break
		}
	}
	packets = uint64(len(r.packets))
	if err != nil {
		if fh.Records > records {
			packets += uint64(fh.Records - records)
		}
		return packets, err
	}
	if records != fh.Records {
		return packets, wire.ErrRecordCount
	}
	return packets, nil
}

// writeFrame writes the decoded records of one frame; called with st.out.mu held. A frame
// already written (resent after a reconnect whose acknowledgement was lost) is skipped. A
// refused frame (unreadable payload, malformed record) is not written at all: its packets
// count as server drops, and its sequence number is acknowledged like a written frame's,
// since sending it again would only fail again. It returns refused unless the frame was a
// duplicate.
func (s *Server) writeFrame(st *agentState, conn *connInterfaces, fh wire.FrameHeader, recs *frameRecords, refused error, refusedPackets uint64) error {
	if fh.Seq != 0 && fh.Seq <= st.lastSeq {
		return nil
	}
	st.m.frames.Inc()
	st.stats.Frames++
	if fh.Seq != 0 {
		st.lastSeq = fh.Seq
	}
	if refused != nil {
		st.dropServer(refusedPackets)
		return refused
	}
	var dropped uint64
	next := 0
	for i := range recs.others {
		o := &recs.others[i]
		dropped += s.writePackets(st, conn, recs.packets[next:o.at])
		next = o.at
		switch o.typ {
		case wire.RecordInterface:
			s.addInterface(st, conn, o.intf)
		case wire.RecordDropReport:
			st.reportDrops(o.drop)
		}
	}
	dropped += s.writePackets(st, conn, recs.packets[next:])
	if st.consumer != nil {
		st.consumer.Tick(s.clock.Now(), false)
	}
	st.dropServer(dropped)
	return nil
}

// writePackets writes packets to st's output and hands them to its consumer; it returns the
// number it could not write (unknown interface, output not open).
func (s *Server) writePackets(st *agentState, conn *connInterfaces, packets []wire.Packet) (dropped uint64) {
	for i := range packets {
		p := &packets[i]
		id, ok := conn.get(p.Interface)
		if !ok {
			dropped++
			continue
		}
		if err := st.out.w.WritePacket(id, p.Timestamp, p.Length, p.Data); err != nil {
			dropped++
			continue
		}
		if st.consumer != nil {
			st.consumer.Packet(p.Interface, st.out.w.LinkType(id), p.Timestamp, p.Length, p.Data)
		}
	}
	return dropped
}

// addInterface maps an interface the agent announced to its pcapng interface, adding one to
// the output the first time, within max-interfaces-per-agent.
func (s *Server) addInterface(st *agentState, conn *connInterfaces, in wire.Interface) {
	pin := pcapng.Interface{Agent: st.name, Name: in.Name, LinkType: in.LinkType, SnapLength: in.SnapLength}
	id, known := st.out.w.InterfaceID(pin)
	_, mapped := conn.get(in.Index)
	// Interfaces new to the output, and indexes new to the connection (they could all name
	// one interface), are bounded alike.
	if (!known && st.interfaces >= s.cfg.MaxInterfacesPerAgent) || (!mapped && conn.n >= s.cfg.MaxInterfacesPerAgent) {
		s.connErrorLocal(&conn.refusedLog, reasonTooManyInterfaces, slog.LevelWarn,
			"agent announced more interfaces than max-interfaces-per-agent: the others are refused and their packets dropped",
			"agent", st.name, "max-interfaces-per-agent", s.cfg.MaxInterfacesPerAgent, "interface", in.Name)
		return
	}
	if !known {
		// A write error is counted by the output; the interface keeps its id and the next
		// file describes it. A name the output cannot describe (Record.Interface refuses
		// them first) leaves the interface unmapped: its packets count as server drops.
		var err error
		id, err = st.out.w.AddInterface(pin)
		if errors.Is(err, pcapng.ErrInterfaceName) {
			s.connErrorLocal(&conn.refusedLog, reasonBadFrame, slog.LevelWarn,
				"agent announced an interface whose name the output cannot hold: its packets are dropped",
				"agent", st.name, "error", err)
			return
		}
		st.interfaces++
	}
	st.out.setOwner(id, st)
	conn.set(in.Index, id)
}

// reportDrops applies an agent's drop report, whose counters are cumulative since the agent
// instance started.
func (st *agentState) reportDrops(d wire.DropReport) {
	if d.Interface != wire.AllInterfaces {
		return
	}
	if d.Kernel > st.lastKernel {
		st.m.dropKernel.Add(float64(d.Kernel - st.lastKernel))
		st.stats.DropKernel += d.Kernel - st.lastKernel
		st.lastKernel = d.Kernel
	}
	if d.Agent > st.lastAg {
		st.m.dropAgent.Add(float64(d.Agent - st.lastAg))
		st.stats.DropAgent += d.Agent - st.lastAg
		st.lastAg = d.Agent
	}
}
