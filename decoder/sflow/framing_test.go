package sflow

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"flowzero/decoder/packet/flowtest"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// TestInconsistentFraming (issue #24, 5): the samples a datagram announces must be framed
// by their lengths inside it, or nothing of it is decoded; a flow sample whose records do
// not fill it exactly (a record count below the records present) emits nothing, the other
// samples are kept.
func TestInconsistentFraming(t *testing.T) {
	put := func(b []byte, off int, v uint32) []byte {
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	// data-1140 (see TestMalformed): 5 samples; sample 1 at 28, its record count at 64.
	for _, tc := range []struct {
		name   string
		mutate func([]byte) []byte
		flows  int
		reason string
	}{
		{"datagram cut in sample 3", func(b []byte) []byte { return b[:600] }, 0, "truncated-datagram"},
		{"sample count above the samples", func(b []byte) []byte { return put(b, 24, 6) }, 0, "truncated-datagram"},
		{"record count below the records", func(b []byte) []byte { return put(b, 64, 1) }, 4, "trailing-bytes"},
		{"sample count below the samples", func(b []byte) []byte { return put(b, 24, 3) }, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := allColumns(t)
			d, _ := newTestDecoder(t, DefaultConfiguration(), s)
			flows, err := decodeAll(t, d, s, tc.mutate(append([]byte(nil), payload(t, "data-1140.pcap")...)))
			if len(flows) != tc.flows {
				t.Errorf("%d flows, want %d", len(flows), tc.flows)
			}
			var se *Error
			if tc.reason == "" && err != nil || tc.reason != "" && (!errors.As(err, &se) || se.Reason != tc.reason) {
				t.Errorf("Decode() = %v, want reason %q", err, tc.reason)
			}
		})
	}
}

// contentReasons are the errors about what a well-framed sample carries (a sampled packet
// header the parser could not read): its flow is still emitted, with what could be read.
var contentReasons = map[string]bool{
	"header-truncated": true, "header-bad-ip": true, "header-mpls-payload": true, "header-too-deep": true,
}

// finalized decodes one datagram and returns the error and flows. The decoder's state (the
// agents' metrics and details) does not change what it decodes.
func finalized(d *Decoder, fm *schema.FlowMessage, dg []byte) ([]string, error) {
	var flows []string
	err := d.Decode(Packet{Payload: dg, Exporter: testExporter, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) {
		flows = append(flows, string(fm.Finalize()))
	})
	return flows, err
}

// TestCorruptedCaptures (issue #24, 5) cuts and flips every datagram of the sFlow captures:
// every prefix emits a subset of the intact datagram's flows, and so does every single bit
// flip counted as a framing error. Flips in values (addresses, counters) and in sampled
// packet headers (content errors, whose flows are still emitted) change flows, as they
// would for any decoder.
func TestCorruptedCaptures(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	fm := s.NewFlowMessage()
	var cuts, flips, framing int
	for _, path := range testdata.Glob(t, filepath.Join("sflow", "*.pcap")) {
		name := filepath.Base(path)
		dg := payload(t, name)
		intact, err := finalized(d, fm, dg)
		if err != nil {
			t.Fatalf("%s: intact datagram: %v", name, err)
		}
		for cut := range len(dg) {
			cuts++
			if got, err := finalized(d, fm, dg[:cut]); !flowtest.SubsetOf(got, intact) {
				t.Errorf("%s cut at %d (error %v): %d flows not all from the intact datagram", name, cut, err, len(got))
			}
		}
		m := append([]byte(nil), dg...)
		for bit := range len(dg) * 8 {
			flips++
			m[bit/8] ^= 1 << (bit % 8)
			got, err := finalized(d, fm, m)
			m[bit/8] ^= 1 << (bit % 8)
			var se *Error
			if !errors.As(err, &se) || contentReasons[se.Reason] {
				continue
			}
			framing++
			if !flowtest.SubsetOf(got, intact) {
				t.Errorf("%s bit %d flipped: %v, and %d flows not all from the intact datagram", name, bit, err, len(got))
			}
		}
	}
	t.Logf("%d prefixes, %d bit flips (%d counted as framing errors)", cuts, flips, framing)
}

// TestRandomDatagrams (issue #24, 5): random bytes behind an sFlow v5 header emit no flow
// whenever they are counted as an error.
func TestRandomDatagrams(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	fm := s.NewFlowMessage()
	rng := rand.New(rand.NewPCG(24, 5))
	const n = 30000
	var counted int
	for i := range n {
		dg := make([]byte, 28+rng.IntN(1500))
		for j := range dg {
			dg[j] = byte(rng.Uint32())
		}
		// Version 5, an IPv4 agent, and a sample count of at most 8.
		binary.BigEndian.PutUint32(dg, 5)
		binary.BigEndian.PutUint32(dg[4:], 1)
		binary.BigEndian.PutUint32(dg[24:], uint32(1+i%8))
		flows := 0
		err := d.Decode(Packet{Payload: dg, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) { flows++ })
		if err != nil {
			counted++
			if flows > 0 {
				t.Errorf("random datagram %d (%d bytes): %v, and %d flows", i, len(dg), err, flows)
			}
		}
	}
	t.Logf("%d random datagrams, %d counted as errors", n, counted)
	if counted < n*99/100 {
		t.Errorf("only %d of %d random datagrams counted as errors", counted, n)
	}
}
