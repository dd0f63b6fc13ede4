package capture

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// allCaptures returns every .pcap file under the shared test data.
func allCaptures(t testing.TB) []string { return testdata.AllCaptures(t) }

// expectedFrames returns the frames of each capture keyed by the pcapng interface name the
// server must give them.
func expectedFrames(t testing.TB, agent string, files []string) map[string][]pcapfile.Frame {
	t.Helper()
	want := map[string][]pcapfile.Frame{}
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

// readPcapng reads a pcapng file into frames keyed by interface name.
func readPcapng(t testing.TB, path string) map[string][]pcapfile.Frame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readPcapngFrom(t, f)
}

func readPcapngFrom(t testing.TB, r io.Reader) map[string][]pcapfile.Frame {
	t.Helper()
	ng, err := pcapgo.NewNgReader(r, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]pcapfile.Frame{}
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

// compareFrames checks packet data, timestamps, lengths and link types per interface.
func compareFrames(t testing.TB, got, want map[string][]pcapfile.Frame) {
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

func testServerConfig(t testing.TB) ServerConfiguration {
	cfg := DefaultServerConfiguration()
	cfg.Listen = "127.0.0.1:0"
	cfg.Output.Path = filepath.Join(t.TempDir(), "capture.pcapng")
	cfg.Output.FlushInterval = 20 * time.Millisecond
	cfg.IdleTimeout = 5 * time.Second
	return cfg
}

func startServer(t testing.TB, cfg ServerConfiguration) *Server {
	t.Helper()
	return startServerWith(t, cfg, ServerDependencies{Logger: quiet})
}

func startServerWith(t testing.TB, cfg ServerConfiguration, deps ServerDependencies) *Server {
	t.Helper()
	s, err := NewServer(prometheus.NewRegistry(), cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func testAgentConfig(name, server string, files []string) AgentConfiguration {
	cfg := DefaultAgentConfiguration()
	cfg.Name = name
	cfg.Server = server
	cfg.Replay.Files = files
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.Heartbeat = 100 * time.Millisecond
	cfg.ReconnectMin = 10 * time.Millisecond
	cfg.ReconnectMax = 200 * time.Millisecond
	cfg.DrainTimeout = 10 * time.Second
	return cfg
}

func startAgent(t testing.TB, cfg AgentConfiguration) *Agent {
	t.Helper()
	a, err := NewAgent(prometheus.NewRegistry(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	return a
}

// waitDone waits for a replaying agent's sources to finish, then stops it.
func waitDone(t testing.TB, a *Agent) AgentStats {
	t.Helper()
	select {
	case <-a.Done():
		if err := a.Err(); err != nil {
			t.Fatalf("agent sources: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not finish its replay")
	}
	if err := a.Stop(); err != nil {
		t.Fatalf("agent stop: %v", err)
	}
	return a.Stats()
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timeout waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client certificate.
type testPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey, OtherCA string
}

func newTestPKI(t testing.TB) testPKI {
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
	now := time.Now()
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
	return testPKI{
		CA: write("ca.pem", "CERTIFICATE", caDER), OtherCA: write("other-ca.pem", "CERTIFICATE", otherDER),
		ServerCert: write("server.pem", "CERTIFICATE", sDER), ServerKey: write("server-key.pem", "PRIVATE KEY", sKey),
		ClientCert: write("client.pem", "CERTIFICATE", cDER), ClientKey: write("client-key.pem", "PRIVATE KEY", cKey),
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
