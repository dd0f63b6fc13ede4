package bmp

import (
	"bufio"
	"fmt"
	"io"
)

// Reader splits a BMP byte stream (a TCP connection) into messages. A message may span any
// number of reads and a read may hold several messages. Messages that fit in the buffered
// reader are returned without copying; larger ones are copied into a scratch buffer kept
// across calls, so reading allocates nothing once warmed up.
type Reader struct {
	br      *bufio.Reader
	scratch []byte
	last    int // bytes to discard from br before the next message
}

// readerBuffer is large enough for any BGP message without extended-message support
// (4,096 bytes, RFC 4271) with many to spare, so most messages are read in place.
const readerBuffer = 64 << 10

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, readerBuffer)}
}

// Next returns the next whole message (common header included) and its parsed header. The
// slice is valid until the following call. At a clean end of stream between messages it
// returns io.EOF; a stream cut inside a message returns io.ErrUnexpectedEOF.
func (r *Reader) Next() (CommonHeader, []byte, error) {
	if r.last > 0 {
		if _, err := r.br.Discard(r.last); err != nil {
			return CommonHeader{}, nil, err
		}
		r.last = 0
	}
	hb, err := r.br.Peek(CommonHeaderLen)
	if err != nil {
		if err == io.EOF && len(hb) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return CommonHeader{}, nil, err
	}
	h, err := ParseCommonHeader(hb)
	if err != nil {
		return h, nil, err
	}
	n := int(h.Length)
	if n <= r.br.Size() {
		msg, err := r.br.Peek(n)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return h, nil, fmt.Errorf("reading %s message of %d bytes: %w", h.Type, n, err)
		}
		r.last = n
		return h, msg, nil
	}
	if cap(r.scratch) < n {
		r.scratch = make([]byte, n)
	}
	msg := r.scratch[:n]
	if _, err := io.ReadFull(r.br, msg); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, fmt.Errorf("reading %s message of %d bytes: %w", h.Type, n, err)
	}
	return h, msg, nil
}
