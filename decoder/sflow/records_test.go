package sflow

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/decoder/packet/flowtest"
	"flowzero/schema"
)

// TestSampledRecordsOnly removes the raw header record from data-sflow-ipv4-data, leaving the
// sampled Ethernet, extended switch and sampled IPv4 records: the flow comes from them alone.
// Layout: 28-byte datagram header, expanded sample header at 28 (length at 32), record count
// at 76, raw header record from 80 to 232.
func TestSampledRecordsOnly(t *testing.T) {
	orig := payload(t, "data-sflow-ipv4-data.pcap")
	data := append(append([]byte(nil), orig[:80]...), orig[232:]...)
	binary.BigEndian.PutUint32(data[32:], binary.BigEndian.Uint32(orig[32:])-152)
	binary.BigEndian.PutUint32(data[76:], 3)
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	flows, err := decodeAll(t, d, s, data)
	if err != nil || len(flows) != 1 {
		t.Fatalf("Decode() = %d flows, %v", len(flows), err)
	}
	want := flowtest.Flow{
		"TimeReceived": testTimeUnix, "SamplingRate": 256, "ExporterAddress": "49.49.49.49",
		"OutIf": 182, "DstVlan": 3001,
		"SrcMAC": 0x00fec8990547, "DstMAC": 0x01005e2aaa04,
		"EType": 0x0800, "SrcAddr": "50.50.50.50", "DstAddr": "51.51.51.51",
		"Proto": 17, "SrcPort": 46622, "DstPort": 58631,
		"Bytes": 1344, "Packets": 1,
	}
	if diff := flowtest.Diff(flows[0], want); diff != "" {
		t.Errorf("flow:\n%s", diff)
	}
}

// TestIPv6Agent rewrites the agent address of data-sflow-raw-ipv4 as IPv6.
func TestIPv6Agent(t *testing.T) {
	orig := payload(t, "data-sflow-raw-ipv4.pcap")
	agent := []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42}
	data := append([]byte{0, 0, 0, 5, 0, 0, 0, 2}, agent...)
	data = append(data, orig[12:]...)
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	flows, err := decodeAll(t, d, s, data)
	if err != nil || len(flows) != 2 {
		t.Fatalf("Decode() = %d flows, %v", len(flows), err)
	}
	for i, f := range flows {
		if got := f["ExporterAddress"]; got != flowtest.Normalize("2001:db8::42", got) {
			t.Errorf("flow %d: ExporterAddress %v", i, got)
		}
	}
}

// TestConcurrentDecode decodes from several workers at once (run with -race).
func TestConcurrentDecode(t *testing.T) {
	s := defaultSchema(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	names := []string{"data-1140.pcap", "data-qinq.pcap", "data-sflow-expanded-sample.pcap", "data-icmpv6.pcap"}
	var payloads [][]byte
	for _, n := range names {
		payloads = append(payloads, payload(t, n))
	}
	var wg sync.WaitGroup
	counts := make([]int, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fm := s.NewFlowMessage()
			for i := range 50 {
				err := d.Decode(Packet{Payload: payloads[(w+i)%len(payloads)], Exporter: testExporter, TimeReceived: testTime}, fm,
					func(fm *schema.FlowMessage) {
						if len(fm.Finalize()) == 0 {
							t.Error("empty flow")
						}
						counts[w]++
					})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, c := range counts {
		total += c
	}
	// Each worker decodes every payload 12 or 13 times; 8 flows per round of 4 payloads.
	if total != 4*50/4*8 {
		t.Errorf("%d flows, want %d", total, 4*50/4*8)
	}
}

// TestDiscardedPacket turns the first sample of data-1140 into a discarded_packet event
// (format 5, sflow.org/sflow_drops.txt): its fixed part has the same size as a compact flow
// sample's (sequence, source id type and index, drops, input, output, reason, record count).
func TestDiscardedPacket(t *testing.T) {
	orig := payload(t, "data-1140.pcap")
	data := append([]byte(nil), orig[:28+8+208]...)
	put := func(off int, v uint32) { binary.BigEndian.PutUint32(data[off:], v) }
	put(24, 1)      // one sample
	put(28, 5)      // discarded_packet
	put(36+4, 0)    // source id type
	put(36+8, 27)   // source id index
	put(36+12, 0)   // drops
	put(36+16, 27)  // input ifIndex
	put(36+20, 0)   // output unknown
	put(36+24, 258) // reason: ACL
	put(36+28, 2)   // records
	s := allColumns(t)
	d, reg := newTestDecoder(t, DefaultConfiguration(), s)
	flows, err := decodeAll(t, d, s, data)
	if err != nil || len(flows) != 1 {
		t.Fatalf("Decode() = %d flows, %v", len(flows), err)
	}
	want := with(sshFlow(), flowtest.Flow{"SamplingRate": 1, "OutIf": nil, "ForwardingStatus": 130})
	if diff := flowtest.Diff(flows[0], want); diff != "" {
		t.Errorf("flow:\n%s", diff)
	}
	if got := testutilCount(t, reg, "flowzero_sflow_samples_total", "discard"); got != 1 {
		t.Errorf("discard samples = %v, want 1", got)
	}
}

// xdr builds sFlow test datagrams.
type xdr []byte

func (x xdr) u32(vs ...uint32) xdr {
	for _, v := range vs {
		x = binary.BigEndian.AppendUint32(x, v)
	}
	return x
}

// record appends a flow record (or a sample) with its format and length.
func (x xdr) record(format uint32, body xdr) xdr {
	return append(x.u32(format, uint32(len(body))), body...)
}

// TestNATAndVNIRecords builds a flow sample with sampled IPv4, extended NAT, extended NAT
// port and extended VNI ingress records (none is in the captures).
func TestNATAndVNIRecords(t *testing.T) {
	var records xdr
	records = records.record(3, xdr{}.u32(60, 6, 0x0a000001, 0xc0000201, 40000, 443, 0x02, 0)) // sampled IPv4, SYN
	records = records.record(1007, xdr{}.u32(1, 0xcb007101, 1, 0xc0000201))                    // NAT: 203.0.113.1 -> 192.0.2.1
	records = records.record(1020, xdr{}.u32(61000, 443))                                      // NAT ports
	records = records.record(1030, xdr{}.u32(5001))                                            // VNI
	records = records.record(1010, xdr{}.u32(0))                                               // extended_mpls_tunnel: skipped
	sample := xdr{}.u32(1, 7, 512, 0, 0, 3, 4, 5)                                              // seq, source, rate 512, pool, drops, in 3, out 4, 5 records
	sample = append(sample, records...)
	data := xdr{}.u32(5, 1, 0xc0000263, 0, 1, 0, 1).record(1, sample) // agent 192.0.2.99, 1 sample

	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	flows, err := decodeAll(t, d, s, data)
	if err != nil || len(flows) != 1 {
		t.Fatalf("Decode() = %d flows, %v", len(flows), err)
	}
	want := flowtest.Flow{
		"TimeReceived": testTimeUnix, "SamplingRate": 512, "ExporterAddress": "192.0.2.99",
		"InIf": 3, "OutIf": 4,
		"EType": 0x0800, "SrcAddr": "10.0.0.1", "DstAddr": "192.0.2.1", "Proto": 6,
		"SrcPort": 40000, "DstPort": 443, "TCPFlags": 0x02,
		"SrcAddrNAT": "203.0.113.1", "DstAddrNAT": "192.0.2.1", "SrcPortNAT": 61000, "DstPortNAT": 443,
		"VXLANVNI": 5001,
		"Bytes":    60, "Packets": 1,
	}
	if diff := flowtest.Diff(flows[0], want); diff != "" {
		t.Errorf("flow:\n%s", diff)
	}
	if v := testutil.ToFloat64(d.metrics.skippedRecords.WithLabelValues("192.0.2.10", "192.0.2.99")); v != 1 {
		t.Errorf("skipped records = %v, want 1", v)
	}
}

// TestSampledIPv6AndIPv6NextHop builds an expanded flow sample with sampled IPv6, extended
// router and gateway records whose next hops are IPv6, and a path of two segments.
func TestSampledIPv6AndIPv6NextHop(t *testing.T) {
	v6 := func(last uint32) xdr { return xdr{}.u32(0x20010db8, 0, 0, last) }
	var rec6 xdr
	rec6 = rec6.u32(1280, 17)
	rec6 = append(append(rec6, v6(1)...), v6(2)...)
	rec6 = rec6.u32(5353, 53, 0, 0x2e)
	router := append(xdr{}.u32(2), v6(0xfe)...).u32(48, 64)
	gateway := append(xdr{}.u32(2), v6(0xff)...).u32(64500, 0, 0, 2, 2, 2, 64501, 64502, 1, 1, 64510, 0, 100)
	var records xdr
	records = records.record(4, rec6)
	records = records.record(1003, gateway) // BGP next hop ::ff: wins over the router's after it
	records = records.record(1002, router)
	// Expanded: seq, source type, source index, rate, pool, drops, input format/value,
	// output format/value (multiple, 3 interfaces), records.
	sample := append(xdr{}.u32(1, 0, 9, 100, 0, 0, 0, 0x3fffffff, 2, 3, 3), records...)
	data := xdr{}.u32(5, 1, 0xc0000263, 0, 1, 0, 1).record(3, sample)

	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	flows, err := decodeAll(t, d, s, data)
	if err != nil || len(flows) != 1 {
		t.Fatalf("Decode() = %d flows, %v", len(flows), err)
	}
	want := flowtest.Flow{
		"TimeReceived": testTimeUnix, "SamplingRate": 100, "ExporterAddress": "192.0.2.99",
		// Input 0x3fffffff: local; output format 2: several interfaces.
		"EType": 0x86dd, "SrcAddr": "2001:db8::1", "DstAddr": "2001:db8::2", "Proto": 17,
		"SrcPort": 5353, "DstPort": 53, "IPTos": 0x2e,
		"NextHop": "2001:db8::ff", "SrcNetMask": 48, "DstNetMask": 64,
		// Router AS 64500, no source AS; path: sequence 64501 64502, set {64510}.
		"SrcAS": 64500, "DstAS": 64510, "DstASPath": []int{64501, 64502, 64510},
		"Bytes": 1280, "Packets": 1,
	}
	if diff := flowtest.Diff(flows[0], want); diff != "" {
		t.Errorf("flow:\n%s", diff)
	}
}
