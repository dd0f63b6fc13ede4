package sflow

import (
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"flowzero/schema"
)

// TestExporterDetails decodes captures and checks the agents, sub-agents, data sources and
// sampling rates the details report (values read with tshark from the captures).
func TestExporterDetails(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	if v := d.ExporterDetails(testExporter.Addr()); v != nil {
		t.Fatalf("details before any datagram: %#v", v)
	}
	// data-1140: agent 172.16.0.3, sub-agent 0, sequence 812646826, uptime 930960704 ms;
	// 5 flow samples, all 1 out of 1024, from ifIndex sources 28, 25, 27, 28, 28.
	// data-sflow-expanded-sample: agent 49.49.49.49, one expanded sample from source 0:11001
	// at 1 out of 1000.
	for _, name := range []string{"data-1140.pcap", "data-1140.pcap", "data-sflow-expanded-sample.pcap"} {
		if _, err := decodeAll(t, d, s, payload(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	v := d.ExporterDetails(netip.AddrFrom16(testExporter.Addr().As16())) // v4-mapped form
	agents, ok := v.([]AgentDetails)
	if !ok || len(agents) != 2 {
		t.Fatalf("ExporterDetails() = %#v, want 2 agents", v)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatal(err)
	}
	a := agents[0]
	if a.Agent != "172.16.0.3" || len(a.SubAgents) != 1 {
		t.Fatalf("agent %+v", a)
	}
	sa := a.SubAgents[0]
	if sa.ID != 0 || sa.Datagrams != 2 || sa.SequenceNumber != 812646826 || sa.UptimeMs != 930960704 || !sa.LastDatagram.Equal(testTime) {
		t.Errorf("sub-agent %+v", sa)
	}
	want := []DataSourceDetails{
		{Type: 0, Index: 25, SamplingRate: 1024, Samples: 2, LastSample: testTime},
		{Type: 0, Index: 27, SamplingRate: 1024, Samples: 2, LastSample: testTime},
		{Type: 0, Index: 28, SamplingRate: 1024, Samples: 6, LastSample: testTime},
	}
	if !slices.EqualFunc(sa.DataSources, want, func(x, y DataSourceDetails) bool {
		return x.Type == y.Type && x.Index == y.Index && x.SamplingRate == y.SamplingRate && x.Samples == y.Samples && x.LastSample.Equal(y.LastSample)
	}) {
		t.Errorf("data sources %+v, want %+v", sa.DataSources, want)
	}
	b := agents[1]
	if b.Agent != "49.49.49.49" || len(b.SubAgents) != 1 || len(b.SubAgents[0].DataSources) != 1 {
		t.Fatalf("agent %+v", b)
	}
	if ds := b.SubAgents[0].DataSources[0]; ds.Index != 11001 || ds.SamplingRate != 1000 || ds.Samples != 1 {
		t.Errorf("expanded sample source %+v", ds)
	}
	if v := d.ExporterDetails(netip.MustParseAddr("192.0.2.99")); v != nil {
		t.Errorf("ExporterDetails(unknown) = %#v, want nil", v)
	}
}

// TestExporterDetailsBounds sends datagrams from many sub-agents and data sources: the state
// stays within maxSubAgents and maxSourcesPerAgent.
func TestExporterDetailsBounds(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	data := append([]byte(nil), payload(t, "data-1140.pcap")...)
	for i := range uint32(300) {
		binary.BigEndian.PutUint32(data[12:], i%20)           // sub-agent ID
		binary.BigEndian.PutUint32(data[28+8+4:], 1000+i*100) // source ID of sample 1
		if _, err := decodeAll(t, d, s, data); err != nil {
			t.Fatal(err)
		}
	}
	agents := d.ExporterDetails(testExporter.Addr()).([]AgentDetails)
	if n := len(agents[0].SubAgents); n != maxSubAgents {
		t.Errorf("%d sub-agents, want %d", n, maxSubAgents)
	}
	sources := 0
	for _, sa := range agents[0].SubAgents {
		sources += len(sa.DataSources)
	}
	// 16 tracked sub-agents, each with the 3 sources of samples 2-5 and 15 of sample 1.
	if sources != maxSourcesPerAgent {
		t.Errorf("%d data sources, want %d", sources, maxSourcesPerAgent)
	}
}

// TestExporterDetailsConcurrent reads the details while datagrams are decoded (-race).
func TestExporterDetailsConcurrent(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	data := payload(t, "data-1140.pcap")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fm := s.NewFlowMessage()
		for range 200 {
			_ = d.Decode(Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) { fm.Finalize() })
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
