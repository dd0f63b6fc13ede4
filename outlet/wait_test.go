package outlet

import (
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
	"flowzero/decoder/netflow"
	"flowzero/internal/health"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	ftestutil "flowzero/internal/testutil"
)

// manualClock is a clock the test moves.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time { return c.now }

// TestHoldBack runs datagram records through handle without a broker: with pending-sets 2,
// the third data datagram of an exporter without its template stops its partition (skipped
// until resumed, not decoded, next offset at it) while the other partition goes on; the
// template from the other partition resumes it after resumeOnState and everything decodes.
// Without the template, the datagram is decoded after template-wait, its set dropped and
// counted, and the exporter's next datagrams no longer wait.
func TestHoldBack(t *testing.T) {
	read := func(name string) []byte {
		dgs, err := pcapfile.ReadUDP(testdata.Path(t, "netflow", name))
		if err != nil {
			t.Fatal(err)
		}
		return dgs[0].Payload
	}
	tmpl, data := read("template.pcap"), read("data.pcap")
	clk := &manualClock{now: ftestutil.Now()}
	from := netip.MustParseAddrPort("192.0.2.100:2055")
	setup := func(t *testing.T) (*Outlet, *discardSink) {
		ncfg := netflow.DefaultConfiguration()
		ncfg.PendingSets = 2
		cfg := DefaultConfiguration()
		cfg.TemplateWait = 10 * time.Second
		sink := &discardSink{}
		o, _ := newOffline(t, ncfg, cfg, sink, clk)
		return o, sink
	}
	offsets := map[int32]int64{}
	rec := func(p int32, payload []byte) *kgo.Record {
		r := &kgo.Record{Partition: p, Offset: offsets[p],
			Value: datagram.Append(nil, datagram.Datagram{Received: clk.now, Exporter: from, Protocol: datagram.NetFlow, Payload: payload})}
		offsets[p]++
		return r
	}

	t.Run("template comes", func(t *testing.T) {
		clear(offsets)
		o, sink := setup(t)
		var recs []*kgo.Record
		for range 4 {
			recs = append(recs, rec(0, data))
		}
		for _, r := range recs {
			o.handle(r)
		}
		p0 := o.parts[0]
		if !p0.paused || p0.next != 2 || len(o.held) != 2 || testutil.ToFloat64(o.m.paused) != 1 {
			t.Fatalf("after 4 data datagrams with room for 2: paused %v, next %d, %d held, gauge %v",
				p0.paused, p0.next, len(o.held), testutil.ToFloat64(o.m.paused))
		}
		o.resumeLocked(clk.now.Add(resumeOnState))
		if !p0.paused {
			t.Fatal("resumed without a state change before resumeAfter")
		}
		o.handle(rec(1, tmpl)) // partition 1 goes on and brings the template
		if len(o.held) != 0 {
			t.Fatalf("%d datagrams still held after the template", len(o.held))
		}
		clk.now = clk.now.Add(resumeOnState)
		o.resumeLocked(clk.now)
		if p0.paused || testutil.ToFloat64(o.m.paused) != 0 {
			t.Fatal("not resumed after the template")
		}
		for _, r := range recs[2:] { // fetched again from the offset set back
			o.handle(r)
		}
		o.sendBatch()
		if sink.flows != 4*4 || p0.next != 4 || testutil.ToFloat64(o.m.pauses) != 1 {
			t.Errorf("%d flows, next %d, %v pauses; want 16 flows, next 4, 1 pause", sink.flows, p0.next, testutil.ToFloat64(o.m.pauses))
		}
	})

	t.Run("batch record", func(t *testing.T) {
		// A record of three data datagrams waits whole with room for two: none of it is
		// decoded (the record is the unit fetched again), then all of it once the template came.
		clear(offsets)
		o, sink := setup(t)
		batch := datagram.AppendBatch(nil)
		for range 3 {
			batch = datagram.AppendEntry(batch, datagram.Datagram{Received: clk.now, Exporter: from, Protocol: datagram.NetFlow, Payload: data})
		}
		r := &kgo.Record{Partition: 0, Offset: 0, Value: batch}
		o.handle(r)
		p0 := o.parts[0]
		if !p0.paused || p0.next != 0 || len(o.held) != 0 {
			t.Fatalf("a record of 3 data datagrams with room for 2: paused %v, next %d, %d held; want paused at 0, none held",
				p0.paused, p0.next, len(o.held))
		}
		o.handle(rec(1, tmpl))
		clk.now = clk.now.Add(resumeOnState)
		o.resumeLocked(clk.now)
		o.handle(r)
		o.sendBatch()
		if p0.paused || p0.next != 1 || sink.flows != 3*4 {
			t.Errorf("after the template: paused %v, next %d, %d flows; want next 1, 12 flows", p0.paused, p0.next, sink.flows)
		}
	})

	t.Run("template never comes", func(t *testing.T) {
		clear(offsets)
		o, _ := setup(t)
		recs := []*kgo.Record{rec(0, data), rec(0, data), rec(0, data), rec(0, data)}
		for _, r := range recs {
			o.handle(r)
		}
		p0 := o.parts[0]
		if !p0.paused || p0.next != 2 {
			t.Fatalf("paused %v at %d, want at 2", p0.paused, p0.next)
		}
		for range 9 {
			clk.now = clk.now.Add(resumeAfter)
			o.resumeLocked(clk.now)
			if p0.paused {
				t.Fatal("not resumed after resumeAfter")
			}
			o.handle(recs[2])
			if !p0.paused || p0.next != 2 {
				t.Fatalf("gave up before template-wait: paused %v, next %d", p0.paused, p0.next)
			}
		}
		if rep := o.Health(); rep.Status != health.OK {
			t.Errorf("health before template-wait: %+v", rep)
		}
		clk.now = clk.now.Add(2 * resumeAfter)
		o.resumeLocked(clk.now)
		if rep := o.Health(); rep.Status != health.Degraded {
			t.Errorf("health after waiting past template-wait: %+v", rep)
		}
		o.handle(recs[2])
		o.handle(recs[3])
		if p0.paused || p0.next != 4 || testutil.ToFloat64(o.m.waitTimeouts) != 1 {
			t.Errorf("after template-wait: paused %v, next %d, %v timeouts", p0.paused, p0.next, testutil.ToFloat64(o.m.waitTimeouts))
		}
		if _, ok := o.gaveUp[from]; !ok {
			t.Error("the exporter's next datagrams would wait again")
		}
		o.resumeLocked(clk.now)
		if rep := o.Health(); rep.Status != health.Degraded {
			t.Errorf("health after a timeout: %+v, want degraded for health.Hold", rep)
		}
		// State of that exporter makes its datagrams wait again.
		o.handle(rec(1, tmpl))
		if _, ok := o.gaveUp[from]; ok {
			t.Error("still given up after its template")
		}
	})
}
