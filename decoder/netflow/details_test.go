package netflow

import (
	"encoding/json"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"flowzero/schema"
)

// detailsOf returns the single session of the test exporter.
func detailsOf(t *testing.T, d *Decoder) SessionDetails {
	t.Helper()
	v := d.ExporterDetails(testExporter.Addr())
	sessions, ok := v.([]SessionDetails)
	if !ok || len(sessions) != 1 {
		t.Fatalf("ExporterDetails() = %#v, want one session", v)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatalf("details do not marshal: %v", err)
	}
	s := sessions[0]
	if s.Exporter != testExporter.String() || s.SourcePort != testExporter.Port() {
		t.Errorf("session %s port %d, want %s", s.Exporter, s.SourcePort, testExporter)
	}
	return s
}

// fieldIEs lists a template's information element numbers.
func fieldIEs(td TemplateDetails) []uint16 {
	var out []uint16
	for _, f := range td.Fields {
		out = append(out, f.IE)
	}
	return out
}

// TestExporterDetails decodes captures and checks that the details list the template IDs,
// field lists and sampling rates they carry (values read with tshark from the captures).
func TestExporterDetails(t *testing.T) {
	s := allColumns(t)

	t.Run("netflow-v9", func(t *testing.T) {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		decodeFiles(t, d, s, "options-template.pcap", "options-data.pcap", "template.pcap", "data.pcap")
		sd := detailsOf(t, d)
		if len(sd.Domains) != 1 {
			t.Fatalf("%d domains, want 1", len(sd.Domains))
		}
		dom := sd.Domains[0]
		if dom.Version != 9 || dom.ObservationDomain != 0 {
			t.Errorf("domain %d/%d, want 9/0", dom.Version, dom.ObservationDomain)
		}
		if len(dom.Templates) != 2 {
			t.Fatalf("%d templates, want 2", len(dom.Templates))
		}
		opt, data := dom.Templates[0], dom.Templates[1]
		// Options template 257: scope System (type 1, 4 bytes), then sampler ID (48),
		// random interval (50), mode (49), name (84), sampling interval (34).
		if opt.ID != 257 || opt.Kind != "options" || opt.ScopeFields != 1 {
			t.Errorf("options template %+v", opt)
		}
		if got, want := fieldIEs(opt), []uint16{1, 48, 50, 49, 84, 34}; !slices.Equal(got, want) {
			t.Errorf("options template IEs %v, want %v", got, want)
		}
		if f := opt.Fields[0]; !f.Scope || f.Name != "System" || f.Length != 4 {
			t.Errorf("options template scope field %+v", f)
		}
		if opt.Fields[1].Scope || opt.Fields[1].Name != "samplerId" || opt.Fields[5].Name != "samplingInterval" {
			t.Errorf("options template fields %+v", opt.Fields)
		}
		// Data template 260: 23 fields, the 21st being the sampler ID.
		if data.ID != 260 || data.Kind != "data" || len(data.Fields) != 23 || data.Fields[20].IE != 48 {
			t.Errorf("data template %d %s with %d fields", data.ID, data.Kind, len(data.Fields))
		}
		if data.Received == nil || !data.Received.Equal(testTime) || data.LastUsed == nil || !data.LastUsed.Equal(testTime) {
			t.Errorf("data template received %v, last used %v, want %v", data.Received, data.LastUsed, testTime)
		}
		if want := []SamplingRateDetails{{SamplerID: 1, Rate: 30000}}; !slices.Equal(dom.SamplingRates, want) {
			t.Errorf("sampling rates %v, want %v", dom.SamplingRates, want)
		}
		if sd.PendingSets != 0 || len(dom.Pending) != 0 {
			t.Errorf("pending %d %v, want none", sd.PendingSets, dom.Pending)
		}
	})

	t.Run("multiplesamplingrates", func(t *testing.T) {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		decodeFiles(t, d, s, "multiplesamplingrates-options-template.pcap", "multiplesamplingrates-options-data.pcap",
			"multiplesamplingrates-template.pcap", "multiplesamplingrates-data.pcap")
		dom := detailsOf(t, d).Domains[0]
		if len(dom.Templates) != 2 || dom.Templates[0].ID != 257 || dom.Templates[1].ID != 328 || len(dom.Templates[1].Fields) != 27 {
			t.Errorf("templates %+v", dom.Templates)
		}
		if want := []SamplingRateDetails{{1, 2000}, {2, 4000}}; !slices.Equal(dom.SamplingRates, want) {
			t.Errorf("sampling rates %v, want %v", dom.SamplingRates, want)
		}
	})

	t.Run("ipfix-mpls", func(t *testing.T) {
		// IPFIX, observation domain 16777216: data template 2510 (50 fields) and options
		// template 50310 (scope observationDomainId and templateId, then selector algorithm,
		// samplingPacketInterval 1 and samplingPacketSpace 9: a rate of 10).
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		decodeFiles(t, d, s, "mpls.pcap")
		dom := detailsOf(t, d).Domains[0]
		if dom.Version != 10 || dom.ObservationDomain != 16777216 {
			t.Errorf("domain %d/%d, want 10/16777216", dom.Version, dom.ObservationDomain)
		}
		if len(dom.Templates) != 2 {
			t.Fatalf("%d templates, want 2", len(dom.Templates))
		}
		data, opt := dom.Templates[0], dom.Templates[1]
		if data.ID != 2510 || len(data.Fields) != 50 {
			t.Errorf("data template %d with %d fields, want 2510 with 50", data.ID, len(data.Fields))
		}
		if got, want := fieldIEs(opt), []uint16{149, 145, 304, 305, 306}; opt.ID != 50310 || opt.ScopeFields != 2 || !slices.Equal(got, want) {
			t.Errorf("options template %d scope %d IEs %v, want 50310 scope 2 IEs %v", opt.ID, opt.ScopeFields, got, want)
		}
		if f := opt.Fields[1]; !f.Scope || f.Name != "templateId" || opt.Fields[2].Scope {
			t.Errorf("options template fields %+v", opt.Fields)
		}
		if want := []SamplingRateDetails{{0, 10}}; !slices.Equal(dom.SamplingRates, want) {
			t.Errorf("sampling rates %v, want %v", dom.SamplingRates, want)
		}
	})

	t.Run("pending", func(t *testing.T) {
		// Data before its template: the set waits, listed under template 260.
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		decodeFiles(t, d, s, "data.pcap")
		sd := detailsOf(t, d)
		if sd.PendingSets != 1 || len(sd.Domains) != 1 || len(sd.Domains[0].Pending) != 1 || sd.Domains[0].Pending[0].TemplateID != 260 {
			t.Fatalf("pending %d, domains %+v, want one set for template 260", sd.PendingSets, sd.Domains)
		}
		if p := sd.Domains[0].Pending[0]; p.Bytes != sd.PendingBytes || p.Bytes == 0 || !p.Received.Equal(testTime) {
			t.Errorf("pending set %+v, session bytes %d", p, sd.PendingBytes)
		}
		decodeFiles(t, d, s, "template.pcap")
		if sd := detailsOf(t, d); sd.PendingSets != 0 || len(sd.Domains[0].Pending) != 0 {
			t.Errorf("pending after the template: %d sets", sd.PendingSets)
		}
	})

	t.Run("unknown exporter", func(t *testing.T) {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		if v := d.ExporterDetails(netip.MustParseAddr("192.0.2.99")); v != nil {
			t.Errorf("ExporterDetails(unknown) = %#v, want nil", v)
		}
	})
}

// TestExporterDetailsConcurrent reads the details while datagrams are decoded (run with
// -race).
func TestExporterDetailsConcurrent(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	var dgs [][]byte
	for _, f := range []string{"options-template.pcap", "options-data.pcap", "template.pcap", "data.pcap"} {
		dgs = append(dgs, payloads(t, f)...)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fm := s.NewFlowMessage()
		for range 50 {
			for _, p := range dgs {
				_ = d.Decode(Packet{Payload: p, Exporter: testExporter, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) { fm.Finalize() })
			}
		}
	}()
	for range 50 {
		if v := d.ExporterDetails(testExporter.Addr()); v != nil {
			if _, err := json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
}
