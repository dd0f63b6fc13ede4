package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"flowzero/capture/agent"
	"flowzero/capture/server"
	"flowzero/internal/testutil"
)

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeSyntheticPcap writes n Ethernet/IPv4/UDP frames of exactly size bytes, with varying
// addresses and ports, to path.
func writeSyntheticPcap(tb testing.TB, path string, n, size int) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		tb.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	ts := testutil.Now().Truncate(time.Second)
	payload := make([]byte, size-14-20-8)
	for i := range n {
		eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
			SrcIP: []byte{10, 0, byte(i >> 8), byte(i)}, DstIP: []byte{192, 0, 2, byte(i % 7)}}
		udp := &layers.UDP{SrcPort: layers.UDPPort(1024 + i%50000), DstPort: 53}
		_ = udp.SetNetworkLayerForChecksum(ip)
		payload[0] = byte(i)
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			eth, ip, udp, gopacket.Payload(payload)); err != nil {
			tb.Fatal(err)
		}
		data := buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			tb.Fatal(err)
		}
	}
}

// countPcapngPackets returns the number of packets in a pcapng file.
func countPcapngPackets(tb testing.TB, path string) uint64 {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(bufio.NewReaderSize(f, 1<<20), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	var n uint64
	for {
		_, _, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			tb.Fatalf("%s: packet %d: %v", path, n+1, err)
		}
		n++
	}
}

// BenchmarkCaptureEndToEnd replays a pcap at maximum speed through an agent to a server on
// loopback that writes pcapng: one run per iteration (use -benchtime=1x), reporting packets
// per second and captured megabytes per second. It fails when a packet is lost: every
// replayed packet must be sent, counted by the server and found in its file.
func BenchmarkCaptureEndToEnd(b *testing.B) {
	dir := os.Getenv("FLOWZERO_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct{ size, packets, loops int }{{64, 250_000, 12}, {1500, 50_000, 6}} {
		b.Run(strconv.Itoa(tc.size), func(b *testing.B) {
			in := filepath.Join(dir, fmt.Sprintf("synthetic-%d.pcap", tc.size))
			if _, err := os.Stat(in); err != nil {
				writeSyntheticPcap(b, in, tc.packets, tc.size)
			}
			total := uint64(tc.packets * tc.loops)
			for b.Loop() {
				scfg := server.DefaultConfiguration()
				scfg.Listen = "127.0.0.1:0"
				scfg.Output.Path = filepath.Join(dir, "out.pcapng")
				s, err := server.New(nil, scfg, server.Dependencies{Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Start(); err != nil {
					b.Fatal(err)
				}
				acfg := agent.DefaultConfiguration()
				acfg.Name = "bench"
				acfg.Server = s.Addr().String()
				acfg.Replay.Files = []string{in}
				acfg.Replay.Loop = tc.loops
				a, err := agent.New(nil, acfg, agent.Dependencies{Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				start, cpuStart := time.Now(), cpuTime()
				if err := a.Start(); err != nil {
					b.Fatal(err)
				}
				<-a.Done()
				if err := a.Stop(); err != nil {
					b.Fatal(err)
				}
				if err := s.Stop(); err != nil {
					b.Fatal(err)
				}
				elapsed, cpu := time.Since(start), cpuTime()-cpuStart
				st, ss := a.Stats(), s.Stats("bench")
				// Loss-free delivery is the requirement, not a metric: a run that loses or
				// duplicates a packet is a failure whatever its speed.
				written := countPcapngPackets(b, scfg.Output.Path)
				if st.Captured != total || st.Sent != total || st.DroppedAgent != 0 || ss.Packets != total || written != total {
					b.Fatalf("%d packets replayed: agent captured %d, sent %d, dropped %d; server counted %d, its file holds %d",
						total, st.Captured, st.Sent, st.DroppedAgent, ss.Packets, written)
				}
				b.ReportMetric(float64(ss.Packets)/elapsed.Seconds(), "pkt/s")
				b.ReportMetric(float64(ss.Bytes)/elapsed.Seconds()/1e6, "MB/s")
				// CPU time of agent and server together per packet: what the run costs when
				// the noisy machine does not let it use both cores.
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(ss.Packets), "cpu-ns/pkt")
				_ = os.Remove(scfg.Output.Path)
			}
		})
	}
}
