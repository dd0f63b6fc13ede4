package file

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// MaxMessageSize bounds one archived message; a larger length prefix means a corrupt file.
const MaxMessageSize = 1 << 20

// Reader iterates over the messages of an archive file (plain, zstd or gzip, detected from
// the content). The slice returned by Next is valid until the next call.
type Reader struct {
	f   *os.File
	br  *bufio.Reader
	zr  *zstd.Decoder
	buf []byte
	n   int
}

// Open opens an archive file.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := newReader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.f = f
	return r, nil
}

// newReader reads an archive from in, detecting its compression; name prefixes its errors. A
// name ending in .zst or .gz (as the sink names its files) must hold that compression unless
// it is empty: read as plain length-delimited messages, a damaged magic number could
// otherwise end cleanly with garbage.
func newReader(in io.Reader, name string) (*Reader, error) {
	r := &Reader{}
	head := bufio.NewReaderSize(in, 64<<10)
	magic, _ := head.Peek(4)
	isZstd := bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd})
	isGzip := len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b
	switch {
	case len(magic) == 0:
		// An empty file is an empty archive: the sink's file before its first flush.
	case strings.HasSuffix(name, ".zst") && !isZstd:
		return nil, fmt.Errorf("%s: no zstd magic number at the start: corrupt archive", name)
	case strings.HasSuffix(name, ".gz") && !isGzip:
		return nil, fmt.Errorf("%s: no gzip magic number at the start: corrupt archive", name)
	}
	switch {
	case isZstd:
		zr, err := zstd.NewReader(head, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r.zr = zr
		r.br = bufio.NewReaderSize(zr, 64<<10)
	case isGzip:
		gr, err := gzip.NewReader(head)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r.br = bufio.NewReaderSize(gr, 64<<10)
	default:
		r.br = head
	}
	return r, nil
}

// Next returns the next message (without its length prefix), or io.EOF at the end. A
// truncated last message (the file of a crashed collector) is io.ErrUnexpectedEOF.
func (r *Reader) Next() ([]byte, error) {
	size, err := binary.ReadUvarint(r.br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("message %d: length: %w", r.n+1, err)
	}
	if size > MaxMessageSize {
		return nil, fmt.Errorf("message %d: length %d over %d: corrupt archive", r.n+1, size, MaxMessageSize)
	}
	if cap(r.buf) < int(size) {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	if _, err := io.ReadFull(r.br, r.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("message %d: %w", r.n+1, err)
	}
	r.n++
	return r.buf, nil
}

// Close closes the file.
func (r *Reader) Close() error {
	if r.zr != nil {
		r.zr.Close()
	}
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}
