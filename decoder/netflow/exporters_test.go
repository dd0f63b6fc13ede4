package netflow

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/decoder/packet"
	"flowzero/internal/config"
	"flowzero/schema"
)

// The tests of this file craft what real exporters send and the shared captures do not
// hold (issue #25). Each datagram was checked with Wireshark's dissector: with
// FLOWZERO_DUMP_DATAGRAMS=dir, flowFields writes the datagrams of each test to
// dir/<test>.txt in text2pcap's format, then
//
//	text2pcap -u 2055,2055 dir/TestX.txt x.pcap && tshark -r x.pcap -d udp.port==2055,cflow -V
//
// shows the values the expectations rely on.

// flowFields decodes datagrams in order with d and returns, per flow, its columns as a map.
// Errors are returned per datagram.
func flowFields(t *testing.T, d *Decoder, s *schema.Schema, dgs ...[]byte) ([]map[string]string, []error) {
	t.Helper()
	dumpDatagrams(t, dgs)
	fm := s.NewFlowMessage()
	var flows []map[string]string
	var errs []error
	for _, dg := range dgs {
		err := d.Decode(Packet{Payload: dg, Exporter: testExporter, TimeReceived: testTime}, fm, func(fm *schema.FlowMessage) {
			m := map[string]string{}
			for _, kv := range strings.Split(flowString(t, s, fm.Finalize()), " ") {
				k, v, _ := strings.Cut(kv, "=")
				m[k] = v
			}
			flows = append(flows, m)
		})
		errs = append(errs, err)
	}
	return flows, errs
}

// dumpDatagrams appends datagrams to $FLOWZERO_DUMP_DATAGRAMS/<test>.txt as text2pcap input.
func dumpDatagrams(t *testing.T, dgs [][]byte) {
	dir := os.Getenv("FLOWZERO_DUMP_DATAGRAMS")
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, dg := range dgs {
		for off := 0; off < len(dg); off += 16 {
			fmt.Fprintf(f, "%06x % x\n", off, dg[off:min(off+16, len(dg))])
		}
		fmt.Fprintln(f)
	}
}

// checkFlows compares the given columns of each flow ("" means absent).
func checkFlows(t *testing.T, got []map[string]string, want []map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d flows, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("flow %d: %s=%q, want %q (flow %v)", i, k, got[i][k], v, got[i])
			}
		}
	}
}

// noErrors fails the test when a datagram returned an error.
func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Errorf("datagram %d: %v", i, err)
		}
	}
}

// be32 encodes big-endian 32-bit values.
func be32(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// cat concatenates byte slices.
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// exportSec is the export time of the crafted NetFlow v5 and v9 datagrams (2026-11-22
// 06:00:00 UTC); IPFIX ones use 1700000000 (ipfixDatagram).
const exportSec = 1795327200

// v5Datagram builds a NetFlow v5 datagram: a 24-byte header (count, sysUptime, export time,
// sampling interval) and 48-byte records.
func v5Datagram(sysUptime uint32, sampling uint16, records ...[]byte) []byte {
	b := be16(5, uint16(len(records)))
	b = append(b, be32(sysUptime, exportSec, 0, 7)...) // uptime, secs, nsecs, sequence
	b = append(b, 0, 0)                                // engine type and ID
	b = append(b, be16(sampling)...)
	for _, r := range records {
		b = append(b, r...)
	}
	return b
}

// v5Record builds a NetFlow v5 record from 10.0.0.1:1024 to 10.0.0.2:80 over TCP.
func v5Record(packets, bytes, first, last uint32) []byte {
	r := cat([]byte{10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 0, 0}, be16(1, 2), be32(packets, bytes, first, last))
	r = append(r, be16(1024, 80)...)
	r = append(r, 0, 0x18, 6, 0) // pad, TCP flags, protocol, ToS
	r = append(r, be16(65001, 65002)...)
	r = append(r, 24, 24, 0, 0) // masks, pad
	return r
}

// TestUptimeWrap (issue #25, 1): flow times relative to the exporter's uptime are computed
// modulo 2³², as a signed 32-bit offset from the export time: a FIRST_SWITCHED taken before
// the 32-bit uptime counter wrapped (a router up for more than 49.7 days) is a few seconds
// before the export, not 49.7 days after it. tshark agrees for NetFlow v5 (Duration 1.5 s);
// for v9 it shows the same uptimes and a duration of -4294965.796 s, the unwrapped difference.
func TestUptimeWrap(t *testing.T) {
	s := allColumns(t)
	// The uptime counter wrapped 1 s before the export (sysUptime 1000 ms); the flow started
	// 2 s before the export (FIRST_SWITCHED 2^32 - 1000 ms) and ended 0.5 s before it.
	const first, last = 1<<32 - 1000, 500
	want := []map[string]string{{"TimeFlowStart": fmt.Sprint(exportSec - 2), "TimeFlowEnd": fmt.Sprint(exportSec - 1)}}

	t.Run("netflow-v5", func(t *testing.T) {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		flows, errs := flowFields(t, d, s, v5Datagram(1000, 0, v5Record(3, 300, first, last)))
		noErrors(t, errs)
		checkFlows(t, flows, want)
	})
	t.Run("netflow-v9", func(t *testing.T) {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		// Template 256: addresses, IN_BYTES, IN_PKTS, FIRST_SWITCHED (22), LAST_SWITCHED (21);
		// v9Datagram's sysUptime is 1000 ms.
		tpl := nfSet(v9TemplateSetID, be16(256, 6, 8, 4, 12, 4, 1, 4, 2, 4, 22, 4, 21, 4))
		data := nfSet(256, []byte{10, 0, 0, 1, 10, 0, 0, 2}, be32(300, 3, first, last))
		flows, errs := flowFields(t, d, s, v9Datagram(tpl, data))
		noErrors(t, errs)
		checkFlows(t, flows, want)
		// FIRST_SWITCHED 0xFFFFFFFF with an uptime of 10 ms: 11 ms before the export.
		flows, errs = flowFields(t, d, s, func() []byte {
			dg := v9Datagram(nfSet(256, []byte{10, 0, 0, 1, 10, 0, 0, 2}, be32(300, 3, 0xFFFFFFFF, 10)))
			binary.BigEndian.PutUint32(dg[4:], 10)
			return dg
		}())
		noErrors(t, errs)
		checkFlows(t, flows, []map[string]string{{"TimeFlowStart": fmt.Sprint(exportSec - 1), "TimeFlowEnd": fmt.Sprint(exportSec)}})
	})
	t.Run("ipfix-ie160", func(t *testing.T) {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		// The exporter booted 60 days before the export (1700000000 s): its uptime at the
		// export, 5,184,000,000 ms, no longer fits in 32 bits, and flowStartSysUpTime (22)
		// and flowEndSysUpTime (21) hold the uptimes of the flow modulo 2^32.
		const exportMs = 1700000000 * 1000
		const sysInit = exportMs - 60*86400*1000
		up := uint32((exportMs - sysInit) % (1 << 32))
		tpl := ipfixSet(ipfixTemplateSetID, be16(300, 5, 8, 4, 12, 4, 22, 4, 21, 4, 160, 8))
		rec := cat([]byte{10, 0, 0, 1, 10, 0, 0, 2}, be32(up-2000, up-500), binary.BigEndian.AppendUint64(nil, sysInit))
		flows, errs := flowFields(t, d, s, ipfixDatagram(tpl, ipfixSet(300, rec)))
		noErrors(t, errs)
		checkFlows(t, flows, []map[string]string{{"TimeFlowStart": "1699999998", "TimeFlowEnd": "1699999999"}})

		// The same with the system init time from an options record of the domain.
		opts := ipfixSet(ipfixOptionsSetID, be16(301, 2, 1, 149, 4, 160, 8))
		optsData := ipfixSet(301, cat(be32(7), binary.BigEndian.AppendUint64(nil, sysInit)))
		tpl2 := ipfixSet(ipfixTemplateSetID, be16(302, 4, 8, 4, 12, 4, 22, 4, 21, 4))
		flows, errs = flowFields(t, d, s, ipfixDatagram(opts, optsData, tpl2, ipfixSet(302, cat([]byte{10, 0, 0, 1, 10, 0, 0, 2}, be32(up-2000, up-500)))))
		noErrors(t, errs)
		checkFlows(t, flows, []map[string]string{{"TimeFlowStart": "1699999998", "TimeFlowEnd": "1699999999"}})
	})
}

// TestZeroLengthFields (issue #25, 3): template fields of length 0 carry nothing and are
// skipped; the template is kept, since its records can be framed.
func TestZeroLengthFields(t *testing.T) {
	s := allColumns(t)
	t.Run("netflow-v9", func(t *testing.T) {
		// softflowd-era templates: six type-0/length-0 entries among the fields.
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		tpl := nfSet(v9TemplateSetID, be16(256, 10, 8, 4, 0, 0, 0, 0, 12, 4, 0, 0, 1, 4, 0, 0, 2, 4, 0, 0, 0, 0))
		data := nfSet(256, []byte{10, 0, 0, 1, 10, 0, 0, 2}, be32(1500, 2), []byte{10, 0, 0, 3, 10, 0, 0, 4}, be32(40, 1))
		flows, errs := flowFields(t, d, s, v9Datagram(tpl, data))
		noErrors(t, errs)
		checkFlows(t, flows, []map[string]string{
			{"SrcAddr": "10.0.0.1", "DstAddr": "10.0.0.2", "Bytes": "1500", "Packets": "2"},
			{"SrcAddr": "10.0.0.3", "DstAddr": "10.0.0.4", "Bytes": "40", "Packets": "1"},
		})
	})
	t.Run("ipfix", func(t *testing.T) {
		// flowStartSeconds (150) and flowEndSeconds (151) announced with length 0.
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		tpl := ipfixSet(ipfixTemplateSetID, be16(300, 6, 8, 4, 12, 4, 150, 0, 151, 0, 1, 8, 2, 8))
		rec := cat([]byte{10, 0, 0, 1, 10, 0, 0, 2}, be32(0, 1500, 0, 2))
		flows, errs := flowFields(t, d, s, ipfixDatagram(tpl, ipfixSet(300, rec)))
		noErrors(t, errs)
		checkFlows(t, flows, []map[string]string{{"SrcAddr": "10.0.0.1", "Bytes": "1500", "Packets": "2", "TimeFlowStart": ""}})
	})
}

// TestVariableLengthV9 (issue #25, 4): H3C NetStream sends NetFlow v9 templates with a field
// of length 0xFFFF, encoded as in RFC 7011 §7 (one length byte, or 255 and two length bytes),
// which Wireshark decodes too.
func TestVariableLengthV9(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	// Template 256: addresses, IN_BYTES, IF_NAME (82) of variable length, IN_PKTS.
	tpl := nfSet(v9TemplateSetID, be16(256, 5, 8, 4, 12, 4, 1, 4, 82, 0xFFFF, 2, 4))
	data := nfSet(256,
		[]byte{10, 0, 0, 1, 10, 0, 0, 2}, be32(1500), []byte{3, 'G', 'E', '0'}, be32(2),
		[]byte{10, 0, 0, 3, 10, 0, 0, 4}, be32(40), []byte{255, 0, 5, 'G', 'E', '0', '/', '1'}, be32(1),
	)
	flows, errs := flowFields(t, d, s, v9Datagram(tpl, data))
	noErrors(t, errs)
	checkFlows(t, flows, []map[string]string{
		{"SrcAddr": "10.0.0.1", "DstAddr": "10.0.0.2", "Bytes": "1500", "Packets": "2"},
		{"SrcAddr": "10.0.0.3", "DstAddr": "10.0.0.4", "Bytes": "40", "Packets": "1"},
	})
}

// errorCount is the sum of flowzero_netflow_errors_total for the test exporter.
func errorCount(t *testing.T, d *Decoder) float64 {
	t.Helper()
	var n float64
	for r := reasonNone + 1; r < reasonCount; r++ {
		n += promtest.ToFloat64(d.metrics.errors.WithLabelValues(testExporter.Addr().String(), reasonNames[r]))
	}
	return n
}

// TestHarmlessSets (issue #25, 7): sets that are malformed but lose nothing are not errors,
// so that the error counters mean corruption: an empty (options) template set (set length
// 4) and bytes after the last record of a set that cannot hold another record (padding, RFC
// 7011 §3.3.1; Wireshark shows them as padding).
func TestHarmlessSets(t *testing.T) {
	s := allColumns(t)
	// Template 300: addresses, octetDeltaCount (8), packetDeltaCount (8): 24-byte records.
	tpl := ipfixSet(ipfixTemplateSetID, be16(300, 4, 8, 4, 12, 4, 1, 8, 2, 8))
	rec := cat([]byte{10, 0, 0, 1, 10, 0, 0, 2}, be32(0, 1500, 0, 2))
	// Template 301: addresses and a variable-length interfaceName (82): 9 bytes at least.
	vtpl := ipfixSet(ipfixTemplateSetID, be16(301, 3, 8, 4, 12, 4, 82, 0xFFFF))
	vrec := cat([]byte{10, 0, 0, 3, 10, 0, 0, 4}, []byte{3, 'e', 't', '0'})
	nonZero := []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	want := []map[string]string{{"SrcAddr": "10.0.0.1", "Bytes": "1500"}}
	for _, tc := range []struct {
		name  string
		dg    []byte
		flows []map[string]string
	}{
		{"empty options-template set", ipfixDatagram(nfSet(ipfixOptionsSetID), tpl, nfSet(300, rec)), want},
		{"empty template set", ipfixDatagram(nfSet(ipfixTemplateSetID), tpl, nfSet(300, rec)), want},
		{"empty data set", ipfixDatagram(tpl, nfSet(300), nfSet(300, rec)), want},
		{"v9 empty options-template set", v9Datagram(nfSet(v9OptionsTemplateSetID), nfSet(v9TemplateSetID, be16(256, 2, 8, 4, 12, 4)), nfSet(256, []byte{10, 0, 0, 1, 10, 0, 0, 2})), []map[string]string{{"SrcAddr": "10.0.0.1"}}},
		{"17 zero bytes after the last record", ipfixDatagram(tpl, nfSet(300, rec, make([]byte, 17))), want},
		{"17 bytes of garbage after the last record", ipfixDatagram(tpl, nfSet(300, rec, nonZero)), want},
		{"17 zero bytes after a variable-length record", ipfixDatagram(vtpl, nfSet(301, vrec, make([]byte, 17))), []map[string]string{{"SrcAddr": "10.0.0.3"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDecoder(t, DefaultConfiguration(), s)
			flows, errs := flowFields(t, d, s, tc.dg)
			noErrors(t, errs)
			checkFlows(t, flows, tc.flows)
			if n := errorCount(t, d); n != 0 {
				t.Errorf("%v errors counted, want 0", n)
			}
		})
	}
}

// TestTotalCounters (issue #25, 2): octetTotalCount and packetTotalCount (IPFIX IEs 85, 86;
// NetFlow v9 IN_PERMANENT_BYTES/PKTS) give Bytes and Packets when the template has no delta
// counter (YAF, Cisco ASA, ...), in each direction of a biflow; a delta counter wins
// wherever it is in the template.
func TestTotalCounters(t *testing.T) {
	s := allColumns(t)
	addrs := []byte{10, 0, 0, 1, 10, 0, 0, 2}
	for _, tc := range []struct {
		name  string
		dg    []byte
		flows []map[string]string
	}{
		{"IPFIX totals only", ipfixDatagram(
			ipfixSet(ipfixTemplateSetID, be16(300, 4, 8, 4, 12, 4, 85, 8, 86, 8)),
			ipfixSet(300, cat(addrs, be32(0, 9000, 0, 6)))),
			[]map[string]string{{"Bytes": "9000", "Packets": "6"}}},
		{"IPFIX totals before deltas", ipfixDatagram(
			ipfixSet(ipfixTemplateSetID, be16(300, 6, 8, 4, 12, 4, 85, 8, 86, 8, 1, 4, 2, 4)),
			ipfixSet(300, cat(addrs, be32(0, 9000, 0, 6, 1500, 1)))),
			[]map[string]string{{"Bytes": "1500", "Packets": "1"}}},
		{"NetFlow v9 IN_PERMANENT_BYTES/PKTS", v9Datagram(
			nfSet(v9TemplateSetID, be16(256, 4, 8, 4, 12, 4, 85, 4, 86, 4)),
			nfSet(256, addrs, be32(9000, 6))),
			[]map[string]string{{"Bytes": "9000", "Packets": "6"}}},
		{"YAF biflow of totals", ipfixDatagram(
			// octetTotalCount, packetTotalCount and their reverse (PEN 29305) elements.
			ipfixSet(ipfixTemplateSetID, cat(be16(300, 6, 8, 4, 12, 4, 85, 8, 86, 8), be16(0x8000|85, 8), be32(29305), be16(0x8000|86, 8), be32(29305))),
			ipfixSet(300, cat(addrs, be32(0, 9000, 0, 6, 0, 700, 0, 5)))),
			[]map[string]string{
				{"SrcAddr": "10.0.0.1", "DstAddr": "10.0.0.2", "Bytes": "9000", "Packets": "6"},
				{"SrcAddr": "10.0.0.2", "DstAddr": "10.0.0.1", "Bytes": "700", "Packets": "5"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDecoder(t, DefaultConfiguration(), s)
			flows, errs := flowFields(t, d, s, tc.dg)
			noErrors(t, errs)
			checkFlows(t, flows, tc.flows)
		})
	}
}

// TestNSELCounters (issue #25, 2): Cisco ASA (NSEL) counts a connection with initiator and
// responder counters (IEs 231/232 octets, 298/299 packets). Neither Akvorado (the first one
// present wins) nor GoFlow2 (not mapped) documents a choice; flowzero emits both directions
// as for an RFC 5103 biflow, as Elastic's and Datadog's NetFlow inputs do: the initiator's
// flow, then, when the responder sent something, the responder's with sources and
// destinations swapped.
func TestNSELCounters(t *testing.T) {
	s := allColumns(t)
	// NetFlow v9 template 263: addresses, ports, protocol, 231, 232, 298, 299.
	tpl := nfSet(v9TemplateSetID, be16(263, 9, 8, 4, 12, 4, 7, 2, 11, 2, 4, 1, 231, 4, 232, 4, 298, 4, 299, 4))
	rec := func(io, ro, ip, rp uint32) []byte {
		return cat([]byte{192, 0, 2, 1, 198, 51, 100, 7}, be16(50000, 443), []byte{6}, be32(io, ro, ip, rp))
	}
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	flows, errs := flowFields(t, d, s, v9Datagram(tpl, nfSet(263, rec(75, 881, 2, 3), rec(60, 0, 1, 0))))
	noErrors(t, errs)
	checkFlows(t, flows, []map[string]string{
		{"SrcAddr": "192.0.2.1", "DstAddr": "198.51.100.7", "SrcPort": "50000", "DstPort": "443", "Bytes": "75", "Packets": "2"},
		{"SrcAddr": "198.51.100.7", "DstAddr": "192.0.2.1", "SrcPort": "443", "DstPort": "50000", "Bytes": "881", "Packets": "3", "Proto": "6"},
		{"SrcAddr": "192.0.2.1", "DstAddr": "198.51.100.7", "Bytes": "60", "Packets": "1"},
	})
	// Older ASA releases send octets only: the responder's flow is there when it sent bytes.
	tpl = nfSet(v9TemplateSetID, be16(264, 7, 8, 4, 12, 4, 7, 2, 11, 2, 4, 1, 231, 4, 232, 4))
	flows, errs = flowFields(t, d, s, v9Datagram(tpl, nfSet(264, rec(75, 881, 0, 0)[:21])))
	noErrors(t, errs)
	checkFlows(t, flows, []map[string]string{
		{"SrcAddr": "192.0.2.1", "Bytes": "75", "Packets": ""},
		{"SrcAddr": "198.51.100.7", "Bytes": "881", "Packets": ""},
	})
}

// TestRepeatedElements (issue #25, 5): Cisco's SRv6 templates carry the outer IPv6
// header's elements (27, 28, 7, 11, 4), then the inner packet's again. Every column takes
// its first value, the outer header's; with decapsulation configured, the flow is the inner
// packet and the outer header's addresses and protocol go to the tunnel columns, as for a
// decapsulated data-link frame. Elements of one column (IPv4 and IPv6 fields of dual-stack
// templates) give the first value that is not zero.
func TestRepeatedElements(t *testing.T) {
	s := allColumns(t)
	outer := cat(
		[]byte{0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		[]byte{0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2},
		be16(0, 0), []byte{41})
	inner6 := cat(
		[]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		[]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2},
		be16(51000, 443), []byte{6})
	inner4 := cat([]byte{192, 0, 2, 1, 198, 51, 100, 2}, be16(51000, 443), []byte{17})
	counters := be32(1500, 1)
	srv6 := be16(27, 16, 28, 16, 7, 2, 11, 2, 4, 1)
	tpl6 := ipfixSet(ipfixTemplateSetID, cat(be16(300, 12), srv6, srv6, be16(1, 4, 2, 4)))
	tpl4 := ipfixSet(ipfixTemplateSetID, cat(be16(301, 12), srv6, be16(8, 4, 12, 4, 7, 2, 11, 2, 4, 1), be16(1, 4, 2, 4)))
	dg := ipfixDatagram(tpl6, tpl4, ipfixSet(300, cat(outer, inner6, counters)), ipfixSet(301, cat(outer, inner4, counters)))
	outerFlow := map[string]string{"SrcAddr": "fc00::1", "DstAddr": "fc00::2", "Proto": "41", "SrcPort": "", "DstPort": "", "EType": "34525", "Bytes": "1500", "TunnelSrcAddr": ""}
	t.Run("outer header", func(t *testing.T) {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		flows, errs := flowFields(t, d, s, dg)
		noErrors(t, errs)
		checkFlows(t, flows, []map[string]string{outerFlow, outerFlow})
	})
	t.Run("decapsulated", func(t *testing.T) {
		cfg := DefaultConfiguration()
		cfg.Packet.Decapsulation = packet.DecapSRv6
		d, _ := newTestDecoder(t, cfg, s)
		flows, errs := flowFields(t, d, s, dg)
		noErrors(t, errs)
		tunnel := map[string]string{"TunnelSrcAddr": "fc00::1", "TunnelDstAddr": "fc00::2", "TunnelProto": "41", "Bytes": "1500"}
		checkFlows(t, flows, []map[string]string{
			union(tunnel, map[string]string{"SrcAddr": "2001:db8::1", "DstAddr": "2001:db8::2", "Proto": "6", "SrcPort": "51000", "DstPort": "443", "EType": "34525"}),
			union(tunnel, map[string]string{"SrcAddr": "192.0.2.1", "DstAddr": "198.51.100.2", "Proto": "17", "SrcPort": "51000", "DstPort": "443", "EType": "2048"}),
		})
	})
	t.Run("times", func(t *testing.T) {
		// flowStartSysUpTime (22) before flowStartMilliseconds (152): the absolute time
		// wins wherever it is; of two absolute ones, the first.
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		tpl := ipfixSet(ipfixTemplateSetID, be16(303, 6, 8, 4, 22, 4, 160, 8, 152, 8, 153, 8, 151, 4))
		const sysInit = 1699990000000
		rec := cat([]byte{192, 0, 2, 1}, be32(1000), binary.BigEndian.AppendUint64(nil, sysInit),
			binary.BigEndian.AppendUint64(nil, 1699999990000), binary.BigEndian.AppendUint64(nil, 1699999995000), be32(1699999999))
		flows, errs := flowFields(t, d, s, ipfixDatagram(tpl, ipfixSet(303, rec)))
		noErrors(t, errs)
		checkFlows(t, flows, []map[string]string{{"TimeFlowStart": "1699999990", "TimeFlowEnd": "1699999995"}})
	})
	t.Run("dual-stack template", func(t *testing.T) {
		// IPv4 and IPv6 addresses, masks and ICMP type/code: one family is zero.
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		tpl := ipfixSet(ipfixTemplateSetID, be16(302, 9, 8, 4, 12, 4, 27, 16, 28, 16, 9, 1, 29, 1, 4, 1, 32, 2, 139, 2))
		v4 := cat([]byte{192, 0, 2, 1, 198, 51, 100, 2}, make([]byte, 32), []byte{24, 0, 1}, be16(0x0800, 0))
		v6 := cat(make([]byte, 8), inner6[:32], []byte{0, 64, 58}, be16(0, 0x8000))
		flows, errs := flowFields(t, d, s, ipfixDatagram(tpl, ipfixSet(302, cat(v4, v6))))
		noErrors(t, errs)
		checkFlows(t, flows, []map[string]string{
			{"SrcAddr": "192.0.2.1", "SrcNetMask": "24", "EType": "2048", "ICMPv4Type": "8", "ICMPv4Code": ""},
			{"SrcAddr": "2001:db8::1", "SrcNetMask": "64", "EType": "34525", "ICMPv6Type": "128", "ICMPv6Code": ""},
		})
	})
}

// union returns the keys of a and b (b wins).
func union(a, b map[string]string) map[string]string {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// TestNoSamplingInformation (issue #25, 6): a flow for which nothing gives a sampling rate
// (record, options data, NetFlow v5 header) gets the exporter's configured default, else 1,
// in every protocol: every volume is Bytes × SamplingRate, and 0 would erase it. The
// override always wins.
func TestNoSamplingInformation(t *testing.T) {
	s := allColumns(t)
	addrs := []byte{10, 0, 0, 1, 10, 0, 0, 2}
	dgs := [][]byte{
		v5Datagram(1000, 0, v5Record(3, 300, 500, 900)),
		v9Datagram(nfSet(v9TemplateSetID, be16(256, 3, 8, 4, 12, 4, 1, 4)), nfSet(256, addrs, be32(300))),
		ipfixDatagram(ipfixSet(ipfixTemplateSetID, be16(300, 3, 8, 4, 12, 4, 1, 4)), ipfixSet(300, cat(addrs, be32(300)))),
	}
	for _, tc := range []struct {
		name  string
		rules string
		rate  string
	}{
		{"unsampled", "", "1"},
		{"default", "sampling-rates: [{exporter: 192.0.2.0/24, default: 64}]", "64"},
		{"override", "sampling-rates: [{exporter: 192.0.2.0/24, override: 512}]", "512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfiguration()
			if err := config.Decode([]byte(tc.rules), &cfg); err != nil {
				t.Fatal(err)
			}
			d, _ := newTestDecoder(t, cfg, s)
			flows, errs := flowFields(t, d, s, dgs...)
			noErrors(t, errs)
			r := map[string]string{"SamplingRate": tc.rate, "Bytes": "300"}
			checkFlows(t, flows, []map[string]string{r, r, r})
		})
	}
}
