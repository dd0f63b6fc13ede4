package datagram

import (
	"encoding/binary"
	"fmt"
)

// VersionBatch is the format version of a batch record.
const VersionBatch = 2

const (
	batchHeader = 4
	entryHeader = 4
	// MaxBatchEntries is the most entries a batch record holds.
	MaxBatchEntries = 1<<16 - 1
)

// AppendBatch appends the header of an empty batch record to dst; AppendEntry adds its
// entries. The record must start at dst[0].
func AppendBatch(dst []byte) []byte {
	return append(dst, VersionBatch, 0, 0, 0)
}

// EntryLen is the bytes AppendEntry adds for d.
func EntryLen(d Datagram) int {
	return entryHeader + HeaderLen(d.Exporter.Addr()) + len(d.Payload)
}

// AppendEntry appends d to the batch record rec (started by AppendBatch) and returns it. The
// caller keeps the count below MaxBatchEntries (BatchLen).
func AppendEntry(rec []byte, d Datagram) []byte {
	start := len(rec)
	rec = append(rec, 0, 0, 0, 0)
	rec = Append(rec, d)
	binary.BigEndian.PutUint32(rec[start:], uint32(len(rec)-start-entryHeader))
	binary.BigEndian.PutUint16(rec[2:4], binary.BigEndian.Uint16(rec[2:4])+1)
	return rec
}

// BatchLen returns the datagrams a record declares: the count of a batch record, 1 for
// any other (a version 1 record, or one that is not valid).
func BatchLen(rec []byte) int {
	if len(rec) >= batchHeader && rec[0] == VersionBatch {
		if n := int(binary.BigEndian.Uint16(rec[2:4])); n > 0 {
			return n
		}
	}
	return 1
}

// Reader reads the datagrams of a record, a version 1 record (one datagram) or a batch
// record, without allocating:
//
//	r := datagram.NewReader(rec)
//	for r.Next() {
//		d := r.Datagram()
//	}
//	if err := r.Err(); err != nil {
//		// the rest of the record is not valid
//	}
type Reader struct {
	rec   []byte
	off   int // of the next entry
	left  int // entries declared and not read yet
	index int // of the current entry, from 0
	batch bool
	d     Datagram
	err   error
}

// NewReader returns a reader of rec; the datagrams' payloads are slices of rec.
func NewReader(rec []byte) Reader {
	r := Reader{rec: rec, left: 1, index: -1}
	if len(rec) == 0 || rec[0] != VersionBatch {
		return r
	}
	r.batch = true
	switch {
	case len(rec) < batchHeader:
		r.err = fmt.Errorf("batch record: %d bytes, shorter than its header (%d)", len(rec), batchHeader)
	case rec[1] != 0:
		r.err = fmt.Errorf("batch record: byte 1: reserved flags set (%#02x)", rec[1])
	default:
		r.left = int(binary.BigEndian.Uint16(rec[2:4]))
		r.off = batchHeader
		if r.left == 0 {
			r.err = fmt.Errorf("batch record: bytes 2-3: no entries")
		}
	}
	if r.err != nil {
		r.left = 0
	}
	return r
}

// Next reads the next datagram; it returns false at the end of the record or at the first
// error (Err).
func (r *Reader) Next() bool {
	if r.left == 0 {
		if r.err == nil && r.batch && r.off != len(r.rec) {
			r.err = fmt.Errorf("batch record: byte %d: %d bytes after the last of its %d entries", r.off, len(r.rec)-r.off, r.index+1)
		}
		return false
	}
	r.left--
	r.index++
	if !r.batch {
		r.d, r.err = Parse(r.rec)
		return r.err == nil
	}
	rest := r.rec[r.off:]
	if len(rest) < entryHeader {
		return r.fail(fmt.Errorf("batch record: entry %d at byte %d: the record ends (%d entries declared)", r.index, r.off, r.index+r.left+1))
	}
	n := binary.BigEndian.Uint32(rest)
	if uint64(n) > uint64(len(rest)-entryHeader) {
		return r.fail(fmt.Errorf("batch record: entry %d at byte %d: length %d runs past the record's end (%d bytes left)", r.index, r.off, n, len(rest)-entryHeader))
	}
	d, err := Parse(rest[entryHeader : entryHeader+int(n)])
	if err != nil {
		return r.fail(fmt.Errorf("batch record: entry %d at byte %d: %w", r.index, r.off, err))
	}
	r.d = d
	r.off += entryHeader + int(n)
	return true
}

func (r *Reader) fail(err error) bool {
	r.err, r.left = err, 0
	return false
}

// Datagram is the datagram Next read.
func (r *Reader) Datagram() Datagram { return r.d }

// Err is the error that stopped Next, if any.
func (r *Reader) Err() error { return r.err }
