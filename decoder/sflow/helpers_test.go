package sflow

import (
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/decoder/packet/flowtest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// testExporter is the UDP source used by the tests; the captures' own addresses do not
// matter to the decoder (flows carry the agent address of the datagram).
var testExporter = netip.MustParseAddrPort("192.0.2.10:6343")

// testTime is the receive time used by the tests.
var testTime = time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)

func allColumns(t testing.TB) *schema.Schema {
	t.Helper()
	s, err := flowtest.AllColumns()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func defaultSchema(t testing.TB) *schema.Schema {
	t.Helper()
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// payload reads the UDP payload of a one-datagram capture of the shared sflow folder.
func payload(t testing.TB, name string) []byte {
	t.Helper()
	dgs, err := pcapfile.ReadUDP(testdata.Path(t, "sflow", name))
	if err != nil {
		t.Fatal(err)
	}
	if len(dgs) != 1 {
		t.Fatalf("%s: %d datagrams, want 1", name, len(dgs))
	}
	return dgs[0].Payload
}

func newTestDecoder(t testing.TB, cfg Configuration, s *schema.Schema) (*Decoder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := New(reg, cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return d, reg
}

// decodeAll decodes one datagram and returns its flows as decoded from the wire.
func decodeAll(t testing.TB, d *Decoder, s *schema.Schema, data []byte) ([]flowtest.Flow, error) {
	t.Helper()
	fm := s.NewFlowMessage()
	var flows []flowtest.Flow
	err := d.Decode(Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime}, fm,
		func(fm *schema.FlowMessage) {
			f, err := flowtest.Decode(s, fm.Finalize())
			if err != nil {
				t.Fatalf("decoding an emitted flow: %v", err)
			}
			flows = append(flows, f)
		})
	return flows, err
}

// testutilCount returns the value of a counter with the given type label.
func testutilCount(t testing.TB, reg *prometheus.Registry, name, typ string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == typ {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
