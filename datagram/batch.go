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
//	if n := r.Invalid(); n > 0 {
//		// n datagrams could not be read; r.Err() says where the first was
//	}
//
// An entry of a batch record whose length holds but whose datagram does not parse is skipped,
// and the entries after it are read: only a length that breaks the framing stops the reader.
type Reader struct {
	rec     []byte
	off     int // of the next entry
	left    int // entries declared and not read yet
	index   int // of the current entry, from 0
	batch   bool
	done    bool // the framing failed: nothing more can be read
	d       Datagram
	err     error // the first error
	invalid int   // datagrams not read
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
		r.stop(fmt.Errorf("batch record: %d bytes, shorter than its header (%d)", len(rec), batchHeader))
	case rec[1] != 0:
		r.stop(fmt.Errorf("batch record: byte 1: reserved flags set (%#02x)", rec[1]))
	default:
		r.left = int(binary.BigEndian.Uint16(rec[2:4]))
		r.off = batchHeader
		if r.left == 0 {
			r.stop(fmt.Errorf("batch record: bytes 2-3: no entries"))
		}
	}
	return r
}

// Next reads the next datagram; it returns false at the end of the record, or when the rest
// of the record cannot be framed (Err, Invalid).
func (r *Reader) Next() bool {
	for {
		if r.left == 0 {
			if !r.done && r.batch && r.off != len(r.rec) {
				r.stop(fmt.Errorf("batch record: byte %d: %d bytes after the last of its %d entries", r.off, len(r.rec)-r.off, r.index+1))
			}
			return false
		}
		r.left--
		r.index++
		if !r.batch {
			d, err := Parse(r.rec)
			if err != nil {
				return r.stop(err)
			}
			r.d = d
			return true
		}
		rest := r.rec[r.off:]
		if len(rest) < entryHeader {
			return r.stop(fmt.Errorf("batch record: entry %d at byte %d: the record ends (%d entries declared)", r.index, r.off, r.index+r.left+1))
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-entryHeader) {
			return r.stop(fmt.Errorf("batch record: entry %d at byte %d: length %d runs past the record's end (%d bytes left)", r.index, r.off, n, len(rest)-entryHeader))
		}
		d, err := Parse(rest[entryHeader : entryHeader+int(n)])
		at := r.off
		r.off += entryHeader + int(n)
		if err != nil {
			r.note(fmt.Errorf("batch record: entry %d at byte %d: %w", r.index, at, err))
			continue
		}
		r.d = d
		return true
	}
}

// note counts one datagram not read and keeps the first error.
func (r *Reader) note(err error) {
	r.invalid++
	if r.err == nil {
		r.err = err
	}
}

// stop ends the reading: the rest of the record counts as one datagram not read.
func (r *Reader) stop(err error) bool {
	r.note(err)
	r.left, r.done = 0, true
	return false
}

// Datagram is the datagram Next read.
func (r *Reader) Datagram() Datagram { return r.d }

// Err is the first error met, if any: the position and the reason of the first datagram not
// read.
func (r *Reader) Err() error { return r.err }

// Invalid is the number of datagrams that could not be read: the entries that did not parse,
// plus one for the rest of a record whose framing failed.
func (r *Reader) Invalid() int { return r.invalid }
