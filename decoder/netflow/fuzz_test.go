package netflow

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"flowzero/internal/testdata"
	"flowzero/pbwire"
	"flowzero/schema"
)

var (
	fuzzOnce   sync.Once
	fuzzSchema *schema.Schema
	fuzzWarm   *Decoder
)

// FuzzNetflowDecode feeds arbitrary datagrams to a fresh decoder (twice, so that templates
// in the input apply to its data sets) and to a decoder that knows every template of the
// captures. Nothing may panic, and a flow must always finalize into a message the schema
// decodes.
func FuzzNetflowDecode(f *testing.F) {
	for _, p := range testdata.Glob(f, "netflow/*.pcap") {
		for _, payload := range payloadsOf(f, p) {
			f.Add(payload)
		}
	}
	f.Fuzz(runFuzzOne)
}

// runFuzzOne decodes one fuzz input.
func runFuzzOne(t *testing.T, data []byte) {
	fuzzOnce.Do(func() {
		fuzzSchema = allColumns(t)
		fuzzWarm, _ = New(nil, DefaultConfiguration(), fuzzSchema)
		fm := fuzzSchema.NewFlowMessage()
		for _, p := range testdata.Glob(t, "netflow/*.pcap") {
			for _, payload := range payloadsOf(t, p) {
				_ = fuzzWarm.Decode(Packet{Payload: payload, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {})
			}
		}
	})
	fm := fuzzSchema.NewFlowMessage()
	check := func(fm *schema.FlowMessage) {
		msg, rest, err := pbwire.SplitDelimited(fm.Finalize())
		if err != nil || len(rest) != 0 {
			t.Fatalf("finalized flow: %v, %d bytes left", err, len(rest))
		}
		if err := fuzzSchema.DecodeMessage(msg, func(*schema.Column, any) {}); err != nil {
			t.Fatalf("finalized flow does not decode: %v", err)
		}
	}
	fresh, err := New(nil, DefaultConfiguration(), fuzzSchema)
	if err != nil {
		t.Fatal(err)
	}
	pkt := Packet{Payload: data, Exporter: netip.MustParseAddrPort("198.51.100.1:9995"), TimeReceived: testTime}
	_ = fresh.Decode(pkt, fm, check)
	_ = fresh.Decode(pkt, fm, check)
	// The details re-read the template records as received.
	if _, err := json.Marshal(fresh.ExporterDetails(pkt.Exporter.Addr())); err != nil {
		t.Fatalf("details: %v", err)
	}
	pkt.Exporter = testExporter
	_ = fuzzWarm.Decode(pkt, fm, check)
}

// FuzzNetflowTemplatesFile loads arbitrary templates files (the file is read at start, and
// may have been edited or cut by a crash): errors are returned, nothing panics, and the
// templates it installs can be described.
func FuzzNetflowTemplatesFile(f *testing.F) {
	s := allColumns(f)
	// Seeds: the files saved after decoding the captures.
	for _, files := range [][]string{
		{"options-template.pcap", "options-data.pcap", "template.pcap"},
		{"mpls.pcap", "ipfixprobe-templates.pcap"},
		{"data+templates.pcap", "juniper-cpid-template.pcap"},
	} {
		d, err := New(nil, DefaultConfiguration(), s)
		if err != nil {
			f.Fatal(err)
		}
		fm := s.NewFlowMessage()
		for _, name := range files {
			for _, p := range payloadsOf(f, testdata.Path(f, "netflow", name)) {
				_ = d.Decode(Packet{Payload: p, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {})
			}
		}
		path := filepath.Join(f.TempDir(), "templates.json")
		if err := d.SaveTemplates(path); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := DefaultConfiguration()
		cfg.MaxExporters = 8
		d, err := New(nil, cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		_ = d.loadTemplates(data, "fuzz")
		for ap := range d.exporters {
			if _, err := json.Marshal(d.ExporterDetails(ap.Addr())); err != nil {
				t.Fatalf("details: %v", err)
			}
		}
	})
}
