package netflow

import (
	"encoding/binary"
	"errors"
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"

	"flowzero/decoder/packet/flowtest"
	"flowzero/schema"
)

// TestInconsistentFraming (issue #24, 5): a datagram or a set whose framing contradicts
// itself emits nothing from the part in doubt. NetFlow v5: the header's count and the
// datagram's length must agree. NetFlow v9 and IPFIX: the set lengths must chain to the end
// of the message, or nothing of it is decoded; a data set whose records do not fill it
// emits nothing, the sets around it are kept; a template set with a record that does not
// parse installs no template.
func TestInconsistentFraming(t *testing.T) {
	s := allColumns(t)
	v5rec := v5Record(3, 300, 1000, 2000)
	v9tpl := nfSet(v9TemplateSetID, be16(256, 3, 8, 4, 12, 4, 1, 4))
	v9rec := []byte{10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 5, 220}
	// IPFIX template 300 with a variable-length interfaceName (82): a record can be cut.
	vtpl := ipfixSet(ipfixTemplateSetID, be16(300, 3, 8, 4, 12, 4, 82, 0xFFFF))
	vrec := cat([]byte{10, 0, 0, 3, 10, 0, 0, 4}, []byte{3, 'e', 't', '0'})
	vcut := cat([]byte{10, 0, 0, 5, 10, 0, 0, 6}, []byte{200, 'e', 't', '1'})
	for _, tc := range []struct {
		name      string
		dg        []byte
		flows     int
		err       error
		templates int // templates installed afterwards
	}{
		{"v5 count above the records", func() []byte { dg := v5Datagram(5000, 0, v5rec, v5rec); dg[3] = 3; return dg }(), 0, ErrTruncatedRecord, 0},
		{"v5 count below the records", func() []byte { dg := v5Datagram(5000, 0, v5rec, v5rec); dg[3] = 1; return dg }(), 0, ErrBadLength, 0},
		{"v5 zero padding after the records", append(v5Datagram(5000, 0, v5rec, v5rec), make([]byte, 20)...), 2, nil, 0},
		{"v9 set length past the end after good sets", v9Datagram(v9tpl, nfSet(256, v9rec), be16(256, 1000), v9rec), 0, ErrBadSet, 0},
		{"v9 set length below 4 after good sets", v9Datagram(v9tpl, nfSet(256, v9rec), be16(256, 2), v9rec), 0, ErrBadSet, 0},
		{"v9 zero padding after the sets", append(v9Datagram(v9tpl, nfSet(256, v9rec)), make([]byte, 7)...), 1, nil, 1},
		{"IPFIX sets past the message length", func() []byte {
			dg := ipfixDatagram(vtpl, ipfixSet(300, vrec), ipfixSet(300, vrec))
			binary.BigEndian.PutUint16(dg[2:], uint16(len(dg)-4)) // the message ends inside the last set
			return dg
		}(), 0, ErrBadSet, 0},
		{"IPFIX data set with a cut record between good sets", ipfixDatagram(vtpl, ipfixSet(300, cat(vrec, vcut)), ipfixSet(300, vrec)), 1, ErrTruncatedRecord, 1},
		{"template set with a record that does not parse", v9Datagram(nfSet(v9TemplateSetID, be16(256, 3, 8, 4, 12, 4, 1, 4), be16(257, 40, 8, 4)), nfSet(256, v9rec)), 0, ErrBadTemplate, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDecoder(t, DefaultConfiguration(), s)
			flows, errs := flowFields(t, d, s, tc.dg)
			if len(flows) != tc.flows {
				t.Errorf("%d flows, want %d", len(flows), tc.flows)
			}
			if !errors.Is(errs[0], tc.err) || (tc.err == nil) != (errs[0] == nil) {
				t.Errorf("Decode() = %v, want %v", errs[0], tc.err)
			}
			if e := d.exporters[testExporter]; e != nil && len(e.templates) != tc.templates {
				t.Errorf("%d templates installed, want %d", len(e.templates), tc.templates)
			}
		})
	}
}

// cloneDecoder returns a decoder in the state of d (templates, sampling rates, system init
// times, pending data), whose decoding leaves d's state unchanged; the two share their
// metrics.
func cloneDecoder(d *Decoder) *Decoder {
	c := &Decoder{cfg: d.cfg, schema: d.schema, metrics: d.metrics, link: d.link, tsSource: d.tsSource,
		exporters: make(map[netip.AddrPort]*exporter, len(d.exporters))}
	for ap, e := range d.exporters {
		ce := &exporter{addr: ap, templates: maps.Clone(e.templates), samplers: maps.Clone(e.samplers), sysInit: maps.Clone(e.sysInit),
			defaultRate: e.defaultRate, overrideRate: e.overrideRate, pendingBytes: e.pendingBytes, m: e.m}
		for _, p := range e.pending {
			p.data = append([]byte(nil), p.data...)
			ce.pending = append(ce.pending, p)
		}
		c.exporters[ap] = ce
	}
	return c
}

// finalizedFlows decodes one datagram and returns its error and the finalized flows.
func finalizedFlows(d *Decoder, fm *schema.FlowMessage, dg []byte) ([]string, error) {
	var flows []string
	err := d.Decode(Packet{Payload: dg, Exporter: testExporter, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) {
		flows = append(flows, string(fm.Finalize()))
	})
	return flows, err
}

// TestCorruptedCaptures (issue #24, 5) cuts and flips every datagram of the captures, each
// decoded by a decoder that knows the capture's templates and sampling rates: every prefix
// emits a subset of the intact datagram's flows (in practice none), and so does every single
// bit flip that the decoder counts as an error. A flip that it cannot tell from data (an
// address, a counter, a template's field type) changes the flows without an error, as it
// would for any decoder.
func TestCorruptedCaptures(t *testing.T) {
	s := allColumns(t)
	fm := s.NewFlowMessage()
	var datagrams, cuts, flips, flipErrors int
	for _, tc := range captureCases {
		base, _ := newTestDecoder(t, DefaultConfiguration(), s)
		decodeFiles(t, base, s, tc.files...)
		for _, file := range tc.files {
			for _, dg := range payloads(t, file) {
				datagrams++
				intact, err := finalizedFlows(cloneDecoder(base), fm, dg)
				if err != nil {
					t.Fatalf("%s: intact datagram: %v", file, err)
				}
				for cut := range len(dg) {
					cuts++
					got, err := finalizedFlows(cloneDecoder(base), fm, dg[:cut])
					if len(got) > 0 && !flowtest.SubsetOf(got, intact) {
						t.Errorf("%s cut at %d (error %v): %d flows not all from the intact datagram", file, cut, err, len(got))
					}
				}
				m := append([]byte(nil), dg...)
				for bit := range len(dg) * 8 {
					if raceEnabled && bit >= 64*8 && bit%8 != (bit/8)%8 {
						continue // under the race detector: every bit of the headers, one per byte after
					}
					flips++
					m[bit/8] ^= 1 << (bit % 8)
					got, err := finalizedFlows(cloneDecoder(base), fm, m)
					m[bit/8] ^= 1 << (bit % 8)
					if err == nil {
						continue
					}
					flipErrors++
					if !flowtest.SubsetOf(got, intact) {
						t.Errorf("%s bit %d flipped: %v, and %d flows not all from the intact datagram", file, bit, err, len(got))
					}
				}
			}
		}
	}
	t.Logf("%d datagrams: %d prefixes, %d bit flips (%d counted as errors)", datagrams, cuts, flips, flipErrors)
}

// TestRandomDatagrams (issue #24, 5): random bytes behind a NetFlow v5, v9 or IPFIX version
// number, decoded by decoders that know the captures' templates, emit no flow whenever they
// are counted as an error.
func TestRandomDatagrams(t *testing.T) {
	s := allColumns(t)
	fm := s.NewFlowMessage()
	var warm []*Decoder
	for _, tc := range captureCases {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		decodeFiles(t, d, s, tc.files...)
		warm = append(warm, d)
	}
	rng := rand.New(rand.NewPCG(24, 5))
	const n = 30000
	var counted, withFlows int
	for i := range n {
		dg := make([]byte, 2+rng.IntN(1500))
		for j := range dg {
			dg[j] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint16(dg, []uint16{5, 9, 10}[i%3])
		if i%3 == 2 && len(dg) >= 4 {
			binary.BigEndian.PutUint16(dg[2:], uint16(len(dg))) // an IPFIX length that matches
		}
		d := warm[i%len(warm)]
		var flows int
		err := d.Decode(Packet{Payload: dg, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) { flows++ })
		if err != nil {
			counted++
			if flows > 0 {
				t.Errorf("random datagram %d (%d bytes, version %d): %v, and %d flows", i, len(dg), dg[1], err, flows)
			}
		} else if flows > 0 {
			withFlows++
		}
	}
	t.Logf("%d random datagrams: %d counted as errors, %d accepted with flows", n, counted, withFlows)
	if counted < n*99/100 {
		t.Errorf("only %d of %d random datagrams counted as errors", counted, n)
	}
}
