// Package mrt reads MRT routing information export files (RFC 6396) into a rib.RIB:
// TABLE_DUMP_V2 (PEER_INDEX_TABLE, RIB_IPV4/IPV6_UNICAST and their RFC 8050 Add-Path
// variants, with the abbreviated MP_REACH_NLRI of RIB entries), legacy TABLE_DUMP, and
// BGP4MP/BGP4MP_ET UPDATE messages and state changes applied in order. gzip and bzip2 input is
// recognized by its first bytes.
//
// Design: three goroutines share a load. The decompressor runs ahead into large buffers; a
// producer frames records in place in its read buffer (no allocation or copy per record),
// decodes TABLE_DUMP_V2 RIB records and recognizes their attribute sets by a 128-bit hash of
// the raw attribute bytes, so each distinct set of a dump is decoded once; the loading
// goroutine interns the new sets and applies the paths to the RIB, in one transaction. Other
// records (TABLE_DUMP, BGP4MP) are applied in file order by Loader.Apply, which caches
// attribute sets the same way. A corrupt record is skipped and counted; a broken framing or a
// truncated file ends the load with the records before it applied. A compressed file cut
// anywhere, at a record boundary or in its trailer too, is truncated: the decompressor's error
// ends the load, with the uncompressed byte offset.
package mrt

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
)

// MRT types and subtypes (RFC 6396 §4, RFC 8050 §4).
const (
	TypeTableDump   = 12
	TypeTableDumpV2 = 13
	TypeBGP4MP      = 16
	TypeBGP4MPET    = 17

	SubtypePeerIndexTable        = 1
	SubtypeRIBIPv4Unicast        = 2
	SubtypeRIBIPv4Multicast      = 3
	SubtypeRIBIPv6Unicast        = 4
	SubtypeRIBIPv6Multicast      = 5
	SubtypeRIBGeneric            = 6
	SubtypeRIBIPv4UnicastAddPath = 8
	SubtypeRIBIPv6UnicastAddPath = 10

	SubtypeBGP4MPStateChange         = 0
	SubtypeBGP4MPMessage             = 1
	SubtypeBGP4MPMessageAS4          = 4
	SubtypeBGP4MPStateChangeAS4      = 5
	SubtypeBGP4MPMessageLocal        = 6
	SubtypeBGP4MPMessageAS4Local     = 7
	SubtypeBGP4MPMessageAddPath      = 8
	SubtypeBGP4MPMessageAS4AddPath   = 9
	SubtypeBGP4MPMessageLocalAddPath = 10
	SubtypeBGP4MPMessageAS4LocalAP   = 11

	headerLength = 12
	// maxRecordLength bounds a record's length field: larger values are corruption (a full
	// RIB record with thousands of peers is well under this).
	maxRecordLength = 16 << 20
)

// ErrCorrupt is wrapped by errors about records that do not follow RFC 6396.
var ErrCorrupt = errors.New("corrupt MRT record")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// readerBuffer is the size of the buffer records are framed in; larger records are copied.
const readerBuffer = 1 << 18

// Record is one MRT record. Body aliases the Reader's buffer: valid until the next Next.
type Record struct {
	Timestamp    uint32
	Microseconds uint32 // _ET types only
	Type         uint16
	Subtype      uint16
	Body         []byte
}

// Reader reads MRT records from a possibly compressed stream.
type Reader struct {
	br     *bufio.Reader
	closer func()
	buf    []byte // records larger than br's buffer
	// Bytes counts the uncompressed bytes consumed (for progress).
	Bytes int64
}

// NewReader returns a Reader over r, decompressing gzip (1f 8b) and bzip2 ("BZh") input.
// Close stops the decompressing goroutine.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, readerBuffer)
	magic, _ := br.Peek(3)
	var src io.Reader = br
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		src = zr
	case bytes.Equal(magic, []byte("BZh")):
		src = bzip2.NewReader(br)
	default:
		return &Reader{br: br, closer: func() {}}, nil
	}
	ra := newReadahead(src)
	return &Reader{br: bufio.NewReaderSize(ra, readerBuffer), closer: ra.close}, nil
}

// Close releases the decompressor.
func (r *Reader) Close() { r.closer() }

// Next reads the next record. It returns io.EOF at a clean end of input and
// io.ErrUnexpectedEOF for a truncated record.
func (r *Reader) Next() (Record, error) {
	// §2: timestamp (4), type (2), subtype (2), length (4), message.
	hdr, err := r.br.Peek(headerLength)
	if err != nil {
		if err == io.EOF && len(hdr) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return Record{}, err
	}
	rec := Record{
		Timestamp: binary.BigEndian.Uint32(hdr[0:]),
		Type:      binary.BigEndian.Uint16(hdr[4:]),
		Subtype:   binary.BigEndian.Uint16(hdr[6:]),
	}
	n := int(binary.BigEndian.Uint32(hdr[8:]))
	if n > maxRecordLength {
		return Record{}, corrupt("record length %d", n)
	}
	var body []byte
	if headerLength+n <= r.br.Size() {
		// Common case: the record fits in the buffer, use it in place (valid until the next
		// read, which is the next call).
		b, err := r.br.Peek(headerLength + n)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Record{}, err
		}
		body = b[headerLength:]
		r.br.Discard(headerLength + n)
	} else {
		r.br.Discard(headerLength)
		if cap(r.buf) < n {
			r.buf = make([]byte, n)
		}
		body = r.buf[:n]
		if _, err := io.ReadFull(r.br, body); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Record{}, err
		}
	}
	r.Bytes += int64(headerLength + n)
	if rec.Type == TypeBGP4MPET {
		// §3: extended timestamp types carry microseconds first, counted in the length.
		if n < 4 {
			return Record{}, corrupt("ET record of %d bytes", n)
		}
		rec.Microseconds = binary.BigEndian.Uint32(body)
		body = body[4:]
	}
	rec.Body = body
	return rec, nil
}

// readahead decompresses in its own goroutine into a few large buffers.
type readahead struct {
	full  chan []byte
	free  chan []byte
	cur   []byte
	err   error
	errc  chan error
	done  chan struct{}
	owned []byte
}

const (
	readaheadChunk   = 1 << 20
	readaheadBuffers = 4
)

func newReadahead(src io.Reader) *readahead {
	ra := &readahead{
		full: make(chan []byte, readaheadBuffers),
		free: make(chan []byte, readaheadBuffers),
		errc: make(chan error, 1),
		done: make(chan struct{}),
	}
	for range readaheadBuffers {
		ra.free <- make([]byte, readaheadChunk)
	}
	go func() {
		var offset int64 // uncompressed bytes read so far
		for {
			var b []byte
			select {
			case b = <-ra.free:
			case <-ra.done:
				return
			}
			n, err := fill(src, b[:cap(b)])
			if n > 0 {
				select {
				case ra.full <- b[:n]:
				case <-ra.done:
					return
				}
			}
			offset += int64(n)
			if err != nil {
				// Only the source's plain EOF ends the input (Reader.Next then tells a record
				// boundary from a cut record); a decompressor's error, io.ErrUnexpectedEOF for
				// a cut stream or trailer included, is the file's and must end the load.
				if err != io.EOF {
					err = fmt.Errorf("decompressing after %d uncompressed bytes: %w", offset, err)
				}
				ra.errc <- err
				close(ra.full)
				return
			}
		}
	}()
	return ra
}

// fill reads from src until b is full or src fails, returning src's error as is: unlike
// io.ReadFull, a source's own io.ErrUnexpectedEOF stays distinct from its plain io.EOF.
func fill(src io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := src.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (ra *readahead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.owned != nil {
			ra.free <- ra.owned[:cap(ra.owned)]
			ra.owned = nil
		}
		if ra.err != nil {
			return 0, ra.err
		}
		b, ok := <-ra.full
		if !ok {
			ra.err = <-ra.errc
			return 0, ra.err
		}
		ra.cur, ra.owned = b, b
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

func (ra *readahead) close() {
	select {
	case <-ra.done:
	default:
		close(ra.done)
	}
}
