package netflow

import (
	"strings"
	"testing"

	"flowzero/decoder/packet"
)

type captureCase struct {
	name  string
	files []string
	flows [][]string
}

// TestCaptures decodes every capture of ../shared/testdata/netflow and compares every field
// of every flow (read back through the schema's protobuf decoder) with the expectations of
// captures_data_test.go. Flow counts follow the testdata README.
func TestCaptures(t *testing.T) {
	for _, tc := range captureCases {
		t.Run(tc.name, func(t *testing.T) {
			s := allColumns(t)
			d, _ := newTestDecoder(t, DefaultConfiguration(), s)
			got := decodeFiles(t, d, s, tc.files...)
			for i, file := range tc.files {
				if len(got[i]) != len(tc.flows[i]) {
					t.Errorf("%s: %d flows, want %d", file, len(got[i]), len(tc.flows[i]))
				}
				for j := range min(len(got[i]), len(tc.flows[i])) {
					if got[i][j] != tc.flows[i][j] {
						t.Errorf("%s flow %d:\n got  %s\n want %s", file, j, got[i][j], tc.flows[i][j])
					}
				}
			}
		})
	}
}

// TestFlowCounts checks the README's flow counts, independently of the field values.
func TestFlowCounts(t *testing.T) {
	want := map[string]int{
		"netflow-v9": 4, "data+templates": 21 + 21, "samplingrate": 6, "multiplesamplingrates": 12,
		"icmp": 2 + 2, "nat": 9, "nfv5": 29, "datalink": 1, "ethernet-over-mpls-with-control-word": 10,
		"ipfix-srv6": 1, "ipfixprobe": 6, "juniper-cpid": 1, "mpls": 2, "physicalinterfaces": 8,
	}
	for _, tc := range captureCases {
		n := 0
		for _, f := range tc.flows {
			n += len(f)
		}
		if n != want[tc.name] {
			t.Errorf("%s: %d flows, want %d", tc.name, n, want[tc.name])
		}
	}
}

// TestSRv6Decap decodes the SRv6 capture with SRv6 decapsulation: the flow is the inner
// IPv4 ICMP packet (8.8.8.8 to 213.36.140.100, TTL 63, ID 0xc96b, 64 bytes).
func TestSRv6Decap(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.Packet.Decapsulation = packet.DecapSRv6
	d, _ := newTestDecoder(t, cfg, s)
	got := decodeFiles(t, d, s, "ipfix-srv6-template.pcap", "ipfix-srv6-data.pcap")
	if len(got[0]) != 0 || len(got[1]) != 1 {
		t.Fatalf("got %d and %d flows, want 0 and 1", len(got[0]), len(got[1]))
	}
	for _, want := range []string{
		"SrcAddr=8.8.8.8", "DstAddr=213.36.140.100", "Bytes=64", "Packets=1", "Proto=1",
		"EType=2048", "IPTTL=63", "IPFragmentID=51563", "FlowDirection=1",
	} {
		if !strings.Contains(" "+got[1][0]+" ", " "+want+" ") {
			t.Errorf("flow %q lacks %s", got[1][0], want)
		}
	}
	// Other captures carry no SRv6: their flows are dropped and counted.
	got = decodeFiles(t, d, s, "datalink-template.pcap", "datalink-data.pcap")
	if len(got[1]) != 0 {
		t.Errorf("datalink with SRv6 decapsulation: %d flows, want 0", len(got[1]))
	}
}
