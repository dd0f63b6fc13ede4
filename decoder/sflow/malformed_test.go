package sflow

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/decoder/packet"
	"flowzero/decoder/packet/flowtest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// In data-1140: 28-byte datagram header (IPv4 agent); sample 1 at 28 (208 bytes), its record
// count at 64, its extended switch record at 68 and raw header record at 92 (header length
// at 104); sample 2 at 244 (272 bytes); sample 3 at 524.
func TestMalformed(t *testing.T) {
	put := func(b []byte, off int, v uint32) []byte {
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		flows  int
		reason string
	}{
		{"empty", func(b []byte) []byte { return b[:0] }, 0, "truncated-datagram"},
		{"header cut", func(b []byte) []byte { return b[:20] }, 0, "truncated-datagram"},
		{"version 4", func(b []byte) []byte { return put(b, 0, 4) }, 0, "bad-version"},
		{"agent type 3", func(b []byte) []byte { return put(b, 4, 3) }, 0, "bad-agent-address"},
		{"datagram cut in sample 3", func(b []byte) []byte { return b[:600] }, 0, "truncated-datagram"},
		{"sample length past the end", func(b []byte) []byte { return put(b, 32, 5000) }, 0, "truncated-datagram"},
		{"100 records in sample 1", func(b []byte) []byte { return put(b, 64, 100) }, 4, "truncated-sample"},
		{"record length past the sample", func(b []byte) []byte { return put(b, 72, 1000) }, 4, "truncated-sample"},
		{"switch record of 8 bytes", func(b []byte) []byte { return put(b, 72, 8) }, 4, "truncated-record"},
		{"header longer than its record", func(b []byte) []byte { return put(b, 112, 1000) }, 4, "truncated-record"},
		{"header cut inside Ethernet", func(b []byte) []byte { return put(b, 112, 10) }, 5, "header-truncated"},
		{"sample count above the samples", func(b []byte) []byte { return put(b, 24, 1000) }, 0, "truncated-datagram"},
		{"sample count 2^32-1", func(b []byte) []byte { return put(b, 24, 0xffffffff) }, 0, "truncated-datagram"},
		{"record count 2^32-1", func(b []byte) []byte { return put(b, 64, 0xffffffff) }, 4, "truncated-sample"},
		{"record count below the records", func(b []byte) []byte { return put(b, 64, 1) }, 4, "trailing-bytes"},
		{"header longer than the frame", func(b []byte) []byte { return put(b, 104, 100) }, 4, "header-longer-than-frame"},
		{"header of nested EoMPLS", func(b []byte) []byte {
			level := []byte{0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x88, 0x47, 0x00, 0x06, 0x41, 0x40, 0, 0, 0, 0}
			for i := 0; i+len(level) <= 128; i += len(level) {
				copy(b[116+i:], level)
			}
			return b
		}, 5, "header-too-deep"},
	}
	s := allColumns(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDecoder(t, DefaultConfiguration(), s)
			data := tc.mutate(append([]byte(nil), payload(t, "data-1140.pcap")...))
			flows, err := decodeAll(t, d, s, data)
			if len(flows) != tc.flows {
				t.Errorf("Decode() emitted %d flows, want %d", len(flows), tc.flows)
			}
			var se *Error
			if !errors.As(err, &se) || se.Reason != tc.reason {
				t.Fatalf("Decode() error %v, want reason %s", err, tc.reason)
			}
			// The agent is unknown when the datagram header itself is bad.
			agent := "172.16.0.3"
			switch tc.name {
			case "empty", "header cut", "version 4", "agent type 3":
				agent = agentUnknown
			}
			c := d.metrics.errors.WithLabelValues("192.0.2.10", agent, tc.reason)
			if got := testutil.ToFloat64(c); got != 1 {
				t.Errorf("errors_total{agent=%q,reason=%q} = %v, want 1", agent, tc.reason, got)
			}
		})
	}
}

func TestMaxAgents(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.MaxAgents = 1
	d, _ := newTestDecoder(t, cfg, s)
	for _, name := range []string{"data-1140.pcap", "data-qinq.pcap", "data-icmpv4.pcap"} {
		if _, err := decodeAll(t, d, s, payload(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(d.metrics.packets.WithLabelValues("192.0.2.10", "172.16.0.3")); got != 1 {
		t.Errorf("packets of the first agent = %v, want 1", got)
	}
	if got := testutil.ToFloat64(d.metrics.packets.WithLabelValues("192.0.2.10", agentOther)); got != 2 {
		t.Errorf("packets of other agents = %v, want 2", got)
	}
	if got := testutil.CollectAndCount(d.metrics.packets); got != 2 {
		t.Errorf("%d packets_total series, want 2", got)
	}
}

func TestConfiguration(t *testing.T) {
	cfg := DefaultConfiguration()
	cfg.MaxAgents = 0
	if err := cfg.Validate(); err == nil || err.Error() != "max-agents: must be at least 1, not 0" {
		t.Errorf("Validate() = %v", err)
	}
	cfg = DefaultConfiguration()
	cfg.Packet.VXLANPort = 0
	if err := cfg.Validate(); err == nil || err.Error() != "packet.vxlan-port: must not be 0" {
		t.Errorf("Validate() = %v", err)
	}
}

// TestNoAllocations checks that decoding and encoding a datagram allocates nothing, with the
// default columns and with all of them.
func TestNoAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are checked in long mode")
	}
	check := func(name string, all bool) {
		s := allColumns(t)
		if !all {
			s = defaultSchema(t)
		}
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		fm := s.NewFlowMessage()
		data := payload(t, "data-1140.pcap")
		pkt := Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime}
		n := 0
		emit := func(fm *schema.FlowMessage) { n += len(fm.Finalize()) }
		allocs := testing.AllocsPerRun(100, func() {
			if err := d.Decode(pkt, fm, emit); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per datagram", name, allocs)
		}
	}
	check("default", false)
	check("all columns", true)
}

// FuzzSflowDecode decodes arbitrary datagrams, with and without decapsulation, and checks
// that every emitted flow is a well-formed message of the schema.
func FuzzSflowDecode(f *testing.F) {
	for _, path := range testdata.Glob(f, filepath.Join("sflow", "*.pcap")) {
		dgs, err := pcapfile.ReadUDP(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, dg := range dgs {
			f.Add(dg.Payload)
		}
	}
	s, err := flowtest.AllColumns()
	if err != nil {
		f.Fatal(err)
	}
	var decoders []*Decoder
	for _, decap := range []packet.Decapsulation{packet.DecapNone, packet.DecapVXLAN} {
		cfg := DefaultConfiguration()
		cfg.Packet.Decapsulation = decap
		d, err := New(nil, cfg, s)
		if err != nil {
			f.Fatal(err)
		}
		decoders = append(decoders, d)
	}
	fm := s.NewFlowMessage()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range decoders {
			err := d.Decode(Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime}, fm,
				func(fm *schema.FlowMessage) {
					if _, err := flowtest.Decode(s, fm.Finalize()); err != nil {
						t.Fatalf("malformed flow: %v", err)
					}
				})
			var se *Error
			if err != nil && !errors.As(err, &se) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			if _, err := json.Marshal(d.ExporterDetails(testExporter.Addr())); err != nil {
				t.Fatalf("details: %v", err)
			}
		}
	})
}
