package wire

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
)

// Format constants (see the package documentation).
const (
	// Version is the framing version this package writes and reads.
	Version = 1
	// HelloFixedLen is the length of a Hello before the agent name and token.
	HelloFixedLen = 20
	// WelcomeLen is the length of the server's answer to a Hello.
	WelcomeLen = 20
	// FrameHeaderLen is the length of a frame header.
	FrameHeaderLen = 24
	// RecordHeaderLen is the length of every record's header.
	RecordHeaderLen = 8
	// PacketHeaderLen is the length of a packet record before the captured bytes.
	PacketHeaderLen = RecordHeaderLen + 16
	// AckLen is the length of an acknowledgement record.
	AckLen = RecordHeaderLen + 8
	// MaxFramePayload bounds a frame's payload (compressed or not) so that a bad length
	// cannot make a reader allocate without limit.
	MaxFramePayload = 16 << 20
	// MaxNameLen and MaxTokenLen bound the variable parts of a Hello.
	MaxNameLen  = 255
	MaxTokenLen = 1024
	// AllInterfaces is the interface index of a drop report about the whole agent.
	AllInterfaces = ^uint32(0)
)

var (
	helloMagic   = [4]byte{'F', 'Z', 'C', 'W'}
	welcomeMagic = [4]byte{'F', 'Z', 'C', 'S'}
)

// RecordType says what a record's body holds.
type RecordType uint16

// Record types.
const (
	RecordPacket     RecordType = 1
	RecordInterface  RecordType = 2
	RecordHeartbeat  RecordType = 3
	RecordDropReport RecordType = 4
	RecordAck        RecordType = 5
)

// Capabilities an agent announces and a server accepts.
const (
	CapZstd uint16 = 1 << 0
)

// FlagZstd marks a frame whose payload is one zstd frame.
const FlagZstd uint16 = 1 << 0

// Status is the server's verdict on a Hello.
type Status uint16

// Welcome statuses.
const (
	StatusOK                 Status = 0
	StatusUnsupportedVersion Status = 1
	StatusUnauthorized       Status = 2
	StatusMalformedHello     Status = 3
	StatusBusy               Status = 4
	// StatusTLSRequired answers, in plain text, a Hello sent without TLS to a TLS listener.
	StatusTLSRequired Status = 5
)

// String names the status for logs and errors.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusUnsupportedVersion:
		return "unsupported version"
	case StatusUnauthorized:
		return "unauthorized"
	case StatusMalformedHello:
		return "malformed hello"
	case StatusBusy:
		return "busy"
	case StatusTLSRequired:
		return "TLS required"
	}
	return "status " + strconv.Itoa(int(s))
}

// Hello opens a connection from an agent.
type Hello struct {
	Version      uint16
	Capabilities uint16
	// AgentID identifies one run of an agent (random at start), so that a reconnect can
	// resume after the last frame the server wrote.
	AgentID uint64
	// AgentName names the agent in file names, interface names and metrics.
	AgentName string
	Token     string
}

// Welcome is the server's answer to a Hello.
type Welcome struct {
	Version      uint16
	Status       Status
	Capabilities uint16
	// LastSeq is the sequence number of the last frame the server wrote for this agent id.
	LastSeq uint64
}

// Packet is one captured packet. Decoded packets point into the frame payload.
type Packet struct {
	// Timestamp is nanoseconds since the Unix epoch.
	Timestamp int64
	// Length is the packet's original length on the wire; len(Data) is the captured length.
	Length    uint32
	Interface uint32
	Data      []byte
}

// Interface announces a capture interface of an agent.
type Interface struct {
	Index      uint32
	LinkType   uint16
	SnapLength uint32
	Name       string
}

// Heartbeat tells the server the agent is alive while it has nothing to send.
type Heartbeat struct {
	Time     int64
	Captured uint64
}

// DropReport carries cumulative drop counters of an agent instance.
type DropReport struct {
	Interface uint32
	Kernel    uint64
	Agent     uint64
}

// ErrTooLong is returned when a name, token or frame exceeds the format's bounds.
var ErrTooLong = errors.New("wire: field too long")

// AppendHello appends h to dst.
func AppendHello(dst []byte, h *Hello) ([]byte, error) {
	if len(h.AgentName) == 0 || len(h.AgentName) > MaxNameLen || len(h.Token) > MaxTokenLen {
		return dst, ErrTooLong
	}
	dst = append(dst, helloMagic[:]...)
	dst = binary.LittleEndian.AppendUint16(dst, h.Version)
	dst = binary.LittleEndian.AppendUint16(dst, h.Capabilities)
	dst = binary.LittleEndian.AppendUint64(dst, h.AgentID)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(h.AgentName)))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(h.Token)))
	dst = append(dst, h.AgentName...)
	return append(dst, h.Token...), nil
}

// AppendWelcome appends w to dst.
func AppendWelcome(dst []byte, w *Welcome) []byte {
	dst = append(dst, welcomeMagic[:]...)
	dst = binary.LittleEndian.AppendUint16(dst, w.Version)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(w.Status))
	dst = binary.LittleEndian.AppendUint16(dst, w.Capabilities)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	return binary.LittleEndian.AppendUint64(dst, w.LastSeq)
}

// grow returns dst extended by n bytes, reallocating only when its capacity is too small.
func grow(dst []byte, n int) ([]byte, []byte) {
	l := len(dst)
	if cap(dst)-l < n {
		dst = slices.Grow(dst, n)
	}
	dst = dst[:l+n]
	return dst, dst[l:]
}

// AppendPacket appends a packet record to dst: a 24-byte header and the captured bytes. It
// allocates only when dst's capacity is too small. len(p.Data) must fit in 32 bits minus
// the header, which any real snap length does. The header is three 64-bit stores ({type,
// flags, body length}, timestamp, {length, interface}), then the data is copied.
func AppendPacket(dst []byte, p *Packet) []byte {
	dst, b := grow(dst, PacketHeaderLen+len(p.Data))
	binary.LittleEndian.PutUint64(b[0:8], uint64(RecordPacket)|uint64(16+len(p.Data))<<32)
	binary.LittleEndian.PutUint64(b[8:16], uint64(p.Timestamp))
	binary.LittleEndian.PutUint64(b[16:24], uint64(p.Length)|uint64(p.Interface)<<32)
	copy(b[PacketHeaderLen:], p.Data)
	return dst
}

func appendRecordHeader(dst []byte, t RecordType, bodyLen int) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(t))
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	return binary.LittleEndian.AppendUint32(dst, uint32(bodyLen))
}

// AppendInterface appends an interface announcement record to dst.
func AppendInterface(dst []byte, i *Interface) ([]byte, error) {
	if len(i.Name) > MaxNameLen {
		return dst, ErrTooLong
	}
	if err := CheckInterfaceName([]byte(i.Name)); err != nil {
		return dst, err
	}
	dst = appendRecordHeader(dst, RecordInterface, 12+len(i.Name))
	dst = binary.LittleEndian.AppendUint32(dst, i.Index)
	dst = binary.LittleEndian.AppendUint16(dst, i.LinkType)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(i.Name)))
	dst = binary.LittleEndian.AppendUint32(dst, i.SnapLength)
	return append(dst, i.Name...), nil
}

// AppendHeartbeat appends a heartbeat record to dst.
func AppendHeartbeat(dst []byte, h *Heartbeat) []byte {
	dst = appendRecordHeader(dst, RecordHeartbeat, 16)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.Time))
	return binary.LittleEndian.AppendUint64(dst, h.Captured)
}

// AppendDropReport appends a drop report record to dst.
func AppendDropReport(dst []byte, d *DropReport) []byte {
	dst = appendRecordHeader(dst, RecordDropReport, 24)
	dst = binary.LittleEndian.AppendUint32(dst, d.Interface)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, d.Kernel)
	return binary.LittleEndian.AppendUint64(dst, d.Agent)
}

// AppendAck appends an acknowledgement record (server to agent) to dst.
func AppendAck(dst []byte, seq uint64) []byte {
	dst = appendRecordHeader(dst, RecordAck, 8)
	return binary.LittleEndian.AppendUint64(dst, seq)
}

// FrameHeader describes one frame.
type FrameHeader struct {
	// Length is the payload length on the wire.
	Length  uint32
	Records uint32
	Seq     uint64
	// RawLength is the payload length once decompressed.
	RawLength uint32
	Flags     uint16
}

// PutFrameHeader writes h into b[:FrameHeaderLen].
func PutFrameHeader(b []byte, h *FrameHeader) {
	_ = b[FrameHeaderLen-1]
	binary.LittleEndian.PutUint32(b[0:], h.Length)
	binary.LittleEndian.PutUint32(b[4:], h.Records)
	binary.LittleEndian.PutUint64(b[8:], h.Seq)
	binary.LittleEndian.PutUint32(b[16:], h.RawLength)
	binary.LittleEndian.PutUint16(b[20:], h.Flags)
	binary.LittleEndian.PutUint16(b[22:], 0)
}

// FrameBuilder batches records into one frame in a reusable buffer:
//
//	fb.Reset(seq)
//	fb.Buf = wire.AppendPacket(fb.Buf, &p); fb.Records++
//	frame, err := fb.Finish(enc)
//
// Buf starts with FrameHeaderLen reserved bytes that Finish fills.
type FrameBuilder struct {
	Buf     []byte
	Records uint32
	seq     uint64
	zbuf    []byte
	inZbuf  bool // the finished frame is in zbuf
}

// Reset starts a new frame with sequence number seq, keeping the buffer's capacity.
func (f *FrameBuilder) Reset(seq uint64) {
	f.Buf = append(f.Buf[:0], make([]byte, FrameHeaderLen)...)
	f.Records = 0
	f.seq = seq
}

// PayloadLen returns the length of the records appended so far.
func (f *FrameBuilder) PayloadLen() int { return len(f.Buf) - FrameHeaderLen }

// Finish fills the frame header and returns the frame, ready to write. With a non-nil
// compressor the payload is compressed when that makes it smaller. The returned slice is
// valid until the next Reset.
func (f *FrameBuilder) Finish(c *Compressor) ([]byte, error) {
	raw := len(f.Buf) - FrameHeaderLen
	if raw > MaxFramePayload {
		return nil, ErrTooLong
	}
	h := FrameHeader{Length: uint32(raw), Records: f.Records, Seq: f.seq, RawLength: uint32(raw)}
	if c != nil && raw > 0 {
		f.zbuf = c.enc.EncodeAll(f.Buf[FrameHeaderLen:], append(f.zbuf[:0], make([]byte, FrameHeaderLen)...))
		if z := len(f.zbuf) - FrameHeaderLen; z < raw {
			h.Length = uint32(z)
			h.Flags = FlagZstd
			PutFrameHeader(f.zbuf, &h)
			f.inZbuf = true
			return f.zbuf, nil
		}
	}
	PutFrameHeader(f.Buf, &h)
	f.inZbuf = false
	return f.Buf, nil
}

// Take hands over the buffer holding the frame Finish returned and puts fresh (an empty
// buffer, possibly recycled) in its place, so that the frame can outlive the next Reset
// without being copied.
func (f *FrameBuilder) Take(fresh []byte) []byte {
	if f.inZbuf {
		out := f.zbuf
		f.zbuf = fresh[:0]
		return out
	}
	out := f.Buf
	f.Buf = fresh[:0]
	return out
}

// SetSeq overwrites the sequence number of a finished frame.
func SetSeq(frame []byte, seq uint64) {
	binary.LittleEndian.PutUint64(frame[8:16], seq)
}
