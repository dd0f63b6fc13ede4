package sflow

import (
	"encoding/binary"
	"sync"
	"testing"

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
