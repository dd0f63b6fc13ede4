// Package datagram is the record an inlet writes to Kafka for each UDP datagram it receives
// (mode: inlet) and an outlet reads back (mode: outlet): the datagram as it came off the
// socket, undecoded, with what the decoders need besides its bytes.
//
// # Format (version 1)
//
// A record is a fixed header followed by the datagram's payload, all integers big-endian:
//
//	offset  size  field
//	0       1     version (1)
//	1       1     flags: bits 0-1 protocol (1 NetFlow/IPFIX, 2 sFlow), bit 2 set for an
//	              IPv6 exporter address (else IPv4); the other bits are zero
//	2       8     receive time, Unix nanoseconds (int64)
//	10      4|16  exporter address
//	14|26   2     exporter source port
//	16|28   ...   payload (the UDP datagram, to the end of the record)
//
// 16 bytes of header for an IPv4 exporter, 28 for IPv6. The Kafka record's key (the
// exporter's address when records are keyed by exporter) is not needed to read it. A reader
// refuses a version it does not know, reserved flags and a header cut short, naming the
// position: a future version changes the version byte, never the meaning of version 1.
//
// # Batch records (version 2)
//
// An inlet packs the datagrams it reads together (one read of its socket, or up to
// inlet.batch-wait) into one record of version 2, so that Kafka, the producer and the broker
// handle one record instead of one per datagram:
//
//	offset  size  field
//	0       1     version (2)
//	1       1     flags: zero (reserved)
//	2       2     count of entries (1 to 65535)
//	4       ...   count entries, each a 4-byte length followed by a version 1 record of
//	              that length (header and payload, as above)
//
// Each entry keeps its own receive time, exporter address and port, and protocol. A reader
// refuses a count of zero, an entry running past the record, a count that does not match the
// entries and bytes after the last one, naming the entry and its byte offset; the entries
// before such an error are still read. An entry whose length holds but whose version 1 record
// does not parse is skipped, and the entries after it are read.
//
// Append and AppendEntry write into a caller's buffer, Parse and Reader return slices of the
// record: none of them allocates.
package datagram

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Version is the format version Append writes.
const Version = 1

// Protocol is the decoder a datagram goes to.
type Protocol uint8

const (
	// NetFlow is NetFlow v5/v9 and IPFIX (the netflow listeners).
	NetFlow Protocol = 1
	// SFlow is sFlow v5.
	SFlow Protocol = 2
)

// String returns the listener protocol name: netflow or sflow.
func (p Protocol) String() string {
	switch p {
	case NetFlow:
		return "netflow"
	case SFlow:
		return "sflow"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ProtocolOf returns the protocol of a listener protocol name (netflow, sflow), or 0.
func ProtocolOf(name string) Protocol {
	switch name {
	case "netflow":
		return NetFlow
	case "sflow":
		return SFlow
	}
	return 0
}

const (
	flagProtocolMask = 0x03
	flagIPv6         = 0x04
	flagsReserved    = ^byte(flagProtocolMask | flagIPv6)

	headerIPv4 = 16
	headerIPv6 = 28
)

// Datagram is one received UDP datagram.
type Datagram struct {
	// Received is when the inlet read the datagram.
	Received time.Time
	// Exporter is the datagram's source address and port (IPv4 unmapped).
	Exporter netip.AddrPort
	// Protocol is the listener's protocol.
	Protocol Protocol
	// Payload is the UDP payload; Parse returns a slice of the record.
	Payload []byte
}

// HeaderLen is the header size of a record for exporter a.
func HeaderLen(a netip.Addr) int {
	if a.Unmap().Is4() {
		return headerIPv4
	}
	return headerIPv6
}

// Append appends the record of d to dst and returns it. An IPv4-mapped IPv6 exporter address
// is written as IPv4.
func Append(dst []byte, d Datagram) []byte {
	addr := d.Exporter.Addr().Unmap()
	flags := byte(d.Protocol) & flagProtocolMask
	if !addr.Is4() {
		flags |= flagIPv6
	}
	dst = append(dst, Version, flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(d.Received.UnixNano()))
	if addr.Is4() {
		a4 := addr.As4()
		dst = append(dst, a4[:]...)
	} else {
		a16 := addr.As16()
		dst = append(dst, a16[:]...)
	}
	dst = binary.BigEndian.AppendUint16(dst, d.Exporter.Port())
	return append(dst, d.Payload...)
}

// ErrVersion is returned (wrapped) for a record of a version this reader does not know.
var ErrVersion = errors.New("unknown record version")

// Parse reads a record; the payload is a slice of rec, and an IPv4-mapped exporter address is
// unmapped. Errors say what is wrong and where.
func Parse(rec []byte) (Datagram, error) {
	var d Datagram
	if len(rec) < 2 {
		return d, fmt.Errorf("datagram record: %d bytes, shorter than the version and flags (2)", len(rec))
	}
	if rec[0] != Version {
		return d, fmt.Errorf("datagram record: byte 0: %w %d (this reader knows %d)", ErrVersion, rec[0], Version)
	}
	flags := rec[1]
	if flags&flagsReserved != 0 {
		return d, fmt.Errorf("datagram record: byte 1: reserved flags set (%#02x)", flags)
	}
	d.Protocol = Protocol(flags & flagProtocolMask)
	if d.Protocol != NetFlow && d.Protocol != SFlow {
		return d, fmt.Errorf("datagram record: byte 1: unknown protocol %d", d.Protocol)
	}
	hdr := headerIPv4
	if flags&flagIPv6 != 0 {
		hdr = headerIPv6
	}
	if len(rec) < hdr {
		return d, fmt.Errorf("datagram record: %d bytes, shorter than its header (%d)", len(rec), hdr)
	}
	d.Received = time.Unix(0, int64(binary.BigEndian.Uint64(rec[2:10])))
	var addr netip.Addr
	if hdr == headerIPv4 {
		addr = netip.AddrFrom4([4]byte(rec[10:14]))
	} else {
		addr = netip.AddrFrom16([16]byte(rec[10:26])).Unmap()
	}
	d.Exporter = netip.AddrPortFrom(addr, binary.BigEndian.Uint16(rec[hdr-2:hdr]))
	d.Payload = rec[hdr:]
	return d, nil
}
