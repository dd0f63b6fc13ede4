package netflow

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/schema"
)

// be16 encodes big-endian 16-bit values.
func be16(vs ...uint16) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint16(b, v)
	}
	return b
}

// nfSet builds a set: ID, length (4 + body), body.
func nfSet(id uint16, body ...[]byte) []byte {
	b := be16(id, 0)
	for _, x := range body {
		b = append(b, x...)
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	return b
}

// v9Datagram builds a NetFlow v9 datagram (RFC 3954 §5.1), source ID 0.
func v9Datagram(sets ...[]byte) []byte {
	b := be16(9, uint16(len(sets)))
	b = binary.BigEndian.AppendUint32(b, 1000)                    // sysUptime
	b = binary.BigEndian.AppendUint32(b, uint32(testTime.Unix())) // unix secs
	b = binary.BigEndian.AppendUint32(b, 1)                       // sequence
	b = binary.BigEndian.AppendUint32(b, 0)                       // source ID
	for _, s := range sets {
		b = append(b, s...)
	}
	return b
}

// inconsistentCase is a sequence of datagrams whose last contradicts itself.
type inconsistentCase struct {
	name   string
	dgs    [][]byte
	reason reason
	err    error
}

// inconsistentCases are also seeds of FuzzNetflowDecode.
func inconsistentCases() []inconsistentCase {
	// A valid v9 template 256: source address (4), destination address (4), bytes (4).
	goodV9 := nfSet(0, be16(256, 3, 8, 4, 12, 4, 1, 4))
	record := []byte{10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 5, 220}
	// An IPFIX template 256 with a variable-length interfaceName (82).
	varTemplate := nfSet(2, be16(256, 2, 8, 4, 82, 0xffff))
	return []inconsistentCase{
		{"set length past the datagram", [][]byte{v9Datagram(goodV9, be16(256, 1000), record)}, reasonBadSet, ErrBadSet},
		{"set length below 4", [][]byte{v9Datagram(goodV9, be16(256, 2), record)}, reasonBadSet, ErrBadSet},
		{"set of length 0 before data", [][]byte{v9Datagram(be16(0, 0), goodV9)}, reasonBadSet, ErrBadSet},
		{"template with 0 fields", [][]byte{v9Datagram(nfSet(0, be16(256, 0)))}, reasonBadTemplate, ErrBadTemplate},
		{"template of zero-length fields", [][]byte{v9Datagram(nfSet(0, be16(256, 2, 8, 0, 12, 0)))}, reasonBadTemplate, ErrBadTemplate},
		{"options template of zero-length fields", [][]byte{v9Datagram(nfSet(1, be16(257, 4, 4, 1, 0, 34, 0)))}, reasonBadTemplate, ErrBadTemplate},
		{"template ID below 256", [][]byte{v9Datagram(nfSet(0, be16(255, 1, 8, 4)))}, reasonBadTemplate, ErrBadTemplate},
		{"template with more fields than bytes", [][]byte{v9Datagram(nfSet(0, be16(256, 50, 8, 4)))}, reasonBadTemplate, ErrBadTemplate},
		{"v9 options scope length not a multiple of 4", [][]byte{v9Datagram(nfSet(1, be16(257, 6, 4, 1, 4, 34, 4), []byte{0, 0}))}, reasonBadTemplate, ErrBadTemplate},
		{"v9 options length not a multiple of 4", [][]byte{v9Datagram(nfSet(1, be16(257, 4, 6, 1, 4, 34, 4), []byte{0, 0}))}, reasonBadTemplate, ErrBadTemplate},
		{"IPFIX options scope count above field count", [][]byte{ipfixDatagram(nfSet(3, be16(257, 1, 2, 149, 4)))}, reasonBadTemplate, ErrBadTemplate},
		{"IPFIX options scope count 0", [][]byte{ipfixDatagram(nfSet(3, be16(257, 1, 0, 34, 4)))}, reasonBadTemplate, ErrBadTemplate},
		{"variable-length field past the record", [][]byte{ipfixDatagram(varTemplate, nfSet(256, []byte{10, 0, 0, 1, 200, 'e', 't', 'h'}))}, reasonTruncatedRecord, ErrTruncatedRecord},
		{"long variable-length field past the record", [][]byte{ipfixDatagram(varTemplate, nfSet(256, []byte{10, 0, 0, 1, 255, 0xea, 0x60, 'e', 't', 'h'}))}, reasonTruncatedRecord, ErrTruncatedRecord},
		{"IPFIX length past the datagram", [][]byte{func() []byte { b := ipfixDatagram(goodV9); b[3] += 10; return b }()}, reasonBadLength, ErrBadLength},
		{"IPFIX length below the header", [][]byte{func() []byte { b := ipfixDatagram(); b[3] = 8; return b }()}, reasonBadLength, ErrBadLength},
		{"NetFlow v5 count past the records", [][]byte{func() []byte { b := make([]byte, 24+48); b[1], b[3] = 5, 2; return b }()}, reasonTruncatedRecord, ErrTruncatedRecord},
		{"unknown version", [][]byte{be16(7, 0)}, reasonBadVersion, ErrVersion},
		{"one byte", [][]byte{{9}}, reasonTruncatedHeader, ErrTruncated},
	}
}

// TestSelfInconsistent feeds datagrams that contradict themselves: each returns an error,
// counts it under the exporter and the expected reason, emits nothing and installs no bad
// template.
func TestSelfInconsistent(t *testing.T) {
	cases := inconsistentCases()
	s := allColumns(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDecoder(t, DefaultConfiguration(), s)
			fm := s.NewFlowMessage()
			var err error
			flows := 0
			for _, dg := range tc.dgs {
				err = d.Decode(Packet{Payload: dg, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) { flows++ })
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("Decode() = %v, want %v", err, tc.err)
			}
			// The complete records before the inconsistency are still decoded.
			if flows > 1 {
				t.Errorf("%d flows", flows)
			}
			if got := testutil.ToFloat64(d.metrics.errors.WithLabelValues("192.0.2.10", reasonNames[tc.reason])); got != 1 {
				t.Errorf("flowzero_netflow_errors_total{reason=%q}: %v, want 1", reasonNames[tc.reason], got)
			}
			for k, tpl := range session(t, d).templates {
				if tpl.minRecord == 0 || k.id < minDataSetID {
					t.Errorf("bad template %d installed", k.id)
				}
			}
		})
	}
}

// TestTemplateBounds: a template with more fields than max-fields-per-template and more
// templates than max-templates-per-exporter are refused and counted, whatever the exporter
// sends.
func TestTemplateBounds(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.MaxFieldsPerTemplate = 4
	cfg.MaxTemplatesPerExporter = 2
	d, _ := newTestDecoder(t, cfg, s)
	fm := s.NewFlowMessage()
	decode := func(dg []byte) error {
		return d.Decode(Packet{Payload: dg, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {})
	}
	if err := decode(v9Datagram(nfSet(0, be16(256, 5, 8, 4, 12, 4, 1, 4, 2, 4, 4, 1)))); !errors.Is(err, ErrBadTemplate) {
		t.Errorf("5 fields: %v", err)
	}
	var tpls [][]byte
	for id := uint16(300); id < 310; id++ {
		tpls = append(tpls, be16(id, 1, 8, 4))
	}
	if err := decode(v9Datagram(nfSet(0, tpls...))); !errors.Is(err, ErrBadTemplate) {
		t.Errorf("10 templates: %v", err)
	}
	e := session(t, d)
	if len(e.templates) != 2 {
		t.Errorf("%d templates kept, want 2", len(e.templates))
	}
	if got := testutil.ToFloat64(e.m.errors[reasonTooManyFields]); got != 1 {
		t.Errorf("too-many-fields: %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.m.errors[reasonTooManyTemplates]); got != 8 {
		t.Errorf("too-many-templates: %v, want 8", got)
	}
}

// manyUnknownSets is a 64 kB IPFIX message of 8000 four-byte data sets, each for a template
// that was never sent.
func manyUnknownSets() []byte {
	sets := make([][]byte, 8000)
	for i := range sets {
		sets[i] = nfSet(uint16(300+i), []byte{1, 2, 3, 4})
	}
	return ipfixDatagram(sets...)
}

// TestManyUnknownSets: the pending queue takes the first pending-sets sets and counts the
// others as dropped (the expiry pass that makes room runs once per datagram, not per set:
// see BenchmarkDecodeHostile).
func TestManyUnknownSets(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	fm := s.NewFlowMessage()
	err := d.Decode(Packet{Payload: manyUnknownSets(), Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {
		t.Error("flow emitted")
	})
	if !errors.Is(err, ErrTemplateNotFound) {
		t.Errorf("Decode() = %v, want ErrTemplateNotFound", err)
	}
	e := session(t, d)
	want := DefaultConfiguration().PendingSets
	if len(e.pending) != want || testutil.ToFloat64(e.m.pending) != float64(want) {
		t.Errorf("%d pending sets, want %d", len(e.pending), want)
	}
	if got := testutil.ToFloat64(e.m.errors[reasonPendingFull]); got != float64(8000-want) {
		t.Errorf("pending-full: %v, want %d", got, 8000-want)
	}
}
