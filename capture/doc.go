// Package capture is flowzero's capture forwarder: agents capture packets (AF_PACKET) or
// replay capture files and stream them to one server, which writes pcapng and, optionally,
// turns the packets into flows for the collector's pipeline. The framing is package
// capture/wire.
//
// # Design
//
// The seed problem is "tcpdump -w on every machine, then rsync": an extra write to disk and a
// delay. Here the agent batches packets into frames (256 KiB by default) in its own buffers
// and a sender writes them on one TCP (optionally TLS) connection; per packet, the agent's
// cost is a 24-byte header and a copy, the server's a bounds-checked header read and a copy
// into a pcapng Enhanced Packet Block.
//
// Connections: with max-agents connected, another agent is answered busy and retries with its
// reconnection backoff; an agent already connected may replace its connection (its old one
// is usually a dead peer), and a wrong token or version is refused.
//
// Delivery: every frame has a sequence number and stays in the agent's bounded queue until
// the server acknowledges it (once written to its output buffer). After a reconnect the
// server's welcome says which frame it wrote last, and the agent resends the rest, so a server
// stopped cleanly (Stop acknowledges what it wrote before closing) and restarted loses or
// duplicates nothing; after a crash, frames written but not yet acknowledged are written
// again (at least once). When the queue is full, live capture drops the new frame and counts
// its packets (the kernel ring cannot wait), replay waits while connected and until the
// first connection, and drops while disconnected after that. A frame with a malformed record
// is refused whole: the server writes nothing of it, counts its packets as server drops and
// acknowledges it anyway, since sending it again would fail again. The agent reports its
// kernel and buffer drops in drop-report records; the server exports them per agent with its
// own counters. Without loss from crashes: captured = written + counted drops.
//
// Filters: no libpcap (cgo, libpcap-dev) is required. A filter is raw classic BPF as printed
// by `tcpdump -ddd`, or an expression in a built-in subset of the tcpdump language (bpf.go:
// and, or, not, parentheses) compiled for each interface's link type, Ethernet or raw IP.
//
// Output: one pcapng section, one interface description block per (agent, interface) named
// "agent:iface" (or one file per agent), rotation by size and time with a maximum number of
// files named like tcpdump's -C/-G/-W, or stdout or a FIFO for live tools. Packets are
// counted as written once the output has written them out of its buffer; those a failed
// write loses (disk full, a reader gone) move to the server drops, so that the counters still
// add up. A FIFO never blocks the server: it is opened with O_NONBLOCK and, while no reader
// has opened it, the agents' frames wait unacknowledged (outputs_waiting is 1) and Stop still
// returns at once; when the reader goes away, frames wait for the next one. Meanwhile the
// server reads nothing from the agents: their writes time out after three heartbeats and they
// reconnect, so reconnects_total grows every ~15 s until a reader comes; the agent keeps its
// unacknowledged frames, and counts as agent drops what its bounded buffer cannot hold. At
// Stop, a reader that stopped reading gets one second before what is left counts as server
// drops, on a FIFO or on stdout piped to a tool (the server then writes through a
// non-blocking duplicate of stdout, whose writes take deadlines, and puts the pipe back in
// blocking mode at Stop). When the tool reading stdout quits, Server.Err reports it and the
// capture server command exits, as tcpdump -w - dies of SIGPIPE. A file opened again after a write error keeps what it holds (up to the last whole
// block) and gets a new section. With one file per agent, a disconnected agent's file is
// closed after output.idle-close (5 minutes) and its counters and metric series are
// forgotten; an agent that comes back appends a new section to its file: with rotation, to
// the last file of its series, which goes on from there as if the file had stayed open.
package capture
