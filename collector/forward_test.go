package collector

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"flowzero/internal/testutil"
)

// recordingForwarder keeps what Forward gets.
type recordingForwarder struct {
	mu       sync.Mutex
	payloads []string
	from     []netip.AddrPort
	protos   []string
	times    []time.Time
}

func (f *recordingForwarder) Forward(payload []byte, exporter netip.AddrPort, received time.Time, protocol string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payloads = append(f.payloads, string(payload))
	f.from = append(f.from, exporter)
	f.protos = append(f.protos, protocol)
	f.times = append(f.times, received)
}

func (f *recordingForwarder) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.payloads)
}

// TestCollectorForward: with a Forwarder (mode: inlet), allowed exporters' datagrams go to it
// undecoded, with their source, protocol and receive time, and to no decoder or sink;
// refused ones are dropped and counted as before. No decoder is needed.
func TestCollectorForward(t *testing.T) {
	fw := &recordingForwarder{}
	start := testutil.Now()
	c, sink, _ := startTestCollector(t, func(cfg *Configuration) {
		cfg.Listeners = append(cfg.Listeners, ListenerConfiguration{Protocol: "sflow", Address: "127.0.0.1:0", Workers: 1})
	}, func(d *Dependencies) {
		d.Forward = fw
		d.Decoders = nil
	}, nil)
	defer c.Stop()
	addrs := c.ListenAddrs()
	send(t, addrs[0], "3:80", "bad")
	send(t, addrs[1], "1:443")
	testutil.WaitUntil(t, "three datagrams forwarded", func() bool { return fw.count() == 3 })
	fw.mu.Lock()
	defer fw.mu.Unlock()
	protos := map[string]int{}
	for i, p := range fw.payloads {
		protos[fw.protos[i]+" "+p]++
		if !fw.from[i].Addr().IsLoopback() || fw.times[i].Before(start.Add(-time.Second)) {
			t.Errorf("datagram %q from %s at %s", p, fw.from[i], fw.times[i])
		}
	}
	if protos["netflow 3:80"] != 1 || protos["netflow bad"] != 1 || protos["sflow 1:443"] != 1 {
		t.Errorf("forwarded %v", protos)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.msgs) != 0 {
		t.Errorf("%d flows reached the sink", len(sink.msgs))
	}
}
