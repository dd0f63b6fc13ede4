package sflow

import (
	"testing"

	"flowzero/decoder/packet/flowtest"
)

// TestFirstValueWins (issue #25, 5): when several records of a sample give a column, the
// first one does, for every column alike (before, the addresses of a later sampled IPv4
// record replaced those of the first while its protocol and ports stayed); the BGP next hop
// of extended_gateway wins over the router's, wherever the records are, as in NetFlow.
func TestFirstValueWins(t *testing.T) {
	var records xdr
	records = records.record(3, xdr{}.u32(60, 6, 0x0a000001, 0xc0000201, 40000, 443, 0x02, 0)) // 10.0.0.1 -> 192.0.2.1, TCP
	records = records.record(3, xdr{}.u32(80, 17, 0x0a090909, 0x0a080808, 53, 53, 0, 0))       // 10.9.9.9 -> 10.8.8.8, UDP
	records = records.record(1002, xdr{}.u32(1, 0xc00002fe, 24, 16))                           // router: next hop 192.0.2.254, masks
	records = records.record(1003, xdr{}.u32(1, 0xc00002fd, 64500, 64496, 0, 0, 0, 100))       // gateway: next hop 192.0.2.253
	records = records.record(1002, xdr{}.u32(1, 0xc00002fc, 8, 8))                             // router again
	records = records.record(1001, xdr{}.u32(10, 0, 20, 0))                                    // switch: VLANs 10, 20
	records = records.record(1001, xdr{}.u32(11, 0, 21, 0))                                    // switch again
	sample := append(xdr{}.u32(1, 7, 512, 0, 0, 3, 4, 7), records...)
	data := xdr{}.u32(5, 1, 0xc0000263, 0, 1, 0, 1).record(1, sample)

	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	flows, err := decodeAll(t, d, s, data)
	if err != nil || len(flows) != 1 {
		t.Fatalf("Decode() = %d flows, %v", len(flows), err)
	}
	want := flowtest.Flow{
		"TimeReceived": testTimeUnix, "SamplingRate": 512, "ExporterAddress": "192.0.2.99", "InIf": 3, "OutIf": 4,
		"EType": 0x0800, "SrcAddr": "10.0.0.1", "DstAddr": "192.0.2.1", "Proto": 6, "SrcPort": 40000, "DstPort": 443, "TCPFlags": 2,
		"NextHop": "192.0.2.253", "SrcNetMask": 24, "DstNetMask": 16, "SrcAS": 64496, "DstAS": 64500,
		"SrcVlan": 10, "DstVlan": 20,
		"Bytes": 60, "Packets": 1,
	}
	if diff := flowtest.Diff(flows[0], want); diff != "" {
		t.Errorf("flow:\n%s", diff)
	}
}

// TestNoSamplingRate (issue #25, 6): a flow sample with a sampling rate of 0 says nothing
// about sampling: its flow gets 1, as NetFlow and IPFIX flows without sampling information
// do, since every volume is Bytes × SamplingRate.
func TestNoSamplingRate(t *testing.T) {
	records := xdr{}.record(3, xdr{}.u32(60, 6, 0x0a000001, 0xc0000201, 40000, 443, 0x02, 0))
	sample := append(xdr{}.u32(1, 7, 0, 0, 0, 3, 4, 1), records...) // rate 0
	data := xdr{}.u32(5, 1, 0xc0000263, 0, 1, 0, 1).record(1, sample)
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	flows, err := decodeAll(t, d, s, data)
	if err != nil || len(flows) != 1 {
		t.Fatalf("Decode() = %d flows, %v", len(flows), err)
	}
	if got := flows[0]["SamplingRate"]; got != flowtest.Normalize(1, got) {
		t.Errorf("SamplingRate %v, want 1", got)
	}
}
