package collector

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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
	c, err := New(cfg, Dependencies{
		Schema:   s,
		Decoders: map[string]Decoder{"netflow": fakeDecoder{}},
		Sinks:    []output.Sink{sink},
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
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
	time.Sleep(100 * time.Millisecond) // let batches age out before the API check below

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
	time.Sleep(50 * time.Millisecond)
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
	time.Sleep(50 * time.Millisecond)
	c.Stop()
	if got := testutil.ToFloat64(c.metrics.dropped.WithLabelValues("exporter", "not-allowed")); got != 2 {
		t.Fatalf("not-allowed drops %v, want 2", got)
	}
	if len(sink.msgs) != 1 {
		t.Fatalf("%d flows delivered, want 1 after the reload", len(sink.msgs))
	}
}

func TestCollectorRateLimit(t *testing.T) {
	c, sink, s := newTestCollector(t, func(cfg *Configuration) {
		cfg.Exporters.RateLimit = 100
	})
	// 1000 flows in one burst: about 100 pass (the bucket holds one second).
	send(t, c.ListenAddrs()[0], "250:1", "250:1", "250:1", "250:1")
	time.Sleep(50 * time.Millisecond)
	c.Stop()
	limited := testutil.ToFloat64(c.metrics.dropped.WithLabelValues("exporter", "rate-limited"))
	if n := len(sink.msgs); n < 90 || n > 110 || int(limited)+n != 1000 {
		t.Fatalf("%d flows kept, %v rate-limited: want about 100 and a total of 1000", n, limited)
	}
	_ = s
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
}

func TestRxqOverflow(t *testing.T) {
	// A control message as the kernel lays it out: cmsghdr{len=20, SOL_SOCKET=1, SO_RXQ_OVFL=40}
	// then the uint32 counter, padded to 8 bytes.
	oob := make([]byte, 24)
	binary.NativeEndian.PutUint64(oob[0:], 20)
	binary.NativeEndian.PutUint32(oob[8:], 1)
	binary.NativeEndian.PutUint32(oob[12:], 40)
	binary.NativeEndian.PutUint32(oob[16:], 1234)
	if v, ok := rxqOverflow(oob); !ok || v != 1234 {
		t.Fatalf("got %d %v", v, ok)
	}
	for _, bad := range [][]byte{nil, oob[:10], {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, ok := rxqOverflow(bad); ok {
			t.Fatalf("malformed control message accepted: % x", bad)
		}
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
