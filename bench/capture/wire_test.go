// Package capture compares flowzero's capture framing (flowzero/capture/wire) with the seed
// article's fixed big-endian header ("seedbinary", rewritten here from its description),
// msgpack and JSON, all with reused buffers, on the same packets in one run.
//
// The binary encoders write into one frame buffer, each record placed so that its data lands
// at the same address, copied from the same page-aligned packet: at 16 KiB both are one
// memmove whose cost depends on where the destination lies (4K aliasing), and that placement,
// not the encoder, would otherwise decide which one wins. docs/design/capture.md has the
// figures and why make bench-capture-wire runs 20 rounds.
package capture

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"flowzero/capture/wire"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
)

// seedPacket is the article's CapturePacket: gopacket's CaptureInfo plus an agent id.
type seedPacket struct {
	Timestamp      time.Time `json:"ts" msgpack:"ts"`
	CaptureLength  int       `json:"cap_len" msgpack:"cap_len"`
	Length         int       `json:"len" msgpack:"len"`
	InterfaceIndex int       `json:"iface_idx" msgpack:"iface_idx"`
	ID             uint32    `json:"id" msgpack:"id"`
	Data           []byte    `json:"data" msgpack:"data"`
}

// seedMetaLen is the article's fixed header: timestamp µs u64, then captured length, length,
// interface index and id in 16 bits each, big-endian. It truncates all four (flowzero does not).
const seedMetaLen = 16

func seedEncodeTo(dst []byte, p *seedPacket) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, seedMetaLen)...)
	b := dst[n:]
	binary.BigEndian.PutUint64(b[0:], uint64(p.Timestamp.UnixMicro()))
	binary.BigEndian.PutUint16(b[8:], uint16(p.CaptureLength))
	binary.BigEndian.PutUint16(b[10:], uint16(p.Length))
	binary.BigEndian.PutUint16(b[12:], uint16(p.InterfaceIndex))
	binary.BigEndian.PutUint16(b[14:], uint16(p.ID))
	return append(dst, p.Data...)
}

var errSeedShort = errors.New("seedbinary: short")

func seedDecode(b []byte, p *seedPacket) error {
	if len(b) < seedMetaLen {
		return errSeedShort
	}
	p.Timestamp = time.UnixMicro(int64(binary.BigEndian.Uint64(b[0:])))
	p.CaptureLength = int(binary.BigEndian.Uint16(b[8:]))
	p.Length = int(binary.BigEndian.Uint16(b[10:]))
	p.InterfaceIndex = int(binary.BigEndian.Uint16(b[12:]))
	p.ID = uint32(binary.BigEndian.Uint16(b[14:]))
	if len(b)-seedMetaLen < p.CaptureLength {
		return errSeedShort
	}
	p.Data = b[seedMetaLen : seedMetaLen+p.CaptureLength]
	return nil
}

// packetOfSize returns size bytes of real captured traffic (frames of the shared captures
// concatenated) with a real timestamp.
func packetOfSize(b *testing.B, size int) seedPacket {
	var data []byte
	var ts time.Time
	for _, path := range testdata.Glob(b, filepath.Join("*", "*.pcap")) {
		frames, err := pcapfile.ReadFrames(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, fr := range frames {
			if ts.IsZero() {
				ts = fr.Time
			}
			data = append(data, fr.Data...)
		}
		if len(data) >= size {
			break
		}
	}
	for len(data) < size {
		data = append(data, data...)
	}
	return seedPacket{Timestamp: ts, CaptureLength: size, Length: size, InterfaceIndex: 1, ID: 3, Data: data[:size]}
}

// frameDataAt is where the binary encoders' records put their data in the frame buffer: past
// the 4K-aliasing range of a page-aligned source, and not 32-byte aligned to it, as most
// packets in a capture ring are not.
const frameDataAt = 2048 + 8

// pageAligned returns n zero bytes starting on a 4096-byte boundary.
func pageAligned(n int) []byte {
	b := make([]byte, n+4096)
	off := int(uintptr(unsafe.Pointer(&b[0])) & 4095)
	return b[(4096-off)&4095:][:n]
}

func BenchmarkCaptureWire(b *testing.B) {
	for _, size := range []int{72, 1024, 16384} {
		sp := packetOfSize(b, size)
		sp.Data = append(pageAligned(size)[:0], sp.Data...)
		frame := make([]byte, frameDataAt+size)
		fp := wire.Packet{Timestamp: sp.Timestamp.UnixNano(), Length: uint32(sp.Length), Interface: uint32(sp.InterfaceIndex), Data: sp.Data}
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			b.Run("flowzero", func(b *testing.B) {
				buf := wire.AppendPacket(nil, &fp)
				b.Run("encode", func(b *testing.B) {
					at := frameDataAt - wire.PacketHeaderLen
					b.SetBytes(int64(size))
					b.ReportAllocs()
					cpu := testutil.StartCPU(b)
					for b.Loop() {
						wire.AppendPacket(frame[at:at], &fp)
					}
					cpu.Stop(b)
				})
				b.Run("decode", func(b *testing.B) {
					b.SetBytes(int64(size))
					b.ReportAllocs()
					var p wire.Packet
					cpu := testutil.StartCPU(b)
					for b.Loop() {
						if _, err := wire.ReadPacket(buf, &p); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
					if len(p.Data) != size {
						b.Fatal("bad decode")
					}
				})
			})
			b.Run("seedbinary", func(b *testing.B) {
				buf := seedEncodeTo(nil, &sp)
				b.Run("encode", func(b *testing.B) {
					at := frameDataAt - seedMetaLen
					b.SetBytes(int64(size))
					b.ReportAllocs()
					cpu := testutil.StartCPU(b)
					for b.Loop() {
						seedEncodeTo(frame[at:at], &sp)
					}
					cpu.Stop(b)
				})
				b.Run("decode", func(b *testing.B) {
					b.SetBytes(int64(size))
					b.ReportAllocs()
					var p seedPacket
					cpu := testutil.StartCPU(b)
					for b.Loop() {
						if err := seedDecode(buf, &p); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
					if size < 1<<16 && len(p.Data) != size {
						b.Fatal("bad decode")
					}
				})
			})
			b.Run("msgpack", func(b *testing.B) {
				var out bytes.Buffer
				enc := msgpack.NewEncoder(&out)
				if err := enc.Encode(&sp); err != nil {
					b.Fatal(err)
				}
				encoded := bytes.Clone(out.Bytes())
				b.Run("encode", func(b *testing.B) {
					b.SetBytes(int64(size))
					b.ReportAllocs()
					cpu := testutil.StartCPU(b)
					for b.Loop() {
						out.Reset()
						if err := enc.Encode(&sp); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
				})
				b.Run("decode", func(b *testing.B) {
					b.SetBytes(int64(size))
					b.ReportAllocs()
					rd := bytes.NewReader(encoded)
					dec := msgpack.NewDecoder(rd)
					var p seedPacket
					cpu := testutil.StartCPU(b)
					for b.Loop() {
						rd.Reset(encoded)
						dec.Reset(rd)
						if err := dec.Decode(&p); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
					if len(p.Data) != size {
						b.Fatal("bad decode")
					}
				})
			})
			b.Run("json", func(b *testing.B) {
				var out bytes.Buffer
				enc := json.NewEncoder(&out)
				if err := enc.Encode(&sp); err != nil {
					b.Fatal(err)
				}
				encoded := bytes.Clone(out.Bytes())
				b.Run("encode", func(b *testing.B) {
					b.SetBytes(int64(size))
					b.ReportAllocs()
					cpu := testutil.StartCPU(b)
					for b.Loop() {
						out.Reset()
						if err := enc.Encode(&sp); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
				})
				b.Run("decode", func(b *testing.B) {
					b.SetBytes(int64(size))
					b.ReportAllocs()
					var p seedPacket
					cpu := testutil.StartCPU(b)
					for b.Loop() {
						if err := json.Unmarshal(encoded, &p); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
					if len(p.Data) != size {
						b.Fatal("bad decode")
					}
				})
			})
		})
	}
}
