// Package wire is the capture forwarder's binary framing: how an agent streams captured
// packets to the server, and how the server acknowledges them. Fixed little-endian headers,
// batched in frames (the unit of compression and acknowledgement), are encoded by appending to
// the caller's buffer and decoded by slicing it, without allocating (docs/design/capture.md).
//
// # Format, version 1 (all integers little-endian)
//
// A connection starts with the agent's Hello:
//
//	off len  field
//	0   4    magic "FZCW"
//	4   2    version (1)
//	6   2    capabilities the agent can use (bit 0: zstd frames)
//	8   8    agent instance id (random per agent process: lets the server resume a stream)
//	16  2    agent name length N (1..255)
//	18  2    token length T (0..1024)
//	20  N    agent name, UTF-8, no ':' (it names pcapng interfaces "agent:iface")
//	20+N T   shared token
//
// The server answers with a Welcome (20 bytes):
//
//	0   4    magic "FZCS"
//	4   2    version (1)
//	6   2    status (0 ok, 1 unsupported version, 2 unauthorized, 3 malformed hello, 4 busy,
//	         5 TLS required: a TLS listener answers a Hello sent without TLS in plain text)
//	8   2    capabilities accepted (subset of the agent's)
//	10  2    reserved (0)
//	12  8    sequence number of the last frame the server wrote for this agent instance
//	         (0: none); the agent resends only later frames after a reconnect
//
// The server closes the connection after a non-zero status. A TLS listener answers a Hello
// sent without TLS with status 5 in plain text; a plain listener answers a TLS ClientHello with
// a Welcome in plain text, which the agent's TLS client finds where it expected a TLS record:
// both ends can tell which side expects TLS. Busy (the server has as many
// agents as it accepts) is temporary: the agent tries again with its reconnection backoff.
// After status ok, the agent sends frames:
//
//	0   4    payload length on the wire (≤ MaxFramePayload)
//	4   4    number of records
//	8   8    sequence number (1, 2, 3... per agent instance)
//	16  4    payload length once decompressed (= payload length when not compressed)
//	20  2    flags (bit 0: payload is one zstd frame)
//	22  2    reserved (0)
//	24  ...  payload: records back to back
//
// Each record starts with an 8-byte header {type u16, flags u16 (0 in version 1), body length
// u32}; a reader skips record types it does not know. Bodies:
//
//	packet (1):      timestamp ns since the Unix epoch i64, original length u32,
//	                 interface index u32, then the captured bytes (body length - 16 of them)
//	interface (2):   index u32, link type u16 (pcap LINKTYPE_*), name length u16,
//	                 snap length u32, name; sent before the first packet of an interface in
//	                 every connection
//	heartbeat (3):   agent clock ns i64, packets captured so far u64
//	drop report (4): interface index u32 (AllInterfaces for the agent as a whole), reserved u32,
//	                 packets dropped by the kernel u64, packets dropped by the agent's buffer
//	                 u64, both cumulative since the agent instance started
//
// The server sends acknowledgement records (type 5, body: last frame sequence number written
// u64) on the same connection, after writing each batch of frames.
package wire
