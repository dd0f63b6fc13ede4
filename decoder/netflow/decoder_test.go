package netflow

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/config"
	fztest "flowzero/internal/testutil"
	"flowzero/schema"
)

func session(t *testing.T, d *Decoder) *exporter {
	t.Helper()
	e := d.exporters[testExporter]
	if e == nil {
		t.Fatal("no session for the test exporter")
	}
	return e
}

// TestPendingDisabled: without pending data, the 11 records before the templates of the
// data+templates capture are lost and counted; the 10 after them are decoded.
func TestPendingDisabled(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.PendingSets = 0
	d, _ := newTestDecoder(t, cfg, s)
	fm := s.NewFlowMessage()
	n := 0
	err := d.Decode(Packet{Payload: payloads(t, "data+templates.pcap")[0], Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) { n++ })
	if !errors.Is(err, ErrTemplateNotFound) {
		t.Errorf("Decode: %v, want ErrTemplateNotFound", err)
	}
	if n != 10 {
		t.Errorf("%d flows, want 10", n)
	}
	if got := testutil.ToFloat64(session(t, d).m.errors[reasonTemplateNotFound]); got != 1 {
		t.Errorf("template-not-found errors: %v, want 1", got)
	}
}

// TestPendingAcrossDatagrams: data received before its template (another datagram) is
// decoded when the template arrives; the sampling rate comes from options read after it.
func TestPendingAcrossDatagrams(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	got := decodeFiles(t, d, s, "options-template.pcap", "options-data.pcap", "data.pcap", "template.pcap")
	if len(got[2]) != 0 || len(got[3]) != 4 {
		t.Fatalf("got %d and %d flows, want 0 then 4", len(got[2]), len(got[3]))
	}
	for i, f := range got[3] {
		if f != captureCases[0].flows[3][i] {
			t.Errorf("flow %d:\n got  %s\n want %s", i, f, captureCases[0].flows[3][i])
		}
	}
	e := session(t, d)
	if len(e.pending) != 0 || e.pendingBytes != 0 {
		t.Errorf("pending: %d sets, %d bytes left", len(e.pending), e.pendingBytes)
	}
	if got := testutil.ToFloat64(e.m.pending); got != 1 {
		t.Errorf("pending sets: %v, want 1", got)
	}
}

// TestPendingBound: the queue holds at most pending-sets data sets.
func TestPendingBound(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.PendingSets = 2
	d, _ := newTestDecoder(t, cfg, s)
	data := payloads(t, "data.pcap")[0]
	fm := s.NewFlowMessage()
	var errs int
	for range 5 {
		if err := d.Decode(Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {}); err != nil {
			errs++
		}
	}
	if errs != 3 {
		t.Errorf("%d errors, want 3", errs)
	}
	got := decodeFiles(t, d, s, "template.pcap")
	if len(got[0]) != 8 {
		t.Errorf("%d flows after the template, want 8", len(got[0]))
	}
	if got := testutil.ToFloat64(session(t, d).m.errors[reasonPendingFull]); got != 3 {
		t.Errorf("pending-full: %v, want 3", got)
	}
	// Sets whose template never comes expire to make room.
	for range 2 {
		if err := d.Decode(Packet{Payload: data, Exporter: netip.MustParseAddrPort("192.0.2.10:1"), TimeReceived: testTime}, fm, func(*schema.FlowMessage) {}); err != nil {
			t.Fatal(err)
		}
	}
	later := testTime.Add(cfg.PendingMaxAge + time.Second)
	if err := d.Decode(Packet{Payload: data, Exporter: netip.MustParseAddrPort("192.0.2.10:1"), TimeReceived: later}, fm, func(*schema.FlowMessage) {}); err != nil {
		t.Errorf("after expiry: %v", err)
	}
	e := d.exporters[netip.MustParseAddrPort("192.0.2.10:1")]
	if len(e.pending) != 1 || testutil.ToFloat64(e.m.errors[reasonPendingExpired]) != 2 {
		t.Errorf("after expiry: %d pending, %v expired", len(e.pending), testutil.ToFloat64(e.m.errors[reasonPendingExpired]))
	}
}

// ipfixWithdrawal builds an IPFIX datagram withdrawing template id of domain 1.
func ipfixWithdrawal(id uint16) []byte {
	b := make([]byte, 24)
	binary.BigEndian.PutUint16(b, 10)
	binary.BigEndian.PutUint16(b[2:], 24)
	binary.BigEndian.PutUint32(b[12:], 1)
	binary.BigEndian.PutUint16(b[16:], ipfixTemplateSetID)
	binary.BigEndian.PutUint16(b[18:], 8)
	binary.BigEndian.PutUint16(b[20:], id)
	return b
}

// TestTemplateLifecycle: refresh with the same bytes, withdrawal (RFC 7011 §8.1), then the
// data waits for the template to come back.
func TestTemplateLifecycle(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	decodeFiles(t, d, s, "ipfixprobe-templates.pcap", "ipfixprobe-templates.pcap")
	e := session(t, d)
	if got := testutil.ToFloat64(e.m.templates[tplData]); got != 2 {
		t.Errorf("templates learned: %v, want 2 (a refresh is not counted)", got)
	}
	fm := s.NewFlowMessage()
	if err := d.Decode(Packet{Payload: ipfixWithdrawal(258), Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {}); err != nil {
		t.Fatal(err)
	}
	if len(e.templates) != 1 {
		t.Errorf("%d templates after the withdrawal, want 1", len(e.templates))
	}
	got := decodeFiles(t, d, s, "ipfixprobe-data.pcap", "ipfixprobe-templates.pcap")
	if len(got[0]) != 0 || len(got[1]) != 6 {
		t.Errorf("got %d then %d flows, want 0 then 6", len(got[0]), len(got[1]))
	}
	// Withdrawing all data templates of the domain (template ID = set ID).
	if err := d.Decode(Packet{Payload: ipfixWithdrawal(ipfixTemplateSetID), Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {}); err != nil {
		t.Fatal(err)
	}
	if len(e.templates) != 0 {
		t.Errorf("%d templates after withdrawing all, want 0", len(e.templates))
	}
}

// TestTemplatesPerExporterBound: the template cache of a session is bounded.
func TestTemplatesPerExporterBound(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.MaxTemplatesPerExporter = 2
	d, _ := newTestDecoder(t, cfg, s)
	fm := s.NewFlowMessage()
	err := d.Decode(Packet{Payload: payloads(t, "nat.pcap")[0], Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {})
	if !errors.Is(err, ErrBadTemplate) {
		t.Errorf("Decode: %v, want ErrBadTemplate", err)
	}
	e := session(t, d)
	if len(e.templates) != 2 {
		t.Errorf("%d templates, want 2", len(e.templates))
	}
	if got := testutil.ToFloat64(e.m.errors[reasonTooManyTemplates]); got != 2 {
		t.Errorf("too-many-templates: %v, want 2", got)
	}
}

// TestTemplatesFile: templates and sampling rates saved by one decoder let another decode
// the data at once.
func TestTemplatesFile(t *testing.T) {
	s := allColumns(t)
	d1, _ := newTestDecoder(t, DefaultConfiguration(), s)
	decodeFiles(t, d1, s, "options-template.pcap", "options-data.pcap", "template.pcap")
	path := filepath.Join(t.TempDir(), "templates.json")
	if err := d1.SaveTemplates(path); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.TemplatesFile = path
	d2, _ := newTestDecoder(t, cfg, s)
	if err := d2.Start(); err != nil {
		t.Fatal(err)
	}
	got := decodeFiles(t, d2, s, "data.pcap")
	if err := d2.Stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got[0], "\n") != strings.Join(captureCases[0].flows[3], "\n") {
		t.Errorf("flows after loading templates:\n%s\nwant\n%s", strings.Join(got[0], "\n"), strings.Join(captureCases[0].flows[3], "\n"))
	}
}

// TestTemplatesFileSaveErrors: a periodic save that fails is counted, reported to the
// component running the decoder, and tried again at the next tick; Stop returns the error.
func TestTemplatesFileSaveErrors(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.TemplatesFile = filepath.Join(t.TempDir(), "missing", "templates.json")
	cfg.TemplatesSaveInterval = 10 * time.Millisecond
	d, _ := newTestDecoder(t, cfg, s)
	reported := make(chan error, 100)
	d.OnSaveError(func(err error) {
		select {
		case reported <- err:
		default:
		}
	})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	decodeFiles(t, d, s, "template.pcap")
	fztest.WaitUntil(t, "a second failed save counted (a failed save is retried)", func() bool {
		return testutil.ToFloat64(d.metrics.saveErrors) >= 2
	})
	select {
	case err := <-reported:
		if !strings.Contains(err.Error(), "saving templates") {
			t.Errorf("reported %v, want the save error", err)
		}
	default:
		t.Error("the failed saves were not reported")
	}
	before := testutil.ToFloat64(d.metrics.saveErrors)
	if err := d.Stop(); err == nil {
		t.Error("Stop saved into a missing directory")
	}
	if got := testutil.ToFloat64(d.metrics.saveErrors); got <= before {
		t.Errorf("the failed save at Stop is not counted (%v then %v)", before, got)
	}
}

// TestTemplatesFileSaveRetry: after a failed save the decoder has changes to save even
// though no session changed since; a successful save clears that.
func TestTemplatesFileSaveRetry(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	decodeFiles(t, d, s, "template.pcap")
	dir := t.TempDir()
	if err := d.SaveTemplates(filepath.Join(dir, "missing", "templates.json")); err == nil {
		t.Fatal("saved into a missing directory")
	}
	if !d.dirty() {
		t.Error("not dirty after a failed save: it would not be retried")
	}
	if err := d.SaveTemplates(filepath.Join(dir, "templates.json")); err != nil {
		t.Fatal(err)
	}
	if d.dirty() {
		t.Error("still dirty after a successful save")
	}
	if got := testutil.ToFloat64(d.metrics.saveErrors); got != 1 {
		t.Errorf("%v failed saves counted, want 1", got)
	}
}

// TestSamplingRateConfig: per-exporter default and override.
func TestSamplingRateConfig(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte(`
sampling-rates:
  - exporter: 192.0.2.0/24
    override: 512
  - exporter: 0.0.0.0/0
    default: 64
`), &cfg); err != nil {
		t.Fatal(err)
	}
	d, _ := newTestDecoder(t, cfg, s)
	got := decodeFiles(t, d, s, "nfv5.pcap")
	if !strings.Contains(got[0][0], " SamplingRate=512 ") {
		t.Errorf("override not applied: %s", got[0][0])
	}
	// ipfixprobe sends no rate: the default applies.
	cfg.SamplingRates[0].Exporter = cfg.SamplingRates[1].Exporter
	cfg.SamplingRates = cfg.SamplingRates[1:]
	d, _ = newTestDecoder(t, cfg, s)
	got = decodeFiles(t, d, s, "ipfixprobe-templates.pcap", "ipfixprobe-data.pcap")
	if !strings.Contains(got[1][0], " SamplingRate=64 ") {
		t.Errorf("default not applied: %s", got[1][0])
	}
}

// TestSchemaColumns: disabled columns compile to nothing and never reach the message; the
// default schema keeps the L2 columns (MACs) off.
func TestSchemaColumns(t *testing.T) {
	s, err := schema.New(schema.Configuration{Disabled: []string{"ForwardingStatus", "IngressVRFID"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Enabled(schema.ColumnSrcMAC) || s.Enabled(schema.ColumnForwardingStatus) {
		t.Fatal("SrcMAC and ForwardingStatus should be disabled")
	}
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	got := decodeFiles(t, d, s, "options-template.pcap", "options-data.pcap", "template.pcap", "data.pcap",
		"ipfixprobe-templates.pcap", "ipfixprobe-data.pcap")
	if len(got[3]) != 4 || len(got[5]) != 6 {
		t.Fatalf("%d and %d flows, want 4 and 6", len(got[3]), len(got[5]))
	}
	for _, f := range append(got[3], got[5]...) {
		for _, col := range []string{"SrcMAC=", "DstMAC=", "ForwardingStatus=", "IngressVRFID="} {
			if strings.Contains(f, col) {
				t.Errorf("disabled column %s in %s", col, f)
			}
		}
	}
	for k, tpl := range session(t, d).templates {
		for _, st := range append(tpl.fwd, tpl.rev...) {
			if st.act != actSkip && st.col != 0 && !s.Enabled(st.col) && !st.act.alwaysNeeded() {
				t.Errorf("template %v decodes disabled column %s", k, schema.Lookup(st.col).Name)
			}
		}
	}
}

// TestMalformed: every prefix of a capture decodes without panicking; truncated datagrams
// return an error and emit nothing (their set lengths run past the end).
func TestMalformed(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	decodeFiles(t, d, s, "options-template.pcap", "options-data.pcap", "template.pcap")
	data := payloads(t, "data.pcap")[0]
	fm := s.NewFlowMessage()
	for cut := range len(data) {
		n := 0
		err := d.Decode(Packet{Payload: data[:cut], Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) { n++ })
		if err == nil && cut != 20 { // a header without sets is valid
			t.Errorf("cut at %d: no error", cut)
		}
		if n != 0 {
			t.Errorf("cut at %d: %d flows, want 0", cut, n)
		}
	}
	if _, err := New(nil, DefaultConfiguration(), s); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfiguration()
	bad.TimestampSource = "flow"
	if _, err := New(nil, bad, s); err == nil || !strings.Contains(err.Error(), "timestamp-source") {
		t.Errorf("bad timestamp-source: %v", err)
	}
}

// TestZeroAllocs: decoding and finalizing allocates nothing in steady state (NetFlow v9
// with options, IPFIX biflows, NetFlow v5).
func TestZeroAllocs(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		setup    []string
		measured string
	}{
		{[]string{"options-template.pcap", "options-data.pcap", "template.pcap"}, "data.pcap"},
		{[]string{"ipfixprobe-templates.pcap"}, "ipfixprobe-data.pcap"},
		{nil, "nfv5.pcap"},
	} {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		decodeFiles(t, d, s, tc.setup...)
		fm := s.NewFlowMessage()
		pkt := Packet{Payload: payloads(t, tc.measured)[0], Exporter: testExporter, TimeReceived: testTime}
		size := 0
		emit := func(fm *schema.FlowMessage) { size += len(fm.Finalize()) }
		if allocs := testing.AllocsPerRun(100, func() { _ = d.Decode(pkt, fm, emit) }); allocs != 0 {
			t.Errorf("%s: %v allocations per datagram, want 0", tc.measured, allocs)
		}
	}
}

// TestMetrics: packets, flows and templates per exporter, as exported to Prometheus.
func TestMetrics(t *testing.T) {
	s := allColumns(t)
	d, reg := newTestDecoder(t, DefaultConfiguration(), s)
	decodeFiles(t, d, s, "options-template.pcap", "options-data.pcap", "template.pcap", "data.pcap", "nfv5.pcap")
	want := `
# HELP flowzero_netflow_flows_total Flows decoded and emitted, by exporter.
# TYPE flowzero_netflow_flows_total counter
flowzero_netflow_flows_total{exporter="192.0.2.10"} 33
# HELP flowzero_netflow_packets_total NetFlow/IPFIX datagrams received, by exporter and version.
# TYPE flowzero_netflow_packets_total counter
flowzero_netflow_packets_total{exporter="192.0.2.10",version="10"} 0
flowzero_netflow_packets_total{exporter="192.0.2.10",version="5"} 1
flowzero_netflow_packets_total{exporter="192.0.2.10",version="9"} 4
# HELP flowzero_netflow_sampling_rates_total Sampling rates learned or changed from options records, by exporter.
# TYPE flowzero_netflow_sampling_rates_total counter
flowzero_netflow_sampling_rates_total{exporter="192.0.2.10"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"flowzero_netflow_flows_total", "flowzero_netflow_packets_total", "flowzero_netflow_sampling_rates_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(session(t, d).m.templates[tplOptions]); got != 1 {
		t.Errorf("options templates: %v, want 1", got)
	}
	if got := testutil.ToFloat64(session(t, d).m.templates[tplData]); got != 1 {
		t.Errorf("data templates: %v, want 1", got)
	}
}

// TestConcurrent decodes from several goroutines, on shared and separate sessions (run
// with -race).
func TestConcurrent(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	var inputs [][]byte
	for _, f := range []string{"options-template.pcap", "options-data.pcap", "template.pcap", "data.pcap", "ipfixprobe-templates.pcap", "ipfixprobe-data.pcap", "nfv5.pcap"} {
		inputs = append(inputs, payloads(t, f)...)
	}
	done := make(chan int)
	for g := range 4 {
		go func() {
			fm := s.NewFlowMessage()
			n := 0
			ap := netip.AddrPortFrom(testExporter.Addr(), uint16(2055+g%2))
			for range 20 {
				for _, p := range inputs {
					_ = d.Decode(Packet{Payload: p, Exporter: ap, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) { fm.Finalize(); n++ })
				}
			}
			done <- n
		}()
	}
	total := 0
	for range 4 {
		total += <-done
	}
	// Per round: 4 (v9) + 6 (IPFIX biflows) + 29 (v5).
	if total != 4*20*(4+6+29) {
		t.Errorf("%d flows, want %d", total, 4*20*(4+6+29))
	}
}

// TestTimestampSource: TimeReceived from the receive time, the export time or the flow.
func TestTimestampSource(t *testing.T) {
	s := allColumns(t)
	for _, tc := range []struct {
		src  TimestampSource
		want string
	}{
		{TimestampReceive, " TimeReceived=1795327200"},
		{TimestampPacket, " TimeReceived=1647285928"}, // data.pcap header: unix secs
		{TimestampFlowStart, " TimeReceived=1647285925"},
		{TimestampFlowEnd, " TimeReceived=1647285925"},
	} {
		cfg := DefaultConfiguration()
		cfg.TimestampSource = tc.src
		d, _ := newTestDecoder(t, cfg, s)
		got := decodeFiles(t, d, s, "options-template.pcap", "options-data.pcap", "template.pcap", "data.pcap")
		if !strings.HasSuffix(got[3][0], tc.want) {
			t.Errorf("%s: %s, want %s", tc.src, got[3][0], tc.want)
		}
	}
}

// TestMaxExporters: sessions beyond the bound are refused and counted, once the sessions
// are established (see TestSpoofedSessions for the others).
func TestMaxExporters(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.MaxExporters = 1
	d, reg := newTestDecoder(t, cfg, s)
	fm := s.NewFlowMessage()
	p := payloads(t, "nfv5.pcap")[0]
	for range 2 {
		if err := d.Decode(Packet{Payload: p, Exporter: testExporter}, fm, func(*schema.FlowMessage) {}); err != nil {
			t.Fatal(err)
		}
	}
	other := netip.MustParseAddrPort("192.0.2.11:2055")
	if err := d.Decode(Packet{Payload: p, Exporter: other}, fm, func(*schema.FlowMessage) {}); !errors.Is(err, ErrTooManyExporters) {
		t.Errorf("second exporter: %v, want ErrTooManyExporters", err)
	}
	if got := testutil.ToFloat64(d.metrics.sessionsDropped); got != 1 {
		t.Errorf("sessions dropped: %v, want 1", got)
	}
	// Once the first session has been idle long enough, it makes room.
	later := time.Time{}.Add(cfg.SessionIdleTimeout)
	if err := d.Decode(Packet{Payload: p, Exporter: other, TimeReceived: later}, fm, func(*schema.FlowMessage) {}); err != nil {
		t.Errorf("second exporter after eviction: %v", err)
	}
	if _, ok := d.exporters[testExporter]; ok || len(d.exporters) != 1 {
		t.Errorf("sessions after eviction: %v", d.exporters)
	}
	// The evicted exporter's series are gone: spoofed sources cannot grow them forever.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "exporter" {
					series[l.GetValue()]++
				}
			}
		}
	}
	if series["192.0.2.10"] != 0 || series["192.0.2.11"] == 0 {
		t.Errorf("series by exporter after eviction: %v", series)
	}
}

// TestConfiguration: YAML keys, defaults and errors that name the key.
func TestConfiguration(t *testing.T) {
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte("timestamp-source: flow-start\npending-sets: 4\npacket:\n  decapsulation: vxlan\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.TimestampSource != TimestampFlowStart || cfg.PendingSets != 4 || cfg.MaxExporters != 4096 {
		t.Errorf("decoded %+v", cfg)
	}
	for doc, key := range map[string]string{
		"max-exporters: 0":                                "max-exporters",
		"timestamp-source: now":                           "timestamp-source",
		"sampling-rates: [{exporter: 10.0.0.0/8}]":        "sampling-rates[0]",
		"packet: {vxlan-port: 0}":                         "packet.vxlan-port",
		"templates-file: /x\ntemplates-save-interval: 0s": "templates-save-interval",
	} {
		cfg := DefaultConfiguration()
		err := config.Decode([]byte(doc), &cfg)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", doc, err, key)
		}
	}
}

// ipfixBuilder builds IPFIX datagrams for hand-made cases.
type ipfixBuilder struct{ b []byte }

func (x *ipfixBuilder) u8(v ...byte) *ipfixBuilder { x.b = append(x.b, v...); return x }
func (x *ipfixBuilder) u16(v ...uint16) *ipfixBuilder {
	for _, n := range v {
		x.b = binary.BigEndian.AppendUint16(x.b, n)
	}
	return x
}
func (x *ipfixBuilder) u32(v ...uint32) *ipfixBuilder {
	for _, n := range v {
		x.b = binary.BigEndian.AppendUint32(x.b, n)
	}
	return x
}

// datagram wraps sets into an IPFIX message of domain 7, export time 1700000000.
func ipfixDatagram(sets ...[]byte) []byte {
	return ipfixDomainDatagram(7, sets...)
}

// ipfixDomainDatagram wraps sets into an IPFIX message of a domain, export time 1700000000.
func ipfixDomainDatagram(domain uint32, sets ...[]byte) []byte {
	x := &ipfixBuilder{}
	x.u16(10, 0).u32(1700000000, 1, domain)
	for _, s := range sets {
		x.u8(s...)
	}
	binary.BigEndian.PutUint16(x.b[2:], uint16(len(x.b)))
	return x.b
}

// set wraps a body into a set with its header, padded to 4 bytes.
func ipfixSet(id uint16, body []byte) []byte {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	x := &ipfixBuilder{}
	x.u16(id, uint16(4+len(body))).u8(body...)
	return x.b
}

// TestVariableLengthAndEnterprise: RFC 7011 §7 variable-length fields in both forms, an
// unknown enterprise element skipped, reduced-size counters, padding after the records.
func TestVariableLengthAndEnterprise(t *testing.T) {
	tpl := &ipfixBuilder{}
	tpl.u16(300, 6)
	tpl.u16(8, 4)             // sourceIPv4Address
	tpl.u16(82, 0xffff)       // interfaceName, variable length, not a column
	tpl.u16(0x8000|1, 0xffff) // enterprise element 1 of PEN 9999, variable length
	tpl.u32(9999)
	tpl.u16(12, 4) // destinationIPv4Address
	tpl.u16(1, 3)  // octetDeltaCount, reduced to 3 bytes
	tpl.u16(2, 4)  // packetDeltaCount
	data := &ipfixBuilder{}
	// Record 1: short forms.
	data.u8(192, 0, 2, 1).u8(3, 'e', 't', '0').u8(0).u8(198, 51, 100, 1).u8(0x01, 0x00, 0x00).u32(3)
	// Record 2: long form (255, then a 2-byte length) for the enterprise element.
	data.u8(192, 0, 2, 2).u8(0).u8(255).u16(300).u8(make([]byte, 300)...).u8(198, 51, 100, 2).u8(0, 0, 40).u32(1)
	pkt := ipfixDatagram(ipfixSet(ipfixTemplateSetID, tpl.b), ipfixSet(300, data.b))

	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	fm := s.NewFlowMessage()
	var got []string
	err := d.Decode(Packet{Payload: pkt, Exporter: testExporter, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) {
		got = append(got, flowString(t, s, fm.Finalize()))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Bytes=65536 DstAddr=198.51.100.1 EType=2048 ExporterAddress=192.0.2.10 Packets=3 SamplingRate=1 SrcAddr=192.0.2.1 TimeReceived=1795327200",
		"Bytes=40 DstAddr=198.51.100.2 EType=2048 ExporterAddress=192.0.2.10 Packets=1 SamplingRate=1 SrcAddr=192.0.2.2 TimeReceived=1795327200",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A record cut inside its variable-length field is an error, and its set, whose records
	// do not fill it, emits nothing.
	cut := ipfixDatagram(ipfixSet(300, data.b[:len(data.b)-200]))
	got = got[:0]
	err = d.Decode(Packet{Payload: cut, Exporter: testExporter, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) {
		got = append(got, flowString(t, s, fm.Finalize()))
	})
	if !errors.Is(err, ErrTruncatedRecord) || len(got) != 0 {
		t.Errorf("cut record: %v, %d flows; want ErrTruncatedRecord and no flow", err, len(got))
	}
}

func TestPutBounded(t *testing.T) {
	m := map[string]int{}
	for _, tc := range []struct {
		k      string
		v      int
		stored bool
	}{{"a", 1, true}, {"b", 2, true}, {"c", 3, false}, {"a", 4, true}, {"b", 2, true}} {
		if got := putBounded(m, tc.k, tc.v, 2); got != tc.stored {
			t.Errorf("putBounded(%q, %d) = %v, want %v", tc.k, tc.v, got, tc.stored)
		}
	}
	if len(m) != 2 || m["a"] != 4 || m["b"] != 2 {
		t.Errorf("map %v, want a=4 b=2", m)
	}
}

// TestSamplersPerExporterBound: beyond max-samplers-per-exporter, new sampling rates and
// system init times are dropped and counted; the ones already known still change.
func TestSamplersPerExporterBound(t *testing.T) {
	// RFC 7011 §3.4.2.2 options template 400: scope observationDomainId, then samplerId,
	// samplingInterval and systemInitTimeMilliseconds.
	tpl := (&ipfixBuilder{}).u16(400, 4, 1).u16(149, 4).u16(48, 4).u16(34, 4).u16(160, 8).b
	record := func(domain, sampler, rate uint32, sysInit uint64) []byte {
		x := (&ipfixBuilder{}).u32(domain, sampler, rate)
		x.b = binary.BigEndian.AppendUint64(x.b, sysInit)
		return x.b
	}
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.MaxSamplersPerExporter = 1
	d, _ := newTestDecoder(t, cfg, s)
	fm := s.NewFlowMessage()
	for _, pkt := range [][]byte{
		ipfixDomainDatagram(1, ipfixSet(ipfixOptionsSetID, tpl), ipfixSet(400, record(1, 1, 100, 1000))), // stored
		ipfixDomainDatagram(1, ipfixSet(400, record(1, 2, 200, 1000))),                                   // sampler 2: dropped
		ipfixDomainDatagram(2, ipfixSet(ipfixOptionsSetID, tpl), ipfixSet(400, record(2, 1, 300, 2000))), // domain 2: both dropped
		ipfixDomainDatagram(1, ipfixSet(400, record(1, 1, 150, 1500))),                                   // known: updated
	} {
		if err := d.Decode(Packet{Payload: pkt, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {}); err != nil {
			t.Fatal(err)
		}
	}
	e := session(t, d)
	if len(e.samplers) != 1 || e.samplers[samplerKey{10, 1, 1}] != 150 {
		t.Errorf("samplers %v, want only domain 1 sampler 1 at 150", e.samplers)
	}
	if len(e.sysInit) != 1 || e.sysInit[1] != 1500 {
		t.Errorf("system init times %v, want only domain 1 at 1500", e.sysInit)
	}
	if got := testutil.ToFloat64(e.m.errors[reasonTooManySamplers]); got != 3 {
		t.Errorf("too-many-samplers: %v, want 3", got)
	}

	// The same bound applies to the rates read from a templates file.
	d2, _ := newTestDecoder(t, cfg, s)
	file := `{"format": "` + persistFormat + `", "sessions": [{"exporter": "` + testExporter.String() + `", "samplers": [
		{"version": 10, "domain": 1, "sampler": 1, "rate": 100}, {"version": 10, "domain": 1, "sampler": 2, "rate": 200}]}]}`
	if err := d2.loadTemplates([]byte(file), "test.json"); err != nil {
		t.Fatal(err)
	}
	if e := session(t, d2); len(e.samplers) != 1 || testutil.ToFloat64(e.m.errors[reasonTooManySamplers]) != 1 {
		t.Errorf("loaded samplers %v, %v dropped; want 1 and 1", e.samplers, testutil.ToFloat64(e.m.errors[reasonTooManySamplers]))
	}
}
