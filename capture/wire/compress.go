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

// ErrRawLength is returned when a decompressed payload does not have the announced length.
var ErrRawLength = errors.New("wire: decompressed length differs from the frame header")

// Decompress appends the decompression of src to dst and checks its length is rawLen.
func (d *Decompressor) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
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
