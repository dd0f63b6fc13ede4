package protozero

import (
	"testing"

	"flowzero/pbwire"
)

//go:noinline
func loopVarintField(dst []byte, t pbwire.Tag, v uint64) []byte {
	dst = pbwire.AppendTag(dst, t)
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func loopFields(dst []byte) []byte {
	dst = loopVarintField(dst, tagInt32, uint64(int64(int32(input[0]))))
	dst = loopVarintField(dst, tagUint32, uint64(uint32(input[1])))
	dst = loopVarintField(dst, tagInt64, uint64(int64(input[2])))
	dst = loopVarintField(dst, tagUint64, input[3])
	return pbwire.AppendStringField(dst, tagString, inputString)
}

func BenchmarkScratch(b *testing.B) {
	b.Run("SOL", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleSOL()
			clobber(i)
		}
		c.stop(b)
	})
	b.Run("wide", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimplePbwire(currentSlot())
			clobber(i)
		}
		c.stop(b)
	})
	b.Run("loop", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			loopFields(currentSlot())
			clobber(i)
		}
		c.stop(b)
	})
	b.Run("vt", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleVT(currentSlot())
			clobber(i)
		}
		c.stop(b)
	})
}

func BenchmarkScratchHot(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.Run("wide", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimplePbwire(buf)
		}
		c.stop(b)
	})
	b.Run("loop", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			loopFields(buf)
		}
		c.stop(b)
	})
	b.Run("vt", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleVT(buf)
		}
		c.stop(b)
	})
	b.Run("protowire", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			writeSimpleProtowire(buf)
		}
		c.stop(b)
	})
}

func BenchmarkScratchParts(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.Run("varints", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			dst := buf
			dst = pbwire.AppendVarintField(dst, tagInt32, uint64(int64(int32(input[0]))))
			dst = pbwire.AppendVarintField(dst, tagUint32, uint64(uint32(input[1])))
			dst = pbwire.AppendVarintField(dst, tagInt64, uint64(int64(input[2])))
			dst = pbwire.AppendVarintField(dst, tagUint64, input[3])
		}
		c.stop(b)
	})
	b.Run("string", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			pbwire.AppendStringField(buf, tagString, inputString)
		}
		c.stop(b)
	})
	b.Run("copy", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
			copy(buf[:31], inputString)
		}
		c.stop(b)
	})
	b.Run("empty", func(b *testing.B) {
		c := startCPU(b)
		for i := 0; i < b.N; i++ {
		}
		c.stop(b)
	})
}
