package state

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"flowzero/decoder/netflow"
)

// Format (version 1), all integers big-endian. The key identifies what a record replaces,
// so that compaction keeps the latest record of each key:
//
//	key:   version (1) | kind (1) | exporter address, 16 bytes (IPv4 mapped) | exporter port (2)
//	       | NetFlow version (2) | observation domain (4) | template or sampler ID (8)
//	value: version (1) | flags (1; bit 0: template withdrawn) | receive time, Unix ns (8)
//	       | value (8: sampling rate, system init ms) | template record (rest)
//
// A withdrawal is a record, not a tombstone: it carries the time it happened, which decides
// between it and a definition from another datagram (the newest wins).
const (
	formatVersion = 1
	keyLen        = 34
	valueHeader   = 18

	flagWithdrawn = 1
)

// AppendKey appends the key of r.
func AppendKey(dst []byte, r netflow.StateRecord) []byte {
	a16 := r.Exporter.Addr().As16()
	dst = append(dst, formatVersion, byte(r.Kind))
	dst = append(dst, a16[:]...)
	dst = binary.BigEndian.AppendUint16(dst, r.Exporter.Port())
	dst = binary.BigEndian.AppendUint16(dst, r.Version)
	dst = binary.BigEndian.AppendUint32(dst, r.Domain)
	return binary.BigEndian.AppendUint64(dst, r.ID)
}

// AppendValue appends the value of r.
func AppendValue(dst []byte, r netflow.StateRecord) []byte {
	var flags byte
	if r.Withdrawn {
		flags |= flagWithdrawn
	}
	dst = append(dst, formatVersion, flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Received.UnixNano()))
	dst = binary.BigEndian.AppendUint64(dst, r.Value)
	if r.Withdrawn {
		return dst
	}
	return append(dst, r.Record...)
}

// Parse reads a record of the state topic; Record is a slice of value. Errors name the part
// and the position at fault.
func Parse(key, value []byte) (netflow.StateRecord, error) {
	var r netflow.StateRecord
	if len(key) != keyLen {
		return r, fmt.Errorf("state record: key of %d bytes, want %d", len(key), keyLen)
	}
	if key[0] != formatVersion {
		return r, fmt.Errorf("state record: key byte 0: unknown version %d", key[0])
	}
	r.Kind = netflow.StateKind(key[1])
	switch r.Kind {
	case netflow.StateTemplate, netflow.StateOptionsTemplate, netflow.StateSamplingRate, netflow.StateSystemInit:
	default:
		return r, fmt.Errorf("state record: key byte 1: unknown kind %d", key[1])
	}
	r.Exporter = netip.AddrPortFrom(netip.AddrFrom16([16]byte(key[2:18])).Unmap(), binary.BigEndian.Uint16(key[18:20]))
	r.Version = binary.BigEndian.Uint16(key[20:22])
	r.Domain = binary.BigEndian.Uint32(key[22:26])
	r.ID = binary.BigEndian.Uint64(key[26:34])
	if len(value) < valueHeader {
		return r, fmt.Errorf("state record: value of %d bytes, shorter than its header (%d)", len(value), valueHeader)
	}
	if value[0] != formatVersion {
		return r, fmt.Errorf("state record: value byte 0: unknown version %d", value[0])
	}
	if value[1]&^flagWithdrawn != 0 {
		return r, fmt.Errorf("state record: value byte 1: reserved flags set (%#02x)", value[1])
	}
	r.Withdrawn = value[1]&flagWithdrawn != 0
	r.Received = time.Unix(0, int64(binary.BigEndian.Uint64(value[2:10])))
	r.Value = binary.BigEndian.Uint64(value[10:18])
	r.Record = value[valueHeader:]
	if r.Withdrawn && len(r.Record) > 0 {
		return r, fmt.Errorf("state record: a withdrawal with %d bytes of template record", len(r.Record))
	}
	return r, nil
}
