package bmp

import (
	"bufio"
	"fmt"
	"io"
	"slices"
)

// Reader splits a BMP byte stream (a TCP connection) into messages. A message may span any
// number of reads and a read may hold several messages. Messages that fit in the buffered
// reader are returned without copying; larger ones are copied into a scratch buffer kept
// across calls, so reading allocates nothing once warmed up. The scratch buffer grows as the
// message's bytes arrive, never to the length its header announces before they do.
type Reader struct {
	br      *bufio.Reader
	scratch []byte
	last    int // bytes to discard from br before the next message
}

// readerBuffer is large enough for any BGP message without extended-message support
// (4,096 bytes, RFC 4271) with many to spare, so most messages are read in place.
const readerBuffer = 64 << 10

// scratchStep is how much the scratch buffer grows at most before the bytes it has room for
// arrived: a peer announcing a 1 MiB message and sending nothing more costs one step, not 1 MiB.
const scratchStep = 64 << 10

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
			return h, nil, bodyError(h, err)
		}
		r.last = n
		return h, msg, nil
	}
	msg := r.scratch[:0]
	for len(msg) < n {
		if len(msg) == cap(msg) {
			msg = slices.Grow(msg, min(scratchStep, n-len(msg)))
		}
		k, err := r.br.Read(msg[len(msg):min(cap(msg), n)])
		msg = msg[:len(msg)+k]
		if err != nil {
			r.scratch = msg
			return h, nil, bodyError(h, err)
		}
	}
	r.scratch = msg
	return h, msg, nil
}

// bodyError wraps an error met while reading a message's body: the stream ended (or broke)
// inside the message.
func bodyError(h CommonHeader, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %s message of %d bytes: %w", h.Type, h.Length, err)
}
