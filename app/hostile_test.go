//go:build hostile

package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowzero/collector"
	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
	"flowzero/schema"
)

// TestHostile is the short hostile run of make test (make hostile, issue 24): for
// $FLOWZERO_HOSTILE_DURATION (10 s), on loopback, the real captures are replayed in a loop
// from 127.0.0.1 while malformed datagrams (random bytes, protocol headers over random bytes,
// real datagrams cut short or with a byte changed, 64 KiB of noise) go to the same listeners
// at a bounded rate from 32 other addresses. It asserts that:
//   - every flow of the captures is decoded: as many as `flowzero decode` gives offline for
//     the same datagrams, and no kernel drop that would excuse fewer;
//   - no flow comes out of a datagram the decoders refuse as malformed (its header or the
//     chain of its set or sample lengths contradicts its length: malformedDatagram): each
//     datagram is watched between the collector and its decoder. A datagram of which a
//     decoder drops only a part (a set, a sample) may give the flows of the rest, as the
//     decoders document; the run counts them;
//   - every flow emitted reaches the file output;
//   - the log stays short (at most 10 "cannot decode datagram" lines per 30 s);
//   - the process's resident memory grows by less than 256 MiB.
func TestHostile(t *testing.T) {
	duration := 10 * time.Second
	if v := os.Getenv("FLOWZERO_HOSTILE_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("FLOWZERO_HOSTILE_DURATION=%q: %v", v, err)
		}
		duration = d
	}
	if testdata.Root() == "" {
		t.Fatal("the hostile run needs the shared captures: ../shared/testdata next to the repository, or FLOWZERO_TESTDATA")
	}
	const hostileRate = 2000 // datagrams per second
	groups := captureGroups(t)

	cfg := testConfig(t)
	for i := range cfg.Collector.Listeners {
		cfg.Collector.Listeners[i].ReceiveBuffer = 32 << 20 // a stall of the machine, not of the collector, must not drop
	}
	logs := &lockedbuf.Buffer{}
	a, err := New(cfg, Dependencies{Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	var st hostileStats
	good := netip.MustParseAddr("127.0.0.1")
	a.wrapDecoder = func(_ string, d collector.Decoder) collector.Decoder {
		return watchedDecoder{d, good, &st}
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			a.Stop()
		}
	}()
	addrs := a.Collector().ListenAddrs()

	// The captures: per group, one socket per original exporter, kept for the whole run so
	// that each is one session, as offline.
	type dgram struct {
		conn    *net.UDPConn
		payload []byte
	}
	var rounds [][]dgram
	var realPayloads [][]byte
	for _, g := range groups {
		to := addrs[0]
		if sniffGroup(t, g) == "sflow" {
			to = addrs[1]
		}
		conns := map[netip.AddrPort]*net.UDPConn{}
		var round []dgram
		for _, f := range g {
			dgs, err := pcapfile.ReadUDP(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range dgs {
				c := conns[d.Src]
				if c == nil {
					c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					conns[d.Src] = c
				}
				round = append(round, dgram{c, d.Payload})
				realPayloads = append(realPayloads, d.Payload)
			}
		}
		rounds = append(rounds, round)
	}

	rss0 := residentMemory()
	if rss0 == 0 {
		t.Fatal("no VmRSS in /proc/self/status")
	}
	var peak atomic.Int64
	peak.Store(rss0)
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	var hostileSent atomic.Int64
	wg.Go(func() { // memory
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			if v := residentMemory(); v > peak.Load() {
				peak.Store(v)
			}
			<-tick.C
		}
	})
	wg.Go(func() { // malformed datagrams, 20 every 10 ms from 32 sources
		rnd := rand.New(rand.NewPCG(24, 24))
		var conns []*net.UDPConn
		for i := range 32 {
			src := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 66, byte(1 + i)}), 0))
			for _, to := range addrs {
				c, err := net.DialUDP("udp", src, net.UDPAddrFromAddrPort(to))
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				conns = append(conns, c)
			}
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			for range hostileRate / 100 {
				conns[rnd.IntN(len(conns))].Write(hostileDatagram(rnd, realPayloads))
				hostileSent.Add(1)
			}
			<-tick.C
		}
	})
	// The captures, one round after the other, each once the collector has read the last.
	loops := 0
	var goodSent int64
	kernelDrops := func() uint64 { return a.Collector().Health().Counters["kernel-drops"] }
	for ctx.Err() == nil {
		for _, round := range rounds {
			for _, d := range round {
				if _, err := d.conn.Write(d.payload); err != nil {
					t.Fatal(err)
				}
				goodSent++
			}
		}
		loops++
		testutil.WaitUntil(t, "the collector to read the round", func() bool {
			return st.goodDatagrams.Load() >= goodSent || kernelDrops() > 0
		})
		if n := kernelDrops(); n > 0 {
			cancel()
			wg.Wait()
			t.Fatalf("%d datagrams dropped by the kernel after %d rounds: the run's rates are too high for this machine", n, loops)
		}
	}
	wg.Wait()
	testutil.WaitUntil(t, "every malformed datagram read or dropped by the kernel", func() bool {
		return st.hostileDatagrams.Load()+int64(kernelDrops()) >= hostileSent.Load()
	})
	drops := kernelDrops()
	stopped = true
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}

	// What `flowzero decode` gives for the same datagrams: each group's files, loops times.
	// Decoding thousands of rounds offline would take longer than the run, so each group is
	// decoded 1, 2 and 3 times: from the second round on, each round must give the same
	// number of flows (the templates are known), and the rounds of the run are counted so.
	want := 0
	for _, g := range groups {
		var n [3]int
		for k := range n {
			var files []string
			for range k + 1 {
				files = append(files, g...)
			}
			sum, err := replay.Decode(replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}, files,
				replay.DecodeOptions{Clock: testutil.Clock()}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			n[k] = sum.Flows
		}
		if n[2]-n[1] != n[1]-n[0] {
			t.Fatalf("%v: 1, 2 and 3 rounds decode to %v flows offline: not the same number per round", g, n)
		}
		want += n[0] + (loops-1)*(n[1]-n[0])
	}
	written := int64(a.File().Health().Counters["flows-written"])
	lines := strings.Count(logs.String(), `msg="cannot decode datagram"`)
	maxLines := 10 * int(1+duration/(30*time.Second))
	t.Logf("%s: %d rounds of the captures (%d datagrams, %d flows; %d offline); %d hostile datagrams sent, %d read, "+
		"%d with an error, giving %d flows; %d refused as a whole (%d flows from them), %d with a part dropped (%d flows from "+
		"the rest); %d flows written; %d kernel drops; %d log lines; resident memory %d MiB, peak %d MiB",
		duration, loops, st.goodDatagrams.Load(), st.goodFlows.Load(), want, hostileSent.Load(), st.hostileDatagrams.Load(),
		st.hostileErrors.Load(), st.hostileFlows.Load(), st.malformed.Load(), st.flowsFromMalformed.Load(),
		st.partsDropped.Load(), st.flowsBesideDropped.Load(), written, drops, lines, rss0>>20, peak.Load()>>20)
	if drops > 0 {
		t.Errorf("%d datagrams dropped by the kernel: the run's rates are too high for this machine", drops)
	}
	if st.goodFlows.Load() != int64(want) || st.goodErrors.Load() != 0 {
		t.Errorf("the captures gave %d flows and %d errors, want the %d flows decoded offline and no error",
			st.goodFlows.Load(), st.goodErrors.Load(), want)
	}
	if n := st.flowsFromMalformed.Load(); n != 0 || st.malformed.Load() < hostileSent.Load()/2 {
		t.Errorf("%d flows came out of the %d datagrams refused as malformed (want none, from at least half the %d sent)",
			n, st.malformed.Load(), hostileSent.Load())
	}
	if all := st.goodFlows.Load() + st.hostileFlows.Load(); written != all {
		t.Errorf("the file output wrote %d flows of the %d emitted", written, all)
	}
	if lines < 1 || lines > maxLines {
		t.Errorf("%d \"cannot decode datagram\" lines, want 1 to %d", lines, maxLines)
	}
	if grown := peak.Load() - rss0; grown > 256<<20 {
		t.Errorf("resident memory grew by %d MiB, want less than 256", grown>>20)
	}
}

// hostileStats counts what the decoders did with each class of datagram.
type hostileStats struct {
	goodDatagrams, goodFlows, goodErrors          atomic.Int64
	hostileDatagrams, hostileFlows, hostileErrors atomic.Int64
	// malformed counts the datagrams refused as a whole (malformedDatagram), and
	// flowsFromMalformed the flows they gave, which must be none.
	malformed, flowsFromMalformed atomic.Int64
	// partsDropped counts the datagrams of which the decoders dropped a part (a set, a
	// sample, a record) and kept the rest, which gave flowsBesideDropped flows.
	partsDropped, flowsBesideDropped atomic.Int64
}

// malformedDatagram tells whether a decoder refused a datagram as a whole: its header or
// the chain of its set or sample lengths contradicts its length, so nothing of it can be
// trusted and nothing of it is decoded (decoder/netflow and decoder/sflow, "Framing"). The
// other errors drop a part (a template or data set, a sample, a record) and keep what is
// framed apart from it, as the decoders document: a flow may come with them.
func malformedDatagram(err error) bool {
	for _, e := range []error{netflow.ErrTruncated, netflow.ErrVersion, netflow.ErrBadLength, netflow.ErrBadSet} {
		if errors.Is(err, e) {
			return true
		}
	}
	var se *sflow.Error
	if errors.As(err, &se) {
		switch se.Reason {
		case "truncated-datagram", "bad-version", "bad-agent-address":
			return true
		}
	}
	return false
}

// watchedDecoder counts, for every datagram, the flows it gave and whether it was malformed.
type watchedDecoder struct {
	d    collector.Decoder
	good netip.Addr
	st   *hostileStats
}

func (w watchedDecoder) Decode(payload []byte, exporter netip.AddrPort, received time.Time, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	var n int64
	err := w.d.Decode(payload, exporter, received, fm, func(fm *schema.FlowMessage) { n++; emit(fm) })
	switch {
	case err != nil && malformedDatagram(err):
		w.st.malformed.Add(1)
		w.st.flowsFromMalformed.Add(n)
	case err != nil:
		w.st.partsDropped.Add(1)
		w.st.flowsBesideDropped.Add(n)
	}
	if exporter.Addr() == w.good {
		w.st.goodFlows.Add(n)
		if err != nil {
			w.st.goodErrors.Add(1)
		}
		w.st.goodDatagrams.Add(1)
		return err
	}
	w.st.hostileFlows.Add(n)
	if err != nil {
		w.st.hostileErrors.Add(1)
	}
	w.st.hostileDatagrams.Add(1)
	return err
}

// hostileDatagram returns a datagram as an attacker or a broken exporter sends them.
func hostileDatagram(rnd *rand.Rand, real [][]byte) []byte {
	switch rnd.IntN(6) {
	case 0: // noise
		b := make([]byte, 1+rnd.IntN(1500))
		fill(rnd, b)
		return b
	case 1: // a protocol's header over noise
		return malformed(rnd)
	case 2: // a real datagram cut short
		r := real[rnd.IntN(len(real))]
		return bytes.Clone(r[:rnd.IntN(len(r))])
	case 3: // a real datagram with one byte changed
		b := bytes.Clone(real[rnd.IntN(len(real))])
		b[rnd.IntN(len(b))] ^= byte(1 + rnd.IntN(255))
		return b
	case 4: // a real datagram with noise after it
		r := real[rnd.IntN(len(real))]
		b := make([]byte, len(r)+1+rnd.IntN(200))
		copy(b, r)
		fill(rnd, b[len(r):])
		return b
	default: // the largest datagram loopback carries
		b := make([]byte, 65000)
		fill(rnd, b)
		return b
	}
}

func fill(rnd *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
}

// residentMemory returns this process's resident memory (VmRSS), in bytes, or 0 when
// /proc does not say.
func residentMemory() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
