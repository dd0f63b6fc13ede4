package server

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/agent"
	"flowzero/capture/internal/capturetest"
	"flowzero/capture/wire"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testutil"
)

// TestReplayToServer replays every shared capture to a server on loopback and reads the
// pcapng back: same bytes, timestamps and lengths, each packet on its agent:file interface.
func TestReplayToServer(t *testing.T) {
	files := capturetest.Captures(t)
	pki := capturetest.NewPKI(t, testutil.Now())
	cases := []struct {
		name       string
		editServer func(*Configuration)
		editAgent  func(*agent.Configuration)
	}{
		{"plain", nil, nil},
		{"zstd", nil, func(c *agent.Configuration) { c.Compress = true }},
		{"tls", func(c *Configuration) {
			c.TLS = TLSConfiguration{Enable: true, Cert: pki.ServerCert, Key: pki.ServerKey}
		}, func(c *agent.Configuration) {
			c.TLS = agent.TLSConfiguration{Enable: true, CA: pki.CA}
		}},
		{"tls-client-cert", func(c *Configuration) {
			c.TLS = TLSConfiguration{Enable: true, Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}
			c.Tokens = []string{"s3cret"}
		}, func(c *agent.Configuration) {
			c.TLS = agent.TLSConfiguration{Enable: true, CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}
			c.Token = "s3cret"
			c.Compress = true
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scfg := testServerConfig(t)
			if tc.editServer != nil {
				tc.editServer(&scfg)
			}
			s := startServer(t, scfg)
			acfg := testAgentConfig("probe1", s.Addr().String(), files)
			if tc.editAgent != nil {
				tc.editAgent(&acfg)
			}
			a := startAgent(t, acfg)
			stats := waitDone(t, a)
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			want := capturetest.Expected(t, "probe1", files)
			total := 0
			for _, fr := range want {
				total += len(fr)
			}
			if stats.Captured != uint64(total) || stats.Sent != uint64(total) || stats.DroppedAgent != 0 {
				t.Fatalf("agent stats %+v, want %d packets captured and sent", stats, total)
			}
			ss := s.Stats("probe1")
			if ss.Packets != uint64(total) || ss.DropServer != 0 || ss.Connections != 1 {
				t.Fatalf("server stats %+v, want %d packets", ss, total)
			}
			capturetest.Compare(t, capturetest.ReadPcapng(t, scfg.Output.Path), want)
		})
	}
}

// TestRefused checks that a wrong token, a missing client certificate and an unknown server
// certificate are refused, and nothing is written.
func TestRefused(t *testing.T) {
	files := capturetest.Captures(t)[:2]
	pki := capturetest.NewPKI(t, testutil.Now())
	cases := []struct {
		name       string
		editServer func(*Configuration)
		editAgent  func(*agent.Configuration)
		check      func(error) bool
	}{
		{"wrong-token", func(c *Configuration) { c.Tokens = []string{"good", "other"} },
			func(c *agent.Configuration) { c.Token = "bad" },
			func(err error) bool {
				var r agent.RefusedError
				return errors.As(err, &r) && r.Status == wire.StatusUnauthorized
			}},
		{"no-client-cert", func(c *Configuration) {
			c.TLS = TLSConfiguration{Enable: true, Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}
		}, func(c *agent.Configuration) { c.TLS = agent.TLSConfiguration{Enable: true, CA: pki.CA} },
			func(err error) bool { return err != nil }},
		{"unknown-server-ca", func(c *Configuration) {
			c.TLS = TLSConfiguration{Enable: true, Cert: pki.ServerCert, Key: pki.ServerKey}
		}, func(c *agent.Configuration) { c.TLS = agent.TLSConfiguration{Enable: true, CA: pki.OtherCA} },
			func(err error) bool { return err != nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scfg := testServerConfig(t)
			tc.editServer(&scfg)
			s := startServer(t, scfg)
			defer s.Stop()
			acfg := testAgentConfig("intruder", s.Addr().String(), files)
			tc.editAgent(&acfg)
			acfg.DrainTimeout = 100 * time.Millisecond
			a := startAgent(t, acfg)
			testutil.WaitUntil(t, "a refusal", func() bool { return tc.check(a.LastError()) })
			<-a.Done()
			_ = a.Stop()
			st := a.Stats()
			if st.Sent != 0 || st.Connections != 0 || st.Captured != st.DroppedAgent {
				t.Fatalf("agent stats %+v", st)
			}
			if ss := s.Stats("intruder"); ss.Packets != 0 {
				t.Fatalf("server wrote %d packets of a refused agent", ss.Packets)
			}
			if tc.name == "wrong-token" {
				if n := promtest.ToFloat64(s.metrics.errors.WithLabelValues("unauthorized")); n < 1 {
					t.Fatalf("unauthorized counter %v", n)
				}
			}
		})
	}
}

// TestReplayRecordedSpeed replays a pcapng file (written here, with the gaps of a real
// capture's first packets stretched to 150 ms) at recorded speed: the gaps are kept, the
// timestamps are the file's.
func TestReplayRecordedSpeed(t *testing.T) {
	src, err := pcapfile.ReadFrames(capturetest.Captures(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gaps.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcapgo.NewNgWriter(f, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	base := testutil.Now().Truncate(time.Second).Add(123456789)
	for i := range 4 {
		data := src[i%len(src)].Data
		ci := gopacket.CaptureInfo{Timestamp: base.Add(time.Duration(i) * 150 * time.Millisecond), CaptureLength: len(data), Length: len(data) + 10}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	scfg := testServerConfig(t)
	s := startServer(t, scfg)
	acfg := testAgentConfig("slow", s.Addr().String(), []string{path})
	acfg.Replay.Speed = "recorded"
	// The replay's pacing is real time: its duration is measured on the machine's clock.
	start := time.Now()
	a := startAgent(t, acfg)
	waitDone(t, a)
	elapsed := time.Since(start)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if elapsed < 450*time.Millisecond {
		t.Fatalf("replay of 450 ms of traffic took %v", elapsed)
	}
	got := capturetest.ReadPcapng(t, scfg.Output.Path)["slow:gaps"]
	if len(got) != 4 {
		t.Fatalf("%d packets", len(got))
	}
	for i, fr := range got {
		if want := base.Add(time.Duration(i) * 150 * time.Millisecond); !fr.Time.Equal(want) || fr.Length != len(fr.Data)+10 {
			t.Fatalf("packet %d: %v (want %v), length %d", i, fr.Time, want, fr.Length)
		}
	}
}

// TestReplayPcapngInterfaces replays a pcapng file with two interfaces (written here from real
// frames): each becomes an agent interface named file.iface, and every packet keeps its own.
func TestReplayPcapngInterfaces(t *testing.T) {
	src, err := pcapfile.ReadFrames(capturetest.Captures(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "multi.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcapgo.NewNgWriterInterface(f, pcapgo.NgInterface{Name: "eth0", LinkType: layers.LinkTypeEthernet, TimestampResolution: 9}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddInterface(pcapgo.NgInterface{Name: "eth1", LinkType: layers.LinkTypeEthernet, TimestampResolution: 9}); err != nil {
		t.Fatal(err)
	}
	base := testutil.Now().Truncate(time.Second).Add(1)
	for i := range 6 {
		data := src[i%len(src)].Data
		ci := gopacket.CaptureInfo{Timestamp: base.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(data), Length: len(data), InterfaceIndex: i % 2}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	scfg := testServerConfig(t)
	s := startServer(t, scfg)
	waitDone(t, startAgent(t, testAgentConfig("ng", s.Addr().String(), []string{path})))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	got := capturetest.ReadPcapng(t, scfg.Output.Path)
	for i, name := range []string{"ng:multi.eth0", "ng:multi.eth1"} {
		frames := got[name]
		if len(frames) != 3 {
			t.Fatalf("%s: %d packets (%v)", name, len(frames), capturetest.Keys(got))
		}
		for j, fr := range frames {
			if want := base.Add(time.Duration(2*j+i) * time.Microsecond); !fr.Time.Equal(want) {
				t.Fatalf("%s packet %d: %v, want %v", name, j, fr.Time, want)
			}
		}
	}
}
