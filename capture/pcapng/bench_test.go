package pcapng

import (
	"io"
	"strconv"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"flowzero/internal/testutil"
)

// BenchmarkPcapngWrite compares gopacket's NgWriter.WritePacket with Writer.WritePacket
// (appendEPB into a large buffer), both writing to io.Discard, per packet.
func BenchmarkPcapngWrite(b *testing.B) {
	for _, size := range []int{64, 1500} {
		data := make([]byte, size)
		ts := testutil.Now()
		b.Run(strconv.Itoa(size)+"/ngwriter", func(b *testing.B) {
			w, err := pcapgo.NewNgWriter(io.Discard, layers.LinkTypeEthernet)
			if err != nil {
				b.Fatal(err)
			}
			ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: size, Length: size}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			cpu := testutil.StartCPU(b)
			for b.Loop() {
				if err := w.WritePacket(ci, data); err != nil {
					b.Fatal(err)
				}
			}
			cpu.Stop(b)
		})
		b.Run(strconv.Itoa(size)+"/flowzero", func(b *testing.B) {
			o := NewWriter(Configuration{Path: "-"}, Options{Stdout: io.Discard})
			id, err := o.AddInterface(Interface{Agent: "a", Name: "eth0", LinkType: 1})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			cpu := testutil.StartCPU(b)
			for b.Loop() {
				if err := o.WritePacket(id, ts.UnixNano(), uint32(size), data); err != nil {
					b.Fatal(err)
				}
			}
			cpu.Stop(b)
		})
	}
}
