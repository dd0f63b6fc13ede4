// Package pcapfile reads pcap and pcapng files into memory for tests and offline tools
// (flowzero decode, replay): whole frames, or the UDP/TCP payloads they carry with their
// addresses. It is not a hot path; it favours gopacket's decoders over speed.
package pcapfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Frame is one captured packet.
type Frame struct {
	Time     time.Time
	LinkType layers.LinkType
	// Data is the captured bytes (CaptureInfo.CaptureLength of them).
	Data []byte
	// Length is the original length on the wire.
	Length int
	// Interface is the pcapng interface index (0 for pcap).
	Interface int
}

// Datagram is a UDP or TCP payload with its endpoints.
type Datagram struct {
	Time    time.Time
	Src     netip.AddrPort
	Dst     netip.AddrPort
	Payload []byte
}

type packetReader interface {
	ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// ReadFrames reads every frame of a pcap or pcapng file (detected by its magic number). A
// frame whose captured length is over its original length is an error. On error, the frames
// read before it are returned with it.
func ReadFrames(path string) ([]Frame, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readFrames(f, path)
}

func readFrames(r io.Reader, name string) ([]Frame, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%s: reading magic: %w", name, err)
	}
	var (
		pr       packetReader
		linkType func(ci gopacket.CaptureInfo) layers.LinkType
	)
	if bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pr = ng
		linkType = func(ci gopacket.CaptureInfo) layers.LinkType {
			if intf, err := ng.Interface(ci.InterfaceIndex); err == nil {
				return intf.LinkType
			}
			return ng.LinkType()
		}
	} else {
		pc, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pr = pc
		lt := pc.LinkType()
		linkType = func(gopacket.CaptureInfo) layers.LinkType { return lt }
	}
	var frames []Frame
	for {
		data, ci, err := pr.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return frames, nil
		}
		if err != nil {
			return frames, fmt.Errorf("%s: packet %d: %w", name, len(frames)+1, err)
		}
		if ci.CaptureLength > ci.Length {
			// pcapgo lets it through; a capture never holds more than was on the wire, and
			// replay and the flow counters trust Length.
			return frames, fmt.Errorf("%s: packet %d: captured length %d over original length %d: corrupt file",
				name, len(frames)+1, ci.CaptureLength, ci.Length)
		}
		frames = append(frames, Frame{
			Time:      ci.Timestamp,
			LinkType:  linkType(ci),
			Data:      bytes.Clone(data),
			Length:    ci.Length,
			Interface: ci.InterfaceIndex,
		})
	}
}

// ReadUDP returns the UDP payloads of a capture file, in file order. Frames that do not carry
// UDP are skipped. IP fragments are not reassembled.
func ReadUDP(path string) ([]Datagram, error) {
	return readTransport(path, layers.LayerTypeUDP)
}

// ReadTCP returns the non-empty TCP payloads of a capture file, in file order (no stream
// reassembly: captures with retransmissions need more care).
func ReadTCP(path string) ([]Datagram, error) {
	return readTransport(path, layers.LayerTypeTCP)
}

func readTransport(path string, want gopacket.LayerType) ([]Datagram, error) {
	frames, err := ReadFrames(path)
	if err != nil {
		return nil, err
	}
	var out []Datagram
	for _, fr := range frames {
		pkt := gopacket.NewPacket(fr.Data, fr.LinkType, gopacket.DecodeOptions{NoCopy: true, Lazy: true})
		var src, dst netip.Addr
		if l, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			src, _ = netip.AddrFromSlice(l.SrcIP.To4())
			dst, _ = netip.AddrFromSlice(l.DstIP.To4())
		} else if l, ok := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
			src, _ = netip.AddrFromSlice(l.SrcIP)
			dst, _ = netip.AddrFromSlice(l.DstIP)
		} else {
			continue
		}
		switch want {
		case layers.LayerTypeUDP:
			l, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if !ok {
				continue
			}
			out = append(out, Datagram{
				Time:    fr.Time,
				Src:     netip.AddrPortFrom(src, uint16(l.SrcPort)),
				Dst:     netip.AddrPortFrom(dst, uint16(l.DstPort)),
				Payload: l.Payload,
			})
		case layers.LayerTypeTCP:
			l, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if !ok || len(l.Payload) == 0 {
				continue
			}
			out = append(out, Datagram{
				Time:    fr.Time,
				Src:     netip.AddrPortFrom(src, uint16(l.SrcPort)),
				Dst:     netip.AddrPortFrom(dst, uint16(l.DstPort)),
				Payload: l.Payload,
			})
		}
	}
	return out, nil
}
