package netflow

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"flowzero/decoder/packet"
	"flowzero/internal/testdata"
	"flowzero/pbwire"
	"flowzero/schema"
)

var (
	fuzzOnce   sync.Once
	fuzzSchema *schema.Schema
	fuzzWarm   *Decoder
)

// FuzzNetflowDecode feeds arbitrary datagrams to fresh decoders, without and with
// decapsulation (twice, so that templates in the input apply to its data sets), and to a
// decoder that knows every template of the captures. Its corpus (testdata/fuzz) holds the
// datagrams crafted by the tests of exporters_test.go and framing_test.go. Nothing may panic, and a flow must always finalize into a message the schema
// decodes.
func FuzzNetflowDecode(f *testing.F) {
	for _, p := range testdata.Glob(f, "netflow/*.pcap") {
		for _, payload := range payloadsOf(f, p) {
			f.Add(payload)
		}
	}
	for _, tc := range inconsistentCases() {
		f.Add(tc.dgs[len(tc.dgs)-1])
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
	pkt := Packet{Payload: data, Exporter: netip.MustParseAddrPort("198.51.100.1:9995"), TimeReceived: testTime}
	// Without decapsulation, and with it (templates that repeat header elements are then
	// a tunnel's).
	for _, cfg := range fuzzConfigurations() {
		fresh, err := New(nil, cfg, fuzzSchema)
		if err != nil {
			t.Fatal(err)
		}
		_ = fresh.PendingRoom(pkt) // without a session
		_ = fresh.Decode(pkt, fm, check)
		_ = fresh.PendingRoom(pkt) // with one
		_ = fresh.Decode(pkt, fm, check)
		// The details re-read the template records as received.
		if _, err := json.Marshal(fresh.ExporterDetails(pkt.Exporter.Addr())); err != nil {
			t.Fatalf("details: %v", err)
		}
	}
	pkt.Exporter = testExporter
	_ = fuzzWarm.PendingRoom(pkt)
	_ = fuzzWarm.Decode(pkt, fm, check)
}

// fuzzConfigurations are the decoder configurations the fuzz targets decode with.
func fuzzConfigurations() []Configuration {
	decap := DefaultConfiguration()
	decap.Packet.Decapsulation = packet.DecapSRv6
	return []Configuration{DefaultConfiguration(), decap}
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

// FuzzNetflowTemplateRecords builds, from the input, a template (its field specifiers) and a
// data set (its records), then decodes them as IPFIX and as NetFlow v9, data or options.
// Random datagrams rarely hold a template that parses; this reaches the template compiler
// and the record decoder with every field length and type, including variable-length,
// enterprise, RFC 5103 reverse and RFC 7133 data-link fields.
func FuzzNetflowTemplateRecords(f *testing.F) {
	f.Add(be16(8, 4, 12, 4, 1, 4, 2, 4, 4, 1, 7, 2, 11, 2), []byte{10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 1, 6, 0, 80, 1, 187}, false)
	f.Add(be16(8, 4, 82, 0xffff, 315, 0xffff), []byte{10, 0, 0, 1, 3, 'e', 't', 'h', 255, 0, 4, 1, 2, 3, 4}, false)
	f.Add(be16(0x8000|2, 4, 0, 29305, 2, 4, 8, 4), []byte{0, 0, 0, 5, 0, 0, 0, 7, 10, 0, 0, 1}, false)
	f.Add(be16(0x8000|137, 2, 0, 2636, 1, 4), []byte{0x08, 0x00, 0, 0, 0, 100}, false)
	f.Add(be16(149, 4, 48, 1, 34, 4, 305, 4, 306, 4, 160, 8), []byte{0, 0, 0, 1, 1, 0, 0, 3, 232, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 1, 0x8b, 0, 0, 0, 0}, true)
	// Repeated header elements (an outer and an inner header), NSEL and total counters,
	// zero-length fields.
	f.Add(be16(8, 4, 12, 4, 4, 1, 8, 4, 12, 4, 4, 1, 231, 4, 232, 4, 85, 4, 0, 0), []byte{10, 0, 0, 1, 10, 0, 0, 2, 41, 192, 0, 2, 1, 192, 0, 2, 2, 6, 0, 0, 0, 75, 0, 0, 3, 113, 0, 0, 0, 9}, false)
	s := allColumns(f)
	f.Fuzz(func(t *testing.T, specs, records []byte, options bool) {
		if len(specs) > 4*300 || len(specs) < 4 {
			return
		}
		check := func(fm *schema.FlowMessage) {
			msg, rest, err := pbwire.SplitDelimited(fm.Finalize())
			if err != nil || len(rest) != 0 {
				t.Fatalf("finalized flow: %v, %d bytes left", err, len(rest))
			}
			if err := s.DecodeMessage(msg, func(*schema.Column, any) {}); err != nil {
				t.Fatalf("finalized flow does not decode: %v", err)
			}
		}
		// IPFIX: count the specifiers as the enterprise bits say.
		count := 0
		for p := specs; len(p) >= 4; count++ {
			if p[0]&0x80 != 0 && len(p) >= 8 {
				p = p[8:]
			} else {
				p = p[4:]
			}
		}
		var ipfixTemplate, v9Template []byte
		if options {
			ipfixTemplate = nfSet(ipfixOptionsSetID, be16(257, uint16(count), 1), specs)
			n := len(specs) / 4
			v9Template = nfSet(v9OptionsTemplateSetID, be16(257, 4, uint16(4*(n-1))), specs[:4*n])
		} else {
			ipfixTemplate = nfSet(ipfixTemplateSetID, be16(256, uint16(count)), specs)
			v9Template = nfSet(v9TemplateSetID, be16(256, uint16(len(specs)/4)), specs[:len(specs)/4*4])
		}
		id := uint16(256)
		if options {
			id = 257
		}
		fm := s.NewFlowMessage()
		for _, dg := range [][]byte{
			ipfixDatagram(ipfixTemplate, nfSet(id, records)),
			v9Datagram(v9Template, nfSet(id, records)),
			v9Datagram(nfSet(id, records), v9Template), // data before its template
		} {
			if len(dg) > 65535 {
				continue
			}
			for _, cfg := range fuzzConfigurations() {
				d, err := New(nil, cfg, s)
				if err != nil {
					t.Fatal(err)
				}
				_ = d.Decode(Packet{Payload: dg, Exporter: testExporter, TimeReceived: testTime}, fm, check)
				if _, err := json.Marshal(d.ExporterDetails(testExporter.Addr())); err != nil {
					t.Fatalf("details: %v", err)
				}
			}
		}
	})
}
