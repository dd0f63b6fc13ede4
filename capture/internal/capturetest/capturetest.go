// Package capturetest holds what the capture packages' tests share: the shared captures and
// their frames, pcapng files read back and compared, a test PKI, and a clock tests move.
package capturetest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"flowzero/internal/clock"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
)

// Quiet is a logger that discards everything.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Captures returns every .pcap file under the shared test data (the test is skipped, saying
// so, when it is absent).
func Captures(t testing.TB) []string { return testdata.AllCaptures(t) }

// Frames is what a pcapng output holds, by interface name ("agent:iface").
type Frames map[string][]pcapfile.Frame

// Expected returns the frames of each capture keyed by the pcapng interface name a server
// gives them when agent replays files.
func Expected(t testing.TB, agent string, files []string) Frames {
	t.Helper()
	want := Frames{}
	for _, path := range files {
		frames, err := pcapfile.ReadFrames(path)
		if err != nil {
			t.Fatal(err)
		}
		name := agent + ":" + strings.TrimSuffix(filepath.Base(path), ".pcap")
		want[name] = append(want[name], frames...)
	}
	return want
}

// Repeat returns the frames of m n times over, as replaying n loops writes them.
func Repeat(m Frames, n int) Frames {
	out := Frames{}
	for k, v := range m {
		for range n {
			out[k] = append(out[k], v...)
		}
	}
	return out
}

// Merge appends the frames of src to dst.
func Merge(dst, src Frames) {
	for k, v := range src {
		dst[k] = append(dst[k], v...)
	}
}

// Count returns the number of frames in m.
func (m Frames) Count() int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// ReadPcapng reads a pcapng file into frames keyed by interface name.
func ReadPcapng(t testing.TB, path string) Frames {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ReadPcapngFrom(t, f)
}

// ReadPcapngFrom reads a pcapng stream into frames keyed by interface name.
func ReadPcapngFrom(t testing.TB, r io.Reader) Frames {
	t.Helper()
	ng, err := pcapgo.NewNgReader(r, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	got := Frames{}
	for {
		data, ci, err := ng.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("reading pcapng: %v", err)
		}
		intf, err := ng.Interface(ci.InterfaceIndex)
		if err != nil {
			t.Fatal(err)
		}
		got[intf.Name] = append(got[intf.Name], pcapfile.Frame{Time: ci.Timestamp, LinkType: intf.LinkType,
			Data: bytes.Clone(data), Length: ci.Length})
	}
}

// Compare checks packet data, timestamps, lengths and link types per interface.
func Compare(t testing.TB, got, want Frames) {
	t.Helper()
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Errorf("%s: %d packets, want %d", name, len(g), len(w))
			continue
		}
		for i := range w {
			if !g[i].Time.Equal(w[i].Time) || !bytes.Equal(g[i].Data, w[i].Data) || g[i].Length != w[i].Length || g[i].LinkType != w[i].LinkType {
				t.Errorf("%s packet %d differs: time %v/%v, %d/%d bytes, length %d/%d, link %v/%v", name, i,
					g[i].Time, w[i].Time, len(g[i].Data), len(w[i].Data), g[i].Length, w[i].Length, g[i].LinkType, w[i].LinkType)
				break
			}
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected interface %q", name)
		}
	}
}

// EthernetFrames returns the first n Ethernet frames of the shared captures.
func EthernetFrames(t testing.TB, n int) []pcapfile.Frame {
	t.Helper()
	var out []pcapfile.Frame
	for _, path := range Captures(t) {
		frames, err := pcapfile.ReadFrames(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			if f.LinkType == layers.LinkTypeEthernet && len(out) < n {
				out = append(out, f)
			}
		}
	}
	if len(out) < n {
		t.Fatalf("%d Ethernet frames in the shared captures, want %d", len(out), n)
	}
	return out
}

// FrameFacts is what gopacket decodes from a frame, to check compiled filters against.
type FrameFacts struct {
	EtherType        layers.EthernetType
	Proto            uint8 // outer IP protocol / next header
	Src, Dst         netip.Addr
	HasPorts         bool
	SrcPort, DstPort uint16
}

func (f FrameFacts) String() string {
	return fmt.Sprintf("ethertype %#04x proto %d %v:%d -> %v:%d", uint16(f.EtherType), f.Proto, f.Src, f.SrcPort, f.Dst, f.DstPort)
}

// DecodeFacts decodes an Ethernet frame or, with link raw, a raw IP packet (whose EtherType is
// then the one its IP version would have on Ethernet).
func DecodeFacts(data []byte, link layers.LinkType) FrameFacts {
	var f FrameFacts
	pkt := gopacket.NewPacket(data, link, gopacket.Default)
	if eth, ok := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); ok {
		f.EtherType = eth.EthernetType
	} else if link == layers.LinkTypeRaw && pkt.Layer(layers.LayerTypeIPv4) != nil {
		f.EtherType = layers.EthernetTypeIPv4
	} else if link == layers.LinkTypeRaw && pkt.Layer(layers.LayerTypeIPv6) != nil {
		f.EtherType = layers.EthernetTypeIPv6
	} else {
		return f
	}
	switch f.EtherType {
	case layers.EthernetTypeIPv4:
		ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		f.Proto = uint8(ip.Protocol)
		f.Src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		f.Dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		f.HasPorts = ip.FragOffset == 0
	case layers.EthernetTypeIPv6:
		ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		f.Proto = uint8(ip.NextHeader)
		f.Src, _ = netip.AddrFromSlice(ip.SrcIP)
		f.Dst, _ = netip.AddrFromSlice(ip.DstIP)
		f.HasPorts = true
	}
	if f.Proto != 6 && f.Proto != 17 && f.Proto != 132 {
		f.HasPorts = false
	}
	if f.HasPorts {
		switch l := pkt.TransportLayer().(type) {
		case *layers.TCP:
			f.SrcPort, f.DstPort = uint16(l.SrcPort), uint16(l.DstPort)
		case *layers.UDP:
			f.SrcPort, f.DstPort = uint16(l.SrcPort), uint16(l.DstPort)
		case *layers.SCTP:
			f.SrcPort, f.DstPort = uint16(l.SrcPort), uint16(l.DstPort)
		default:
			f.HasPorts = false
		}
	}
	return f
}

// FilterFrames returns every Ethernet frame of the captures and, for those carrying IPv4 or
// IPv6 directly, the same packet without its Ethernet header, as a raw IP interface (tun,
// wireguard) delivers it; raw[i] is nil when frame i has no raw IP equivalent.
func FilterFrames(t testing.TB) (eth, raw [][]byte, facts []FrameFacts) {
	t.Helper()
	for _, path := range Captures(t) {
		fr, err := pcapfile.ReadFrames(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fr {
			if f.LinkType != layers.LinkTypeEthernet {
				continue
			}
			ff := DecodeFacts(f.Data, layers.LinkTypeEthernet)
			var r []byte
			if ff.EtherType == layers.EthernetTypeIPv4 || ff.EtherType == layers.EthernetTypeIPv6 {
				r = f.Data[14:]
				if rf := DecodeFacts(r, layers.LinkTypeRaw); rf != ff {
					t.Fatalf("%s: raw IP decodes as %+v, Ethernet as %+v", path, rf, ff)
				}
			}
			eth, raw, facts = append(eth, f.Data), append(raw, r), append(facts, ff)
		}
	}
	return eth, raw, facts
}

// PKI is a CA, a server certificate for 127.0.0.1 and a client certificate signed by it, and
// another CA, as PEM files.
type PKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey, OtherCA string
}

// NewPKI writes a PKI valid for an hour either side of now (the clock the components under
// test check certificates with).
func NewPKI(t testing.TB, now time.Time) PKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	mkCA := func(cn string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true,
			KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		return cert, key, der
	}
	ca, caKey, caDER := mkCA("flowzero test CA")
	_, _, otherDER := mkCA("another CA")
	leaf := func(cn string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, []byte) {
		key := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return der, kder
	}
	sDER, sKey := leaf("capture server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	cDER, cKey := leaf("capture agent", 3, x509.ExtKeyUsageClientAuth, nil)
	return PKI{
		CA: write("ca.pem", "CERTIFICATE", caDER), OtherCA: write("other-ca.pem", "CERTIFICATE", otherDER),
		ServerCert: write("server.pem", "CERTIFICATE", sDER), ServerKey: write("server-key.pem", "PRIVATE KEY", sKey),
		ClientCert: write("client.pem", "CERTIFICATE", cDER), ClientKey: write("client-key.pem", "PRIVATE KEY", cKey),
	}
}

// Clock is the test clock (testutil.Clock) moved forward by Advance: a test that must get past
// a timeout of the component it runs (output.idle-close, a rotation interval) advances the
// component's clock instead of sleeping.
type Clock struct {
	mu     sync.Mutex
	ahead  time.Duration
	origin clock.Clock
}

var _ clock.Clock = (*Clock)(nil)

// NewClock returns a Clock that reads testutil.Clock.
func NewClock() *Clock { return &Clock{origin: testutil.Clock()} }

// ClockAt returns a Clock stopped at t: only Advance moves it. For tests whose times never
// meet the machine's clock (file names from a rotation interval, packet times).
func ClockAt(t time.Time) *Clock { return &Clock{origin: stopped(t)} }

type stopped time.Time

func (s stopped) Now() time.Time { return time.Time(s) }

// Now returns the test clock's time, plus what Advance added.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.origin.Now().Add(c.ahead)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.ahead += d
	c.mu.Unlock()
}

// Keys returns the keys of m, for messages.
func Keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
