package netflow

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/pbwire"
	"flowzero/schema"
)

// allColumns enables every column, so that tests see every field the decoder writes.
func allColumns(t testing.TB) *schema.Schema {
	t.Helper()
	var cfg schema.Configuration
	for k := schema.ColumnKey(1); k < schema.ColumnLast; k++ {
		if c := schema.Lookup(k); c != nil && !c.Default {
			cfg.Enabled = append(cfg.Enabled, c.Name)
		}
	}
	s, err := schema.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testExporter is the exporter address used by the tests (the captures' own addresses do
// not matter to the decoder).
var testExporter = netip.MustParseAddrPort("192.0.2.10:2055")

// testTime is the receive time used by the tests.
var testTime = time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)

// payloads reads the UDP payloads of a capture of the shared netflow folder.
func payloads(t testing.TB, name string) [][]byte {
	t.Helper()
	return payloadsOf(t, testdata.Path(t, "netflow", name))
}

// payloadsOf reads the UDP payloads of a capture.
func payloadsOf(t testing.TB, path string) [][]byte {
	t.Helper()
	dgs, err := pcapfile.ReadUDP(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, dg := range dgs {
		out = append(out, dg.Payload)
	}
	return out
}

// newTestDecoder returns a decoder with its own registry.
func newTestDecoder(t testing.TB, cfg Configuration, s *schema.Schema) (*Decoder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := New(reg, cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return d, reg
}

// flowString reads back a finalized flow through the schema's decoder and prints it as
// sorted "Column=value" pairs (repeated columns as comma-separated lists, MAC addresses in
// hex), so that expectations read like the capture.
func flowString(t testing.TB, s *schema.Schema, framed []byte) string {
	t.Helper()
	msg, rest, err := pbwire.SplitDelimited(framed)
	if err != nil || len(rest) != 0 {
		t.Fatalf("SplitDelimited: %v (%d bytes left)", err, len(rest))
	}
	values := map[string][]string{}
	err = s.DecodeMessage(msg, func(c *schema.Column, v any) {
		var str string
		switch x := v.(type) {
		case uint64:
			if c.Kind == schema.KindMAC {
				str = fmt.Sprintf("%012x", x)
			} else {
				str = fmt.Sprint(x)
			}
		default:
			str = fmt.Sprint(x)
		}
		values[c.Name] = append(values[c.Name], str)
	})
	if err != nil {
		t.Fatalf("DecodeMessage: %v", err)
	}
	var parts []string
	for name, vs := range values {
		parts = append(parts, name+"="+strings.Join(vs, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// decodeFiles decodes the captures in order and returns the flows of each file.
func decodeFiles(t testing.TB, d *Decoder, s *schema.Schema, files ...string) [][]string {
	t.Helper()
	fm := s.NewFlowMessage()
	var out [][]string
	for _, f := range files {
		var flows []string
		for _, p := range payloads(t, f) {
			err := d.Decode(Packet{Payload: p, Exporter: testExporter, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) {
				flows = append(flows, flowString(t, s, fm.Finalize()))
			})
			if err != nil {
				t.Fatalf("%s: Decode: %v", f, err)
			}
		}
		out = append(out, flows)
	}
	return out
}
