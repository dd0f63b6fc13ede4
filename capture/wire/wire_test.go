package wire

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
)

// realPackets returns the frames of every shared capture as wire packets.
func realPackets(tb testing.TB) []Packet {
	tb.Helper()
	var out []Packet
	for _, dir := range []string{"netflow", "sflow", "bmp", "decap"} {
		for _, path := range testdata.Glob(tb, filepath.Join(dir, "*.pcap")) {
			frames, err := pcapfile.ReadFrames(path)
			if err != nil {
				tb.Fatalf("%s: %v", path, err)
			}
			for _, fr := range frames {
				out = append(out, Packet{Timestamp: fr.Time.UnixNano(), Length: uint32(fr.Length), Interface: uint32(fr.Interface), Data: fr.Data})
			}
		}
	}
	if len(out) == 0 {
		tb.Fatal("no packets in the shared captures")
	}
	return out
}

func buildFrame(tb testing.TB, pkts []Packet, c *Compressor) []byte {
	tb.Helper()
	var fb FrameBuilder
	fb.Reset(7)
	var err error
	fb.Buf, err = AppendInterface(fb.Buf, &Interface{Index: 0, LinkType: 1, SnapLength: 65535, Name: "eth0"})
	if err != nil {
		tb.Fatal(err)
	}
	fb.Records++
	for i := range pkts {
		fb.Buf = AppendPacket(fb.Buf, &pkts[i])
		fb.Records++
	}
	fb.Buf = AppendHeartbeat(fb.Buf, &Heartbeat{Time: 1234, Captured: uint64(len(pkts))})
	fb.Buf = AppendDropReport(fb.Buf, &DropReport{Interface: AllInterfaces, Kernel: 3, Agent: 1 << 40})
	fb.Records += 2
	frame, err := fb.Finish(c)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Clone(frame)
}

// newCodec returns a compressor and a decompressor closed at the end of the test.
func newCodec(tb testing.TB) (*Compressor, *Decompressor) {
	tb.Helper()
	comp, err := NewCompressor()
	if err != nil {
		tb.Fatal(err)
	}
	dec, err := NewDecompressor()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(dec.Close)
	return comp, dec
}

func TestRoundTrip(t *testing.T) {
	pkts := realPackets(t)
	comp, dec := newCodec(t)
	for _, tc := range []struct {
		name string
		c    *Compressor
	}{{"plain", nil}, {"zstd", comp}} {
		t.Run(tc.name, func(t *testing.T) {
			frame := buildFrame(t, pkts, tc.c)
			fr := NewFrameReader(bytes.NewReader(frame), dec)
			h, payload, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if h.Seq != 7 || h.Records != uint32(len(pkts)+3) {
				t.Fatalf("header %+v", h)
			}
			if (h.Flags&FlagZstd != 0) != (tc.c != nil) {
				t.Fatalf("flags %#x", h.Flags)
			}
			if tc.c != nil && h.Length >= h.RawLength {
				t.Fatalf("zstd did not shrink the real captures: %d >= %d", h.Length, h.RawLength)
			}
			rec, rest, err := NextRecord(payload)
			if err != nil {
				t.Fatal(err)
			}
			intf, err := rec.Interface()
			if err != nil || intf != (Interface{Index: 0, LinkType: 1, SnapLength: 65535, Name: "eth0"}) {
				t.Fatalf("interface %+v %v", intf, err)
			}
			for i := range pkts {
				var p Packet
				n, err := ReadPacket(rest, &p)
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if p.Timestamp != pkts[i].Timestamp || p.Length != pkts[i].Length || p.Interface != pkts[i].Interface || !bytes.Equal(p.Data, pkts[i].Data) {
					t.Fatalf("packet %d differs", i)
				}
				rest = rest[n:]
			}
			rec, rest, _ = NextRecord(rest)
			if hb, err := rec.Heartbeat(); err != nil || hb.Captured != uint64(len(pkts)) || hb.Time != 1234 {
				t.Fatalf("heartbeat %+v %v", hb, err)
			}
			rec, rest, _ = NextRecord(rest)
			if d, err := rec.DropReport(); err != nil || d != (DropReport{Interface: AllInterfaces, Kernel: 3, Agent: 1 << 40}) {
				t.Fatalf("drop report %+v %v", d, err)
			}
			if len(rest) != 0 {
				t.Fatalf("%d bytes left", len(rest))
			}
			if _, _, err := fr.ReadFrame(); err != io.EOF {
				t.Fatalf("end: %v", err)
			}
			// A stream cut inside a frame is an unexpected EOF, not a clean end.
			fr = NewFrameReader(bytes.NewReader(frame[:len(frame)-1]), dec)
			if _, _, err := fr.ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("cut frame: %v", err)
			}
		})
	}
}

func TestHelloWelcome(t *testing.T) {
	in := Hello{Version: Version, Capabilities: CapZstd, AgentID: 0x0123456789abcdef, AgentName: "probe-1", Token: "s3cret"}
	b, err := AppendHello(nil, &in)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != HelloFixedLen+len("probe-1")+len("s3cret") {
		t.Fatalf("length %d", len(b))
	}
	out, err := ReadHello(bytes.NewReader(b))
	if err != nil || out != in {
		t.Fatalf("got %+v %v", out, err)
	}
	if _, err := ReadHello(bytes.NewReader(b[:len(b)-1])); err == nil {
		t.Fatal("truncated hello accepted")
	}
	bad := bytes.Clone(b)
	bad[0] = 'X'
	if _, err := ParseHello(bad); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("bad magic: %v", err)
	}
	if _, err := AppendHello(nil, &Hello{AgentName: string(make([]byte, 256))}); !errors.Is(err, ErrTooLong) {
		t.Fatalf("long name: %v", err)
	}
	w := Welcome{Version: Version, Status: StatusUnauthorized, Capabilities: CapZstd, LastSeq: 1 << 33}
	wb := AppendWelcome(nil, &w)
	if len(wb) != WelcomeLen {
		t.Fatalf("welcome length %d", len(wb))
	}
	if got, err := ParseWelcome(wb); err != nil || got != w {
		t.Fatalf("welcome %+v %v", got, err)
	}
}

// No field is truncated to 16 bits, unlike the seed article's format.
func TestWideFields(t *testing.T) {
	data := make([]byte, 70000)
	data[69999] = 0xAB
	in := Packet{Timestamp: -1, Length: 1<<32 - 1, Interface: 1<<32 - 2, Data: data}
	b := AppendPacket(nil, &in)
	var p Packet
	n, err := ReadPacket(b, &p)
	if err != nil || n != len(b) || p.Timestamp != -1 || p.Length != 1<<32-1 || p.Interface != 1<<32-2 || len(p.Data) != 70000 || p.Data[69999] != 0xAB {
		t.Fatalf("got %d %v ts=%d len=%d if=%d caplen=%d", n, err, p.Timestamp, p.Length, p.Interface, len(p.Data))
	}
}

func TestMalformed(t *testing.T) {
	var hdr [FrameHeaderLen]byte
	PutFrameHeader(hdr[:], &FrameHeader{Length: MaxFramePayload + 1, RawLength: MaxFramePayload + 1})
	if _, err := ParseFrameHeader(hdr[:]); !errors.Is(err, ErrFrameTooLong) {
		t.Fatalf("long frame: %v", err)
	}
	PutFrameHeader(hdr[:], &FrameHeader{Length: 16, RawLength: 16, Records: 3})
	if _, err := ParseFrameHeader(hdr[:]); !errors.Is(err, ErrRecordCount) {
		t.Fatalf("record count: %v", err)
	}
	pkt := AppendPacket(nil, &Packet{Data: []byte{1, 2, 3}})
	var p Packet
	if _, err := ReadPacket(pkt[:len(pkt)-1], &p); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated packet: %v", err)
	}
	pkt[4] = 15 // body shorter than the packet header
	if _, err := ReadPacket(pkt, &p); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("short body: %v", err)
	}
	pkt[4] = 19
	pkt[2], pkt[3] = 0, 1 // flags are 0 in version 1
	if _, err := ReadPacket(pkt, &p); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("unknown flag: %v", err)
	}
	if rec, _, err := NextRecord(pkt); err != nil || !errors.Is(rec.Packet(&p), ErrBadRecord) {
		t.Fatalf("unknown flag (record reader): %v", err)
	}
}

func TestZeroAlloc(t *testing.T) {
	pkts := realPackets(t)
	var fb FrameBuilder
	fb.Reset(1)
	for i := range pkts {
		fb.Buf = AppendPacket(fb.Buf, &pkts[i])
	}
	payload := bytes.Clone(fb.Buf[FrameHeaderLen:])
	allocs := testing.AllocsPerRun(100, func() {
		fb.Reset(2)
		for i := range pkts {
			fb.Buf = AppendPacket(fb.Buf, &pkts[i])
			fb.Records++
		}
		if _, err := fb.Finish(nil); err != nil {
			t.Fatal(err)
		}
		var p Packet
		for b := payload; len(b) > 0; {
			n, err := ReadPacket(b, &p)
			if err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame", allocs)
	}
}

// A compressed frame announcing MaxFramePayload bytes over a small payload is refused before
// the reader allocates that much: over a real zstd frame of one record (whose own header gives
// its true size), and over bytes that are not zstd at all.
func TestHugeRawLengthRefusedWithoutAllocating(t *testing.T) {
	comp, dec := newCodec(t)
	record := AppendHeartbeat(nil, &Heartbeat{Time: 1, Captured: 2})
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"zstd", comp.enc.EncodeAll(bytes.Repeat(record, 64), nil)},
		{"garbage", bytes.Repeat([]byte{0x5a}, 64)},
		// A valid zstd frame that states no content size (RFC 8878 3.1.1.1.1: descriptor 0,
		// then a window descriptor) holding one RLE block of 100 bytes: only the bound on
		// what its 10 bytes can decompress to refuses it before allocating.
		{"zstd-no-content-size", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x23, 0x03, 0x00, 0x5a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := make([]byte, FrameHeaderLen, FrameHeaderLen+len(tc.payload))
			PutFrameHeader(frame, &FrameHeader{Length: uint32(len(tc.payload)), Records: 64, Seq: 1, RawLength: MaxFramePayload, Flags: FlagZstd})
			frame = append(frame, tc.payload...)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _, err := NewFrameReader(bytes.NewReader(frame), dec).ReadFrame()
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrPayload) {
				t.Fatalf("got %v, want an ErrPayload", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n >= MaxFramePayload/4 {
				t.Fatalf("%d bytes allocated to refuse a %d-byte payload", n, len(tc.payload))
			}
		})
	}
}

// smallSeeds are frames of a single record of each type, plain and compressed: mutations of
// them exercise every record decoder quickly, where the real captures' frames are large.
func smallSeeds(tb testing.TB, pkt Packet, c *Compressor) [][]byte {
	tb.Helper()
	intf, err := AppendInterface(nil, &Interface{Index: 3, LinkType: 1, SnapLength: 262144, Name: "eth0"})
	if err != nil {
		tb.Fatal(err)
	}
	var seeds [][]byte
	for _, rec := range [][]byte{
		AppendPacket(nil, &pkt),
		intf,
		AppendHeartbeat(nil, &Heartbeat{Time: 1700000000000000000, Captured: 12}),
		AppendDropReport(nil, &DropReport{Interface: 3, Kernel: 5, Agent: 7}),
		AppendAck(nil, 9),
	} {
		for _, comp := range []*Compressor{nil, c} {
			var fb FrameBuilder
			fb.Reset(1)
			fb.Buf = append(fb.Buf, rec...)
			fb.Records = 1
			frame, err := fb.Finish(comp)
			if err != nil {
				tb.Fatal(err)
			}
			seeds = append(seeds, bytes.Clone(frame))
		}
	}
	return seeds
}

// FuzzCaptureWireDecode feeds arbitrary frames to the stream decoder: every input must decode
// or fail with an error, never panic or read out of bounds.
func FuzzCaptureWireDecode(f *testing.F) {
	pkts := realPackets(f)
	comp, err := NewCompressor()
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < len(pkts); i += 16 {
		end := min(i+16, len(pkts))
		f.Add(buildFrame(f, pkts[i:end], nil))
		f.Add(buildFrame(f, pkts[i:end], comp))
	}
	for _, s := range smallSeeds(f, pkts[0], comp) {
		f.Add(s)
	}
	dec, err := NewDecompressor()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data), dec)
		for {
			h, payload, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if len(payload) != int(h.RawLength) {
				t.Fatalf("payload %d, header says %d", len(payload), h.RawLength)
			}
			for rest := payload; len(rest) > 0; {
				var rec Record
				rec, rest, err = NextRecord(rest)
				if err != nil {
					break
				}
				var p Packet
				switch rec.Type {
				case RecordPacket:
					err := rec.Packet(&p)
					if err == nil && len(p.Data) != len(rec.Body)-16 {
						t.Fatal("packet data length")
					}
					// The inlined reader and the record reader must agree.
					var q Packet
					whole := rec.Body[:len(rec.Body):len(rec.Body)]
					whole = append(binary.LittleEndian.AppendUint64(nil, uint64(rec.Type)|uint64(rec.Flags)<<16|uint64(len(rec.Body))<<32), whole...)
					if _, qerr := ReadPacket(whole, &q); (qerr == nil) != (err == nil) || (err == nil && !bytes.Equal(p.Data, q.Data)) {
						t.Fatalf("ReadPacket %v, Record.Packet %v", qerr, err)
					}
				case RecordInterface:
					_, _ = rec.Interface()
				case RecordHeartbeat:
					_, _ = rec.Heartbeat()
				case RecordDropReport:
					_, _ = rec.DropReport()
				case RecordAck:
					// An acknowledgement re-encodes to its record (but for extra body bytes).
					if seq, err := rec.Ack(); err == nil && rec.Flags == 0 && !bytes.Equal(AppendAck(nil, seq)[RecordHeaderLen:], rec.Body[:8]) {
						t.Fatalf("ack %d re-encodes differently from % x", seq, rec.Body[:8])
					}
				}
			}
		}
	})
}

func TestCheckAgentName(t *testing.T) {
	for _, ok := range []string{"probe-1", "edge1.par1", "a", strings.Repeat("x", MaxNameLen)} {
		if err := CheckAgentName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a:b", "a/b", `a\b`, "a b", "{agent}", ".hidden", strings.Repeat("x", MaxNameLen+1),
		"y%Y", "x%D"} { // '%' would be a strftime conversion in per-agent file names
		if err := CheckAgentName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestInterfaceName: an interface record whose name is longer than MaxNameLen (the server's
// "agent:iface" must fit a pcapng option's 16-bit length) or holds a control character is
// malformed; the encoder refuses the same names and InterfaceName makes any name acceptable.
func TestInterfaceName(t *testing.T) {
	raw := func(name string) Record {
		b := binary.LittleEndian.AppendUint32(nil, 3)
		b = binary.LittleEndian.AppendUint16(b, 1)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
		b = binary.LittleEndian.AppendUint32(b, 65535)
		return Record{Type: RecordInterface, Body: append(b, name...)}
	}
	for _, ok := range []string{"eth0", "", "enp0s31f6.100", strings.Repeat("x", MaxNameLen)} {
		if i, err := raw(ok).Interface(); err != nil || i.Name != ok || i.Index != 3 {
			t.Errorf("%q: %+v, %v", ok, i, err)
		}
	}
	for _, bad := range []string{strings.Repeat("x", MaxNameLen+1), strings.Repeat("\x00", 65533), "eth\x000", "eth0\n", "a\x7f"} {
		if _, err := raw(bad).Interface(); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%q (%d bytes): %v, want ErrBadRecord", bad[:min(len(bad), 8)], len(bad), err)
		}
		if _, err := AppendInterface(nil, &Interface{Name: bad}); err == nil {
			t.Errorf("AppendInterface accepted %q", bad[:min(len(bad), 8)])
		}
		if fixed := InterfaceName(bad); CheckInterfaceName([]byte(fixed)) != nil {
			t.Errorf("InterfaceName(%q) = %q, still refused", bad[:min(len(bad), 8)], fixed)
		}
	}
	if got := InterfaceName("eth\x00\xff\n"); got != "eth?\xff?" {
		t.Errorf("InterfaceName: %q", got)
	}
}

// TestStarts tells a Hello, a Welcome and TLS apart by their first bytes, on what crypto/tls
// sends (a ClientHello, and the alert a client sends to a server whose certificate it refuses).
func TestStarts(t *testing.T) {
	hello, err := AppendHello(nil, &Hello{Version: Version, AgentID: 1, AgentName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	welcome := AppendWelcome(nil, &Welcome{Version: Version, Status: StatusTLSRequired})
	clientHello := func() []byte {
		c, s := net.Pipe()
		defer s.Close()
		go func() {
			_ = tls.Client(c, &tls.Config{ServerName: "capture"}).Handshake()
			c.Close()
		}()
		b := make([]byte, 5)
		if _, err := io.ReadFull(s, b); err != nil {
			t.Fatal(err)
		}
		return b
	}()
	alert := []byte{21, 3, 3, 0, 2, 2, 42}
	for _, tc := range []struct {
		name                  string
		b                     []byte
		isHello, isWel, isTLS bool
	}{
		{"hello", hello, true, false, false},
		{"welcome", welcome, false, true, false},
		{"client-hello", clientHello, false, false, true},
		{"alert", alert, false, false, true},
		{"http", []byte("GET / HTTP/1.1\r\n"), false, false, false},
		{"short", []byte{22, 3}, false, false, false},
	} {
		if StartsHello(tc.b) != tc.isHello || StartsWelcome(tc.b) != tc.isWel || StartsTLS(tc.b) != tc.isTLS {
			t.Errorf("%s (% x): hello %v, welcome %v, TLS %v; want %v %v %v", tc.name, tc.b[:min(5, len(tc.b))],
				StartsHello(tc.b), StartsWelcome(tc.b), StartsTLS(tc.b), tc.isHello, tc.isWel, tc.isTLS)
		}
	}
	if got := StatusTLSRequired.String(); got != "TLS required" {
		t.Errorf("status 5: %q", got)
	}
	if got := Status(77).String(); got != "status 77" {
		t.Errorf("status 77: %q", got)
	}
}

// TestReadFrameHeaderErrors checks that ReadFrame's header errors wrap ErrFrameHeader, and
// ErrFrameTooLong for an oversized frame.
func TestReadFrameHeaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    FrameHeader
		too  bool
	}{
		{"too-long", FrameHeader{Length: MaxFramePayload + 1, RawLength: MaxFramePayload + 1}, true},
		{"raw-length", FrameHeader{Length: 100, RawLength: 50}, false},
		{"record-count", FrameHeader{Length: 8, RawLength: 8, Records: 2}, false},
	} {
		var b [FrameHeaderLen]byte
		PutFrameHeader(b[:], &tc.h)
		_, _, err := NewFrameReader(bytes.NewReader(b[:]), nil).ReadFrame()
		if !errors.Is(err, ErrFrameHeader) || errors.Is(err, ErrFrameTooLong) != tc.too {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
