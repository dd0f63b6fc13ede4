package wire

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Compressor compresses frame payloads with zstd. Not safe for concurrent use.
type Compressor struct {
	enc *zstd.Encoder
}

// NewCompressor returns a zstd compressor at its fastest level: packets are forwarded on a
// LAN where CPU, not bandwidth, is the limit, so compression is off by default.
func NewCompressor() (*Compressor, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	if err != nil {
		return nil, err
	}
	return &Compressor{enc: enc}, nil
}

// Decompressor decompresses frame payloads. Not safe for concurrent use.
type Decompressor struct {
	dec *zstd.Decoder
}

// NewDecompressor returns a zstd decompressor whose output is bounded by MaxFramePayload.
func NewDecompressor() (*Decompressor, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxFramePayload))
	if err != nil {
		return nil, err
	}
	return &Decompressor{dec: dec}, nil
}

// Close releases the decompressor's resources.
func (d *Decompressor) Close() { d.dec.Close() }

// ErrRawLength is returned when a decompressed payload does not have the announced length, or
// cannot have it.
var ErrRawLength = errors.New("wire: decompressed length differs from the frame header")

// The most a zstd block decompresses to (RFC 8878 section 3.1.1.2.3, Block_Maximum_Size), and
// the fewest bytes a block takes: its 3-byte header and the one byte an RLE block repeats.
const (
	zstdMaxBlockOutput = 128 << 10
	zstdMinBlockLen    = 4
)

// Decompress appends the decompression of src to dst and checks its length is rawLen. The
// output buffer is sized by rawLen only once the zstd frame header agrees with it and src is
// long enough to hold that much output: a peer announcing MaxFramePayload over a few bytes of
// garbage, or over a frame that says otherwise, gets an error without the server allocating.
func (d *Decompressor) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return dst[:0], fmt.Errorf("wire: zstd: %w", err)
	}
	if h.HasFCS && h.FrameContentSize != uint64(rawLen) {
		return dst[:0], fmt.Errorf("%w: zstd frame content size %d, raw length %d", ErrRawLength, h.FrameContentSize, rawLen)
	}
	if most := uint64(len(src)/zstdMinBlockLen) * zstdMaxBlockOutput; uint64(rawLen) > most {
		return dst[:0], fmt.Errorf("%w: %d compressed bytes decompress to at most %d, raw length %d", ErrRawLength, len(src), most, rawLen)
	}
	if cap(dst) < rawLen {
		dst = make([]byte, 0, rawLen)
	}
	out, err := d.dec.DecodeAll(src, dst[:0])
	if err != nil {
		return dst[:0], fmt.Errorf("wire: zstd: %w", err)
	}
	if len(out) != rawLen {
		return out[:0], ErrRawLength
	}
	return out, nil
}
