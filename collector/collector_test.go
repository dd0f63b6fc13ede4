package collector

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/httpserver/httpservertest"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// fakeDecoder reads datagrams "count:port" and emits count flows with that destination port;
// "bad" is an error.
type fakeDecoder struct{}

func (fakeDecoder) Decode(payload []byte, exporter netip.AddrPort, received time.Time, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	if string(payload) == "bad" {
		return errors.New("fake: bad datagram")
	}
	n, port := 0, 0
	i := 0
	for ; i < len(payload) && payload[i] != ':'; i++ {
		n = n*10 + int(payload[i]-'0')
	}
	for i++; i < len(payload); i++ {
		port = port*10 + int(payload[i]-'0')
	}
	for range n {
		fm.Reset()
		fm.TimeReceived = uint64(received.Unix())
		fm.ExporterAddress = exporter.Addr()
		fm.SamplingRate = 1
		fm.AppendUint(schema.ColumnDstPort, uint64(port))
		emit(fm)
	}
	return nil
}

// memSink keeps every message it receives.
type memSink struct {
	mu      sync.Mutex
	msgs    [][]byte
	batches int
	keys    map[string]int
}

func (m *memSink) Name() string          { return "mem" }
func (m *memSink) Start() error          { return nil }
func (m *memSink) Stop() error           { return nil }
func (m *memSink) KeyedByExporter() bool { return true }
func (m *memSink) Send(b *output.Batch) bool {
	defer b.Release()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches++
	if m.keys == nil {
		m.keys = map[string]int{}
	}
	m.keys[string(b.Key)] += b.Flows
	data := b.Data
	for len(data) > 0 {
		l, n := binary.Uvarint(data)
		m.msgs = append(m.msgs, append([]byte(nil), data[n:n+int(l)]...))
		data = data[n+int(l):]
	}
	return true
}

func newTestCollector(t *testing.T, mutate func(*Configuration)) (*Collector, *memSink, *schema.Schema) {
	t.Helper()
	return startTestCollector(t, mutate, nil, nil)
}

// startTestCollector is newTestCollector with the dependencies changed by mutateDeps and
// the collector by beforeStart (both may be nil).
func startTestCollector(t *testing.T, mutate func(*Configuration), mutateDeps func(*Dependencies),
	beforeStart func(*Collector)) (*Collector, *memSink, *schema.Schema) {
	t.Helper()
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 2}}
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.BatchInterval = 20 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	sink := &memSink{}
	deps := Dependencies{
		Schema:   s,
		Decoders: map[string]Decoder{"netflow": fakeDecoder{}},
		Sinks:    []output.Sink{sink},
		Registry: prometheus.NewRegistry(),
		Clock:    testutil.Clock(),
	}
	if mutateDeps != nil {
		mutateDeps(&deps)
	}
	c, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if beforeStart != nil {
		beforeStart(c)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c, sink, s
}

func send(t *testing.T, to netip.AddrPort, payloads ...string) {
	t.Helper()
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, p := range payloads {
		if _, err := conn.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCollectorPipeline(t *testing.T) {
	c, sink, s := newTestCollector(t, nil)
	addr := c.ListenAddrs()[0]
	var payloads []string
	for i := range 200 {
		payloads = append(payloads, "3:"+strconv.Itoa((i%10+1)*100))
	}
	payloads = append(payloads, "bad")
	send(t, addr, payloads...)
	// An exporter's datagram count is taken before the datagram is decoded, its flows and
	// errors after: wait for all three.
	testutil.WaitUntil(t, "the 201 datagrams decoded", func() bool {
		exps := c.Exporters()
		return len(exps) == 1 && exps[0].Datagrams == 201 && exps[0].Flows == 600 && exps[0].Errors == 1
	})

	resp, err := http.Get("http://" + c.HTTPAddr() + "/api/v0/exporters")
	if err != nil {
		t.Fatal(err)
	}
	var api struct{ Exporters []ExporterStatus }
	json.NewDecoder(resp.Body).Decode(&api)
	resp.Body.Close()
	if len(api.Exporters) != 1 || api.Exporters[0].Flows != 600 || api.Exporters[0].Errors != 1 || api.Exporters[0].Datagrams != 201 {
		t.Fatalf("exporters API: %+v", api.Exporters)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, err := http.Get("http://" + c.HTTPAddr() + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, err, resp)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/metrics" && !strings.Contains(string(body), `flowzero_collector_flows_total{exporter="127.0.0.1"} 600`) {
			t.Fatalf("metrics miss the exporter's flows:\n%s", body)
		}
	}
	// The batches reach the sink when their interval ends, on the collector's clock, before
	// Stop flushes anything.
	testutil.WaitUntil(t, "the batches to age out to the sink", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.msgs) == 600
	})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if len(sink.msgs) != 600 {
		t.Fatalf("sink got %d flows, want 600", len(sink.msgs))
	}
	if sink.keys["\x7f\x00\x00\x01"] != 600 {
		t.Fatalf("batches keyed %v, want all under 127.0.0.1", sink.keys)
	}
	ports := map[uint64]int{}
	for _, m := range sink.msgs {
		err := s.DecodeMessage(m, func(col *schema.Column, v any) {
			if col.Key == schema.ColumnDstPort {
				ports[v.(uint64)]++
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(ports) != 10 || ports[500] != 60 {
		t.Fatalf("ports %v", ports)
	}
}

func TestCollectorAllowList(t *testing.T) {
	c, sink, _ := newTestCollector(t, func(cfg *Configuration) {
		cfg.Exporters.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	send(t, c.ListenAddrs()[0], "2:53", "2:53")
	notAllowed := c.metrics.dropped.WithLabelValues("exporter", "not-allowed")
	testutil.WaitUntil(t, "the two datagrams refused", func() bool { return promtest.ToFloat64(notAllowed) == 2 })
	// Reload to allow loopback: new datagrams pass.
	cfg := c.cfg
	cfg.Exporters.Allow = append(cfg.Exporters.Allow, netip.MustParsePrefix("127.0.0.0/8"))
	cfg.Listeners = append([]ListenerConfiguration(nil), cfg.Listeners...)
	cfg.Listeners[0].Workers = 3
	restart, err := c.Reload(cfg)
	if err != nil || len(restart) != 1 || restart[0] != "collector.listeners" {
		t.Fatalf("reload: %v %v", restart, err)
	}
	send(t, c.ListenAddrs()[0], "1:80")
	testutil.WaitUntil(t, "the datagram allowed after the reload", func() bool {
		exps := c.Exporters()
		return len(exps) == 1 && exps[0].Flows == 1
	})
	c.Stop()
	if got := promtest.ToFloat64(notAllowed); got != 2 {
		t.Fatalf("not-allowed drops %v, want 2", got)
	}
	if len(sink.msgs) != 1 {
		t.Fatalf("%d flows delivered, want 1 after the reload", len(sink.msgs))
	}
}

// manualClock is a collector clock that moves only when the test says.
type manualClock struct{ ns atomic.Int64 }

func newManualClock() *manualClock {
	c := &manualClock{}
	c.ns.Store(testutil.Now().UnixNano())
	return c
}

func (c *manualClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *manualClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestCollectorRateLimit: with 100 flows per second, a burst of 1000 flows at one instant
// keeps the 100 of the full bucket; two seconds later the bucket is full again and the kept
// flows' sampling rate is multiplied by the previous window's seen/kept ratio (10), as in
// Akvorado, so volumes stay right.
func TestCollectorRateLimit(t *testing.T) {
	clk := newManualClock()
	c, sink, s := startTestCollector(t, func(cfg *Configuration) {
		cfg.Exporters.RateLimit = 100
	}, func(d *Dependencies) { d.Clock = clk }, nil)
	limited := c.metrics.dropped.WithLabelValues("exporter", "rate-limited")
	handled := func(n uint64) func() bool {
		return func() bool {
			exps := c.Exporters()
			return len(exps) == 1 && exps[0].Flows+uint64(promtest.ToFloat64(limited)) == n
		}
	}
	// One socket: the limit applies per exporter address and port.
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(c.ListenAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, p := range []string{"250:1", "250:1", "250:1", "250:1"} {
		if _, err := conn.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitUntil(t, "the first 1000 flows", handled(1000))
	// A datagram's time is the collector's clock less the time it waited in the socket (on
	// the machine's clock), which a loaded machine makes longer for the next datagram than
	// for the first: two seconds leave a second's margin for it.
	clk.Advance(2 * time.Second)
	if _, err := conn.Write([]byte("250:2")); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the next 250 flows", handled(1250))
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := promtest.ToFloat64(limited); n != 1250-200 {
		t.Errorf("%v flows rate-limited, want %d", n, 1250-200)
	}
	rates := map[uint64]map[uint64]int{} // port → sampling rate → flows
	for _, m := range sink.msgs {
		var port, rate uint64
		err := s.DecodeMessage(m, func(col *schema.Column, v any) {
			switch col.Key {
			case schema.ColumnDstPort:
				port = v.(uint64)
			case schema.ColumnSamplingRate:
				rate = v.(uint64)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if rates[port] == nil {
			rates[port] = map[uint64]int{}
		}
		rates[port][rate]++
	}
	if len(rates) != 2 || len(rates[1]) != 1 || rates[1][1] != 100 || len(rates[2]) != 1 || rates[2][10] != 100 {
		t.Errorf("flows kept by port and sampling rate: %v, want 100 at rate 1 then 100 at rate 10", rates)
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.Listeners[1].Protocol = "jflow"
	if err := cfg.Validate(); err == nil || err.Error() != `listeners[1].protocol: must be netflow or sflow, not "jflow"` {
		t.Fatalf("got %v", err)
	}
	cfg = DefaultConfiguration()
	cfg.HTTP.Listen = "localhost"
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "http.listen:") {
		t.Fatalf("got %v", err)
	}
	for _, tc := range []struct {
		mutate func(l *ListenerConfiguration)
		want   string
	}{
		{func(l *ListenerConfiguration) { l.Receive = "xdp" }, `listeners[0].receive: must be socket or af-packet, not "xdp"`},
		{func(l *ListenerConfiguration) { l.Interface = "eth0" }, `listeners[0].interface: is for receive: af-packet only`},
		{func(l *ListenerConfiguration) { l.Receive = "af-packet" }, `listeners[0].interface: is required with receive: af-packet: the interface the exporters' datagrams arrive on (lo for loopback)`},
		{func(l *ListenerConfiguration) { l.Receive, l.Interface, l.BlockTimeout = "af-packet", "lo", 0 }, `listeners[0].block-timeout: must be whole milliseconds in 1ms..1s, not 0s`},
		{func(l *ListenerConfiguration) {
			l.Receive, l.Interface, l.BlockTimeout = "af-packet", "lo", 1500*time.Microsecond
		}, `listeners[0].block-timeout: must be whole milliseconds in 1ms..1s, not 1.5ms`},
		{func(l *ListenerConfiguration) { l.Receive, l.Interface, l.ReceiveBuffer = "af-packet", "lo", 2<<30 }, `listeners[0].receive-buffer: is the ring's size with af-packet: at most 1 GiB, not 2147483648`},
		{func(l *ListenerConfiguration) { l.Receive, l.Interface = "af-packet", "eth0" }, ``},
		{func(l *ListenerConfiguration) {
			l.Receive, l.Interface, l.Address = "af-packet", "eth0", "[2001:db8::7]:2055"
		}, ``},
	} {
		cfg = DefaultConfiguration()
		cfg.Listeners[0].Address = "192.0.2.10:2055"
		tc.mutate(&cfg.Listeners[0])
		if err := cfg.Validate(); fmt.Sprint(err) != tc.want && (err != nil || tc.want != "") {
			t.Errorf("got %v, want %s", err, tc.want)
		}
	}
}

// TestConfigAFPacketNeedsAddress: receive: af-packet on an unspecified address (the rings
// would take datagrams routed through the host, not addressed to it) is refused, naming the
// listener's address key and saying what to give.
func TestConfigAFPacketNeedsAddress(t *testing.T) {
	for _, addr := range []string{":2055", "0.0.0.0:2055", "[::]:2055"} {
		cfg := DefaultConfiguration()
		l := &cfg.Listeners[0]
		l.Receive, l.Interface, l.Address = "af-packet", "eth0", addr
		err := cfg.Validate()
		want := fmt.Sprintf(`listeners[0].address: %q: receive: af-packet needs the address the exporters send to, one of this host's (such as 192.0.2.10:2055)`, addr)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v, want %s...", addr, err, want)
		}
	}
}

// TestListenerAddressFamily: a listener takes the family of its address's host: 0.0.0.0
// IPv4 only, ::1 IPv6 only, [::] and an empty host both. The datagram of the other family is sent
// first: a socket that took it would have read it before the one waited for.
func TestListenerAddressFamily(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		c.Close()
	}
	lo4, lo6 := netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()
	for _, tc := range []struct {
		listen         string
		takes, refuses []netip.Addr
	}{
		{"0.0.0.0:0", []netip.Addr{lo4}, []netip.Addr{lo6}},
		{"[::1]:0", []netip.Addr{lo6}, nil},
		{"[::]:0", []netip.Addr{lo4, lo6}, nil},
		{":0", []netip.Addr{lo4, lo6}, nil},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			c, _, _ := newTestCollector(t, func(cfg *Configuration) {
				cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: tc.listen, Workers: 1}}
			})
			port := c.ListenAddrs()[0].Port()
			for _, a := range tc.refuses {
				send(t, netip.AddrPortFrom(a, port), "1:7")
			}
			for _, a := range tc.takes {
				send(t, netip.AddrPortFrom(a, port), "1:8")
			}
			testutil.WaitUntil(t, "the datagrams of "+tc.listen, func() bool { return len(c.Exporters()) >= len(tc.takes) })
			var got []netip.Addr
			for _, e := range c.Exporters() {
				got = append(got, e.Address)
			}
			slices.SortFunc(got, netip.Addr.Compare)
			if !slices.Equal(got, tc.takes) {
				t.Errorf("listener %s bound as %s took datagrams from %v, want %v", tc.listen, c.ListenAddrs()[0], got, tc.takes)
			}
		})
	}
}

// TestSharePort: which bound addresses overlap on one port, as the kernel delivers.
func TestSharePort(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		a     string
		aDual bool
		b     string
		bDual bool
		want  bool
	}{
		{"127.0.0.1:2055", false, "127.0.0.1:2055", false, true},
		{"127.0.0.1:2055", false, "127.0.0.2:2055", false, false},
		{"127.0.0.1:2055", false, "127.0.0.1:2056", false, false},
		{"0.0.0.0:0", false, "0.0.0.0:0", false, false},
		{"0.0.0.0:2055", false, "127.0.0.1:2055", false, true},
		{"0.0.0.0:2055", false, "[::1]:2055", false, false},
		{"[::]:2055", false, "127.0.0.1:2055", false, false},
		{"[::]:2055", false, "0.0.0.0:2055", false, false},
		{"[::]:2055", true, "127.0.0.1:2055", false, true},
		{"127.0.0.1:2055", false, "[::]:2055", true, true},
		{"[::]:2055", false, "[::1]:2055", false, true},
		{"[::ffff:127.0.0.1]:2055", false, "0.0.0.0:2055", false, true},
	} {
		if got := sharePort(ap(tc.a), tc.aDual, ap(tc.b), tc.bDual); got != tc.want {
			t.Errorf("sharePort(%s dual %v, %s dual %v) = %v", tc.a, tc.aDual, tc.b, tc.bDual, got)
		}
	}
}

func TestSocketControl(t *testing.T) {
	// Control messages as the kernel lays them out: cmsghdr{len=20, SOL_SOCKET=1,
	// SO_RXQ_OVFL=40} then the uint32 counter, padded to 8 bytes; cmsghdr{len=32, SOL_SOCKET,
	// SCM_TIMESTAMPNS=35} then struct timespec.
	oob := make([]byte, 56)
	binary.NativeEndian.PutUint64(oob[0:], 20)
	binary.NativeEndian.PutUint32(oob[8:], 1)
	binary.NativeEndian.PutUint32(oob[12:], 40)
	binary.NativeEndian.PutUint32(oob[16:], 1234)
	binary.NativeEndian.PutUint64(oob[24:], 32)
	binary.NativeEndian.PutUint32(oob[32:], 1)
	binary.NativeEndian.PutUint32(oob[36:], 35)
	binary.NativeEndian.PutUint64(oob[40:], 1700000000)
	binary.NativeEndian.PutUint64(oob[48:], 123456789)
	if c := socketControl(oob); !c.hasDrops || c.drops != 1234 || !c.hasTime || c.sec != 1700000000 || c.nsec != 123456789 {
		t.Fatalf("got %+v", c)
	}
	if c := socketControl(oob[:24]); !c.hasDrops || c.drops != 1234 || c.hasTime {
		t.Fatalf("drops only: got %+v", c)
	}
	for _, bad := range [][]byte{nil, oob[:10], {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if c := socketControl(bad); c.hasDrops || c.hasTime {
			t.Fatalf("malformed control message accepted: % x", bad)
		}
	}
	// A timestamp cut short is not read; the drops before it are.
	if c := socketControl(append(oob[:24:24], oob[24:44]...)); !c.hasDrops || c.hasTime {
		t.Fatalf("cut timestamp: got %+v", c)
	}
}

func TestProcUDPDrops(t *testing.T) {
	conns, _, err := openSockets("127.0.0.1:0", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conns[0].Close()
	ino, err := socketInode(conns[0])
	if err != nil || ino == 0 {
		t.Fatalf("inode %d: %v", ino, err)
	}
	// Fill the (small) receive buffer without reading: the kernel drops the rest and
	// /proc/net/udp shows it.
	conns[0].SetReadBuffer(4096)
	send(t, conns[0].LocalAddr().(*net.UDPAddr).AddrPort(), strings.Repeat("x", 1000), strings.Repeat("x", 1000),
		strings.Repeat("x", 1000), strings.Repeat("x", 1000), strings.Repeat("x", 1000), strings.Repeat("x", 1000))
	if d, ok := procUDPDrops()[ino]; !ok || d == 0 {
		t.Fatalf("drops for inode %d: %d %v", ino, d, ok)
	}
}

// newSocketlessWorker returns a collector that is not started, one of its workers, to call
// handle directly with any source address, and its log (text: count a message's lines with
// strings.Count(logs.String(), `msg="..."`)).
func newSocketlessWorker(t *testing.T, mutate func(*Configuration)) (*Collector, *worker, *lockedbuf.Buffer) {
	t.Helper()
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.Listeners = nil
	cfg.HTTP.Listen = ""
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &lockedbuf.Buffer{}
	c, err := New(cfg, Dependencies{Schema: s, Decoders: map[string]Decoder{}, Sinks: []output.Sink{&memSink{}},
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(c, 0, "netflow/test", "0", nil, fakeDecoder{}, "netflow")
	w.now = testutil.Now()
	return c, w, logs
}

// TestCollectorRefusedSourcesLeaveNoState: a flood from more sources than the exporter
// table holds, all outside the allow-list, creates no exporter entry, metric series or worker
// state, is counted in one counter and logged a bounded number of times; the allowed
// exporter still gets its own entry with its own counts.
func TestCollectorRefusedSourcesLeaveNoState(t *testing.T) {
	c, w, logs := newSocketlessWorker(t, func(cfg *Configuration) {
		cfg.Exporters.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	const refused = maxExporters + 600
	base := netip.MustParseAddr("10.0.0.0").As4()
	for i := range refused {
		a := base
		binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(base[:])+uint32(i))
		w.handle([]byte("1:80"), netip.AddrPortFrom(netip.AddrFrom4(a), 2055))
	}
	allowed := netip.MustParseAddrPort("127.0.0.1:2055")
	w.handle([]byte("3:53"), allowed)
	w.handle([]byte("2:53"), allowed)

	if got := promtest.ToFloat64(c.metrics.dropped.WithLabelValues("exporter", "not-allowed")); got != refused {
		t.Errorf("not-allowed drops %v, want %d", got, refused)
	}
	if exps := c.Exporters(); len(exps) != 1 {
		t.Errorf("%d exporters in the API, want 1", len(exps))
	} else if e := exps[0]; e.Address != allowed.Addr() || e.Datagrams != 2 || e.Flows != 5 || !e.Allowed {
		t.Errorf("exporter %+v, want 127.0.0.1 allowed with 2 datagrams and 5 flows", e)
	}
	if n := c.exporterCount.Load(); n != 1 {
		t.Errorf("exporter count %d, want 1", n)
	}
	if n := promtest.CollectAndCount(c.metrics.flows); n != 1 {
		t.Errorf("%d flowzero_collector_flows_total series, want 1", n)
	}
	if len(w.exporters) != 1 {
		t.Errorf("worker holds %d exporters, want 1", len(w.exporters))
	}
	if n := strings.Count(logs.String(), `msg="datagrams from exporters outside the allow-list dropped"`); n < 1 || n > 3 {
		t.Errorf("%d warnings for the refused sources, want 1 to 3 (one rate limit for all)", n)
	}

	// A reload that leaves the exporter out refuses it too, without counting it as its own.
	cfg := c.cfg
	cfg.Exporters.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	if _, err := c.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	w.handle([]byte("1:53"), allowed)
	if got := promtest.ToFloat64(c.metrics.dropped.WithLabelValues("exporter", "not-allowed")); got != refused+1 {
		t.Errorf("not-allowed drops %v after the reload, want %d", got, refused+1)
	}
	if exps := c.Exporters(); len(exps) != 1 || exps[0].Datagrams != 2 || exps[0].Allowed {
		t.Errorf("%d exporters after the reload, want 127.0.0.1 refused, still 2 datagrams", len(exps))
	}
}

// TestWorkerRefusedNoAllocs: once its log lines are spent, a refused datagram allocates
// nothing (BenchmarkWorkerRefused measures the path).
func TestWorkerRefusedNoAllocs(t *testing.T) {
	_, w, _ := newSocketlessWorker(t, func(cfg *Configuration) {
		cfg.Exporters.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	from, payload := netip.MustParseAddrPort("10.0.0.1:2055"), []byte("1:80")
	for range 10 {
		w.handle(payload, from)
	}
	if a := testing.AllocsPerRun(1000, func() { w.handle(payload, from) }); a != 0 {
		t.Fatalf("%v allocations per refused datagram, want 0", a)
	}
}

// TestCollectorReadErrors: every failed socket read is counted, and logged at most three
// times per 30 seconds however often it repeats.
func TestCollectorReadErrors(t *testing.T) {
	c, w, logs := newSocketlessWorker(t, nil)
	for range 1000 {
		w.readFailed(syscall.ENOBUFS)
	}
	if got := promtest.ToFloat64(c.metrics.readErrors.WithLabelValues("netflow/test", "0")); got != 1000 {
		t.Errorf("read errors %v, want 1000", got)
	}
	if n := strings.Count(logs.String(), `msg="UDP read error"`); n < 1 || n > 3 {
		t.Errorf("%d read error lines logged, want 1 to 3", n)
	}
}

// TestCollectorReloadNeedsRequestHeader: a reload without X-Flowzero-Request (what a web
// page can send cross-site without a preflight) is refused and counted.
func TestCollectorReloadNeedsRequestHeader(t *testing.T) {
	reloads := 0
	c, _, _ := startTestCollector(t, nil, func(d *Dependencies) {
		d.Reload = func() (string, error) { reloads++; return "reloaded", nil }
	}, nil)
	defer c.Stop()
	url := "http://" + c.HTTPAddr() + "/api/v0/reload"
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded"} {
		resp, err := http.Post(url, ct, strings.NewReader("x=1"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("reload as %s without %s: status %d, want 403", ct, RequestHeader, resp.StatusCode)
		}
	}
	if reloads != 0 {
		t.Fatalf("%d reloads from requests without %s", reloads, RequestHeader)
	}
	req, _ := http.NewRequest("POST", url, nil)
	req.Header.Set(RequestHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "reloaded\n" || reloads != 1 {
		t.Fatalf("reload with %s: %d %q, %d reloads", RequestHeader, resp.StatusCode, body, reloads)
	}
	if got := promtest.ToFloat64(c.metrics.httpRejected.WithLabelValues("no-request-header")); got != 2 {
		t.Errorf("refused reloads counted %v, want 2", got)
	}
}

// TestCollectorHTTPGuards: the collector's server is built by httpserver.New: a slow body
// is cut at the read timeout, and a Host that is not loopback is refused (the server is
// bound to 127.0.0.1).
func TestCollectorHTTPGuards(t *testing.T) {
	var bodyErr error
	done := make(chan struct{})
	c, _, _ := startTestCollector(t, nil, func(d *Dependencies) {
		d.Handlers = map[string]http.Handler{"POST /api/v0/test": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, bodyErr = io.ReadAll(r.Body)
			close(done)
		})}
	}, func(c *Collector) {
		c.httpTimeouts.Read = 300 * time.Millisecond
	})
	defer c.Stop()

	req, _ := http.NewRequest("GET", "http://"+c.HTTPAddr()+"/healthz", nil)
	req.Host = "attacker.example:8080"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || promtest.ToFloat64(c.metrics.httpRejected.WithLabelValues("host")) != 1 {
		t.Errorf("Host attacker.example: status %d, want 403 and counted", resp.StatusCode)
	}

	conn, err := net.Dial("tcp", c.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	httpservertest.DribbleBody(t, conn, "/api/v0/test", done)
	if !errors.Is(bodyErr, os.ErrDeadlineExceeded) {
		t.Fatalf("reading the slow body: %v, want a deadline error", bodyErr)
	}
}

// rejectOdd rejects every other flow it enriches.
type rejectOdd struct{ n atomic.Int64 }

func (r *rejectOdd) Enrich(fm *schema.FlowMessage) {
	if r.n.Add(1)%2 == 1 {
		fm.Reject()
	}
}

func TestCollectorRejectedFlows(t *testing.T) {
	enricher := &rejectOdd{}
	c, sink, _ := startTestCollector(t, nil, func(d *Dependencies) { d.Enricher = enricher }, nil)
	send(t, c.ListenAddrs()[0], "10:80")
	testutil.WaitUntil(t, "10 flows enriched", func() bool { return enricher.n.Load() == 10 })
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if len(sink.msgs) != 5 {
		t.Fatalf("%d flows delivered, want the 5 not rejected", len(sink.msgs))
	}
}
