package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Decoding errors. Callers count them by cause; they never panic on bad input.
var (
	ErrBadMagic     = errors.New("wire: bad magic")
	ErrVersion      = errors.New("wire: unsupported version")
	ErrTruncated    = errors.New("wire: truncated")
	ErrBadRecord    = errors.New("wire: malformed record")
	ErrFrameTooLong = errors.New("wire: frame longer than MaxFramePayload")
	ErrRecordCount  = errors.New("wire: record count does not match the payload")
)

// ParseHelloFixed parses the fixed part of a Hello and returns the number of bytes of the
// variable part (name and token) that follow.
func ParseHelloFixed(b []byte) (h Hello, rest int, err error) {
	if len(b) < HelloFixedLen {
		return h, 0, ErrTruncated
	}
	if [4]byte(b[:4]) != helloMagic {
		return h, 0, ErrBadMagic
	}
	h.Version = binary.LittleEndian.Uint16(b[4:])
	h.Capabilities = binary.LittleEndian.Uint16(b[6:])
	h.AgentID = binary.LittleEndian.Uint64(b[8:])
	n := int(binary.LittleEndian.Uint16(b[16:]))
	t := int(binary.LittleEndian.Uint16(b[18:]))
	if n == 0 || n > MaxNameLen || t > MaxTokenLen {
		return h, 0, fmt.Errorf("%w: name length %d, token length %d", ErrBadRecord, n, t)
	}
	return h, n + t, nil
}

// ParseHello parses a complete Hello. The strings are copied (a Hello is read once per
// connection).
func ParseHello(b []byte) (Hello, error) {
	h, rest, err := ParseHelloFixed(b)
	if err != nil {
		return h, err
	}
	if len(b) < HelloFixedLen+rest {
		return h, ErrTruncated
	}
	n := int(binary.LittleEndian.Uint16(b[16:]))
	h.AgentName = string(b[HelloFixedLen : HelloFixedLen+n])
	h.Token = string(b[HelloFixedLen+n : HelloFixedLen+rest])
	return h, nil
}

// ReadHello reads a Hello from r.
func ReadHello(r io.Reader) (Hello, error) {
	var fixed [HelloFixedLen]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return Hello{}, err
	}
	_, rest, err := ParseHelloFixed(fixed[:])
	if err != nil {
		return Hello{}, err
	}
	b := make([]byte, HelloFixedLen+rest)
	copy(b, fixed[:])
	if _, err := io.ReadFull(r, b[HelloFixedLen:]); err != nil {
		return Hello{}, err
	}
	return ParseHello(b)
}

// StartsHello reports whether b, the first bytes a server reads (at least 4), are a Hello's.
func StartsHello(b []byte) bool { return len(b) >= 4 && [4]byte(b[:4]) == helloMagic }

// StartsWelcome reports whether b, the first bytes an agent reads (at least 4), are a
// Welcome's.
func StartsWelcome(b []byte) bool { return len(b) >= 4 && [4]byte(b[:4]) == welcomeMagic }

// StartsTLS reports whether b (at least 3 bytes) starts like a TLS record of the handshake
// (22) or alert (21) type, version 3.x (RFC 8446 section 5.1): a TLS peer on the other end of
// a connection that expected a Hello or a Welcome.
func StartsTLS(b []byte) bool {
	return len(b) >= 3 && (b[0] == 22 || b[0] == 21) && b[1] == 3 && b[2] <= 4
}

// ParseWelcome parses the server's answer to a Hello.
func ParseWelcome(b []byte) (Welcome, error) {
	var w Welcome
	if len(b) < WelcomeLen {
		return w, ErrTruncated
	}
	if [4]byte(b[:4]) != welcomeMagic {
		return w, ErrBadMagic
	}
	w.Version = binary.LittleEndian.Uint16(b[4:])
	w.Status = Status(binary.LittleEndian.Uint16(b[6:]))
	w.Capabilities = binary.LittleEndian.Uint16(b[8:])
	w.LastSeq = binary.LittleEndian.Uint64(b[12:])
	return w, nil
}

// ParseFrameHeader parses a frame header and checks its bounds.
func ParseFrameHeader(b []byte) (FrameHeader, error) {
	var h FrameHeader
	if len(b) < FrameHeaderLen {
		return h, ErrTruncated
	}
	h.Length = binary.LittleEndian.Uint32(b[0:])
	h.Records = binary.LittleEndian.Uint32(b[4:])
	h.Seq = binary.LittleEndian.Uint64(b[8:])
	h.RawLength = binary.LittleEndian.Uint32(b[16:])
	h.Flags = binary.LittleEndian.Uint16(b[20:])
	if h.Length > MaxFramePayload || h.RawLength > MaxFramePayload {
		return h, ErrFrameTooLong
	}
	if h.Flags&FlagZstd == 0 && h.Length != h.RawLength {
		return h, fmt.Errorf("%w: raw length %d differs from length %d without compression", ErrBadRecord, h.RawLength, h.Length)
	}
	// Every record takes at least a header: a count that cannot fit is a lie.
	if uint64(h.Records)*RecordHeaderLen > uint64(h.RawLength) {
		return h, ErrRecordCount
	}
	return h, nil
}

// Record is one record of a frame payload; Body points into the payload.
type Record struct {
	Type  RecordType
	Flags uint16
	Body  []byte
}

// NextRecord splits the first record off b.
func NextRecord(b []byte) (rec Record, rest []byte, err error) {
	if len(b) < RecordHeaderLen {
		return rec, b, ErrTruncated
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if uint64(n) > uint64(len(b)-RecordHeaderLen) {
		return rec, b, ErrTruncated
	}
	end := RecordHeaderLen + int(n)
	rec.Type = RecordType(binary.LittleEndian.Uint16(b[0:]))
	rec.Flags = binary.LittleEndian.Uint16(b[2:])
	rec.Body = b[RecordHeaderLen:end:end]
	return rec, b[end:], nil
}

// ReadPacket decodes the packet record at the start of b without copying: p.Data points
// into b. It returns the record's length. One 64-bit load checks type, flags and length at
// once; the reasons for a refusal are worked out out of line.
func ReadPacket(b []byte, p *Packet) (int, error) {
	if len(b) >= PacketHeaderLen {
		h := binary.LittleEndian.Uint64(b)
		end := RecordHeaderLen + int(h>>32)
		if uint32(h) == uint32(RecordPacket) && end >= PacketHeaderLen && end <= len(b) {
			p.Timestamp = int64(binary.LittleEndian.Uint64(b[8:]))
			p.Length = binary.LittleEndian.Uint32(b[16:])
			p.Interface = binary.LittleEndian.Uint32(b[20:])
			p.Data = b[PacketHeaderLen:end:end]
			return end, nil
		}
	}
	return 0, packetError(b)
}

// packetError says why ReadPacket refused a record (out of line: the slow path).
func packetError(b []byte) error {
	if len(b) < PacketHeaderLen {
		return ErrTruncated
	}
	h := binary.LittleEndian.Uint64(b)
	if uint32(h) != uint32(RecordPacket) || h>>32 < 16 {
		return ErrBadRecord
	}
	return ErrTruncated
}

// Packet decodes a packet record's body.
func (r Record) Packet(p *Packet) error {
	if r.Type != RecordPacket || r.Flags != 0 || len(r.Body) < 16 {
		return ErrBadRecord
	}
	p.Timestamp = int64(binary.LittleEndian.Uint64(r.Body[0:]))
	p.Length = binary.LittleEndian.Uint32(r.Body[8:])
	p.Interface = binary.LittleEndian.Uint32(r.Body[12:])
	p.Data = r.Body[16:]
	return nil
}

// Interface decodes an interface announcement. The name is copied: announcements are rare.
// A name that CheckInterfaceName refuses makes the record malformed: it would become a
// pcapng if_name the writer cannot encode or a reader cannot show.
func (r Record) Interface() (Interface, error) {
	var i Interface
	if r.Type != RecordInterface || len(r.Body) < 12 {
		return i, ErrBadRecord
	}
	i.Index = binary.LittleEndian.Uint32(r.Body[0:])
	i.LinkType = binary.LittleEndian.Uint16(r.Body[4:])
	n := int(binary.LittleEndian.Uint16(r.Body[6:]))
	i.SnapLength = binary.LittleEndian.Uint32(r.Body[8:])
	if len(r.Body) < 12+n {
		return i, ErrBadRecord
	}
	if err := CheckInterfaceName(r.Body[12 : 12+n]); err != nil {
		return i, fmt.Errorf("%w: interface name: %v", ErrBadRecord, err)
	}
	i.Name = string(r.Body[12 : 12+n])
	return i, nil
}

// Heartbeat decodes a heartbeat.
func (r Record) Heartbeat() (Heartbeat, error) {
	var h Heartbeat
	if r.Type != RecordHeartbeat || len(r.Body) < 16 {
		return h, ErrBadRecord
	}
	h.Time = int64(binary.LittleEndian.Uint64(r.Body[0:]))
	h.Captured = binary.LittleEndian.Uint64(r.Body[8:])
	return h, nil
}

// DropReport decodes a drop report.
func (r Record) DropReport() (DropReport, error) {
	var d DropReport
	if r.Type != RecordDropReport || len(r.Body) < 24 {
		return d, ErrBadRecord
	}
	d.Interface = binary.LittleEndian.Uint32(r.Body[0:])
	d.Kernel = binary.LittleEndian.Uint64(r.Body[8:])
	d.Agent = binary.LittleEndian.Uint64(r.Body[16:])
	return d, nil
}

// Ack decodes an acknowledgement.
func (r Record) Ack() (uint64, error) {
	if r.Type != RecordAck || len(r.Body) < 8 {
		return 0, ErrBadRecord
	}
	return binary.LittleEndian.Uint64(r.Body), nil
}

// FrameReader reads frames from a stream into one reused buffer. Payloads are valid until the
// next ReadFrame.
type FrameReader struct {
	r    io.Reader
	hdr  [FrameHeaderLen]byte
	buf  []byte
	raw  []byte
	dec  *Decompressor
	Last FrameHeader
}

// NewFrameReader returns a reader of frames from r; dec may be nil when compression was not
// negotiated (a compressed frame is then an error).
func NewFrameReader(r io.Reader, dec *Decompressor) *FrameReader {
	return &FrameReader{r: r, dec: dec}
}

// ErrPayload is wrapped by ReadFrame's error when a frame was read whole but its payload
// cannot be decompressed. The stream is still in step: the next frame can be read.
var ErrPayload = errors.New("wire: frame payload cannot be decompressed")

// ErrFrameHeader is wrapped by ReadFrame's error when a frame header is malformed (too long,
// inconsistent lengths or record count): the stream is out of step and cannot go on.
var ErrFrameHeader = errors.New("wire: malformed frame header")

// ErrCompressed is returned for a compressed frame when no decompressor was given. It wraps
// ErrPayload.
var ErrCompressed = fmt.Errorf("%w: compressed frame without negotiated compression", ErrPayload)

// ReadFrame reads the next frame and returns its header and decompressed payload. A clean
// end of stream between frames returns io.EOF; one inside a frame io.ErrUnexpectedEOF.
func (fr *FrameReader) ReadFrame() (FrameHeader, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return FrameHeader{}, nil, err
	}
	h, err := ParseFrameHeader(fr.hdr[:])
	if err != nil {
		return h, nil, fmt.Errorf("%w: %w", ErrFrameHeader, err)
	}
	fr.Last = h
	if err := fr.readPayload(int(h.Length)); err != nil {
		return h, nil, err
	}
	if h.Flags&FlagZstd == 0 {
		return h, fr.buf, nil
	}
	if fr.dec == nil {
		return h, nil, ErrCompressed
	}
	fr.raw, err = fr.dec.Decompress(fr.raw[:0], fr.buf, int(h.RawLength))
	if err != nil {
		return h, nil, fmt.Errorf("%w: %w", ErrPayload, err)
	}
	return h, fr.raw, nil
}

// readPayload reads n bytes into fr.buf. A buffer larger than what was already needed grows
// only as the bytes arrive, so a peer announcing a large frame and sending nothing cannot make
// the reader hold MaxFramePayload bytes.
func (fr *FrameReader) readPayload(n int) error {
	if cap(fr.buf) >= n {
		fr.buf = fr.buf[:n]
		_, err := io.ReadFull(fr.r, fr.buf)
		return unexpected(err)
	}
	fr.buf = fr.buf[:0]
	for len(fr.buf) < n {
		chunk := min(n-len(fr.buf), max(64<<10, len(fr.buf)))
		fr.buf = slices.Grow(fr.buf, chunk)
		l := len(fr.buf)
		fr.buf = fr.buf[:l+chunk]
		if _, err := io.ReadFull(fr.r, fr.buf[l:]); err != nil {
			return unexpected(err)
		}
	}
	return nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
