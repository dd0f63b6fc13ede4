package sflow

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/decoder/packet"
	"flowzero/decoder/packet/flowtest"
	"flowzero/schema"
)

// Expected values were read from the captures with tshark 4.x (tshark -r <file> -V, which
// dissects sFlow v5 and the sampled headers) and checked against the bytes; they agree with
// Akvorado's tests for the same captures. Flow counts match ../shared/testdata/README.md.

// testTimeUnix is testTime in seconds, the TimeReceived of every flow.
const testTimeUnix = 1795327200

// sshFlow is the IPv6 SSH packet sampled several times in data-1140 and its variants:
// Ethernet, IPv6 (traffic class 8, flow label 0x68094), TCP ACK, frame 1518 bytes.
func sshFlow() flowtest.Flow {
	return flowtest.Flow{
		"TimeReceived": testTimeUnix, "SamplingRate": 1024, "ExporterAddress": "172.16.0.3",
		"InIf": 27, "OutIf": 28, "SrcVlan": 100, "DstVlan": 100,
		"SrcMAC": 0x246e96907a50, "DstMAC": 0x246e96043c08,
		"EType": 0x86dd, "SrcAddr": "2a0c:8880:2:0:185:21:130:38", "DstAddr": "2a0c:8880:2:0:185:21:130:39",
		"IPTos": 8, "IPTTL": 64, "IPv6FlowLabel": 0x68094,
		"Proto": 6, "SrcPort": 46026, "DstPort": 22, "TCPFlags": 0x10,
		"Bytes": 1500, "Packets": 1,
	}
}

func with(f flowtest.Flow, changes flowtest.Flow) flowtest.Flow {
	for k, v := range changes {
		if v == nil {
			delete(f, k)
		} else {
			f[k] = v
		}
	}
	return f
}

func TestCaptures(t *testing.T) {
	cases := []struct {
		file  string
		decap packet.Decapsulation
		flows []flowtest.Flow
	}{
		{file: "data-1140.pcap", flows: []flowtest.Flow{
			sshFlow(),
			// Extended switch: input VLAN 0xffffffff (none), output 100; gateway with next
			// hop 0.0.0.0, router AS 39421, source AS 13335, empty path; router next hop
			// 45.90.161.46, masks 20 and 27.
			{
				"TimeReceived": testTimeUnix, "SamplingRate": 1024, "ExporterAddress": "172.16.0.3",
				"InIf": 49001, "OutIf": 25, "DstVlan": 100,
				"SrcMAC": 0xc4ca2bae3437, "DstMAC": 0xae18b04b268a,
				"EType": 0x0800, "SrcAddr": "104.26.8.24", "DstAddr": "45.90.161.46",
				"IPTTL": 59, "IPFragmentID": 0xa572,
				"Proto": 6, "SrcPort": 443, "DstPort": 56876, "TCPFlags": 0x18,
				"NextHop": "45.90.161.46", "SrcNetMask": 20, "DstNetMask": 27,
				"SrcAS": 13335, "DstAS": 39421,
				"Bytes": 421, "Packets": 1,
			},
			sshFlow(),
			// Gateway: router AS 39421, source AS 0, path 203698 6762 26615, 5 communities.
			{
				"TimeReceived": testTimeUnix, "SamplingRate": 1024, "ExporterAddress": "172.16.0.3",
				"InIf": 28, "OutIf": 49001, "SrcVlan": 100,
				"SrcMAC": 0x7e127c7bfaf0, "DstMAC": 0xc4ca2bae3437,
				"EType": 0x0800, "SrcAddr": "45.90.161.148", "DstAddr": "191.87.91.27",
				"IPTTL": 255, "IPFragmentID": 0xd431,
				"Proto": 6, "SrcPort": 55658, "DstPort": 5555, "TCPFlags": 0x02,
				"NextHop": "31.14.69.110", "SrcNetMask": 27, "DstNetMask": 17,
				"SrcAS": 39421, "DstAS": 26615, "DstASPath": []int{203698, 6762, 26615},
				"DstCommunities": []int{2583495656, 2583495657, 4259880000, 4259880001, 4259900001},
				"Bytes":          40, "Packets": 1,
			},
			sshFlow(),
		}},
		// Output interface 0x40000001: discarded, reason 1 (host unreachable).
		{file: "data-discard-interface.pcap", flows: []flowtest.Flow{
			with(sshFlow(), flowtest.Flow{"OutIf": nil, "ForwardingStatus": 131}),
		}},
		// Output interface 0x3fffffff: the agent itself.
		{file: "data-local-interface.pcap", flows: []flowtest.Flow{
			with(sshFlow(), flowtest.Flow{"OutIf": nil}),
		}},
		// Output interface 0x80000002: two interfaces.
		{file: "data-multiple-interfaces.pcap", flows: []flowtest.Flow{
			with(sshFlow(), flowtest.Flow{"OutIf": nil}),
		}},
		// Input and output 0x3fffffff (local), extended switch VLANs 0, Ethernet, IPv4,
		// ICMP echo request.
		{file: "data-icmpv4.pcap", flows: []flowtest.Flow{{
			"TimeReceived": testTimeUnix, "SamplingRate": 1, "ExporterAddress": "127.0.0.1",
			"SrcMAC": 0xe2efc68f8cd4, "DstMAC": 0xd25b45ee5ecf,
			"EType": 0x0800, "SrcAddr": "203.0.113.4", "DstAddr": "203.0.113.5",
			"IPTTL": 64, "IPFragmentID": 0x90c5, "Proto": 1, "ICMPv4Type": 8,
			"Bytes": 84, "Packets": 1,
		}}},
		// IPv6 neighbor solicitation.
		{file: "data-icmpv6.pcap", flows: []flowtest.Flow{{
			"TimeReceived": testTimeUnix, "SamplingRate": 1, "ExporterAddress": "127.0.0.1",
			"SrcMAC": 0xd25b45ee5ecf, "DstMAC": 0xe2efc68f8cd4,
			"EType": 0x86dd, "SrcAddr": "fe80::d05b:45ff:feee:5ecf", "DstAddr": "2001:db8::",
			"IPTTL": 255, "Proto": 58, "ICMPv6Type": 135,
			"Bytes": 72, "Packets": 1,
		}}},
		// Expanded sample, VLANs 1062 then 1493 (the inner one is kept), no switch record.
		{file: "data-qinq.pcap", flows: []flowtest.Flow{{
			"TimeReceived": testTimeUnix, "SamplingRate": 4096, "ExporterAddress": "172.17.128.58",
			"InIf": 369098852, "OutIf": 369098851, "SrcVlan": 1493, "DstVlan": 1493,
			"SrcMAC": 0x4caea3520ff6, "DstMAC": 0x000110621493,
			"EType": 0x0800, "SrcAddr": "49.49.49.2", "DstAddr": "49.49.49.109",
			"IPTTL": 62, "IPFragmentID": 56159, "Proto": 6, "SrcPort": 32017, "DstPort": 443, "TCPFlags": 0x10,
			"Bytes": 80, "Packets": 1,
		}}},
		// Expanded sample: header with VLAN 809, gateway (router AS 28976, source AS 203476,
		// path 8218 29605 203361, 4 communities), router (masks 32 and 22).
		{file: "data-sflow-expanded-sample.pcap", flows: []flowtest.Flow{{
			"TimeReceived": testTimeUnix, "SamplingRate": 1000, "ExporterAddress": "49.49.49.49",
			"InIf": 29001, "OutIf": 1285816721, "SrcVlan": 809, "DstVlan": 809,
			"SrcMAC": 0x948ed30a713b, "DstMAC": 0x22421f4a9fcd,
			"EType": 0x0800, "SrcAddr": "52.52.52.52", "DstAddr": "53.53.53.53",
			"IPTos": 8, "IPTTL": 61, "IPFragmentID": 0xab4e,
			"Proto": 6, "SrcPort": 22, "DstPort": 52237, "TCPFlags": 0x18,
			"NextHop": "54.54.54.54", "SrcNetMask": 32, "DstNetMask": 22,
			"SrcAS": 203476, "DstAS": 203361, "DstASPath": []int{8218, 29605, 203361},
			"DstCommunities": []int{538574949, 1911619684, 1911669584, 1911671290},
			"Bytes":          104, "Packets": 1,
		}}},
		// Expanded sample with raw header, sampled Ethernet, switch (output VLAN 3001) and
		// sampled IPv4 records; input interface 0.
		{file: "data-sflow-ipv4-data.pcap", flows: []flowtest.Flow{{
			"TimeReceived": testTimeUnix, "SamplingRate": 256, "ExporterAddress": "49.49.49.49",
			"OutIf": 182, "DstVlan": 3001,
			"SrcMAC": 0x00fec8990547, "DstMAC": 0x01005e2aaa04,
			"EType": 0x0800, "SrcAddr": "50.50.50.50", "DstAddr": "51.51.51.51",
			"IPTTL": 64, "IPFragmentID": 41647, "Proto": 17, "SrcPort": 46622, "DstPort": 58631,
			"Bytes": 1344, "Packets": 1,
		}}},
		// Two samples whose raw header is IPv4 (header protocol 11): ICMP echo replies.
		{file: "data-sflow-raw-ipv4.pcap", flows: []flowtest.Flow{
			{
				"TimeReceived": testTimeUnix, "SamplingRate": 1, "ExporterAddress": "172.19.64.116",
				"OutIf": 2, "EType": 0x0800, "SrcAddr": "69.58.92.107", "DstAddr": "92.222.186.1",
				"IPTos": 8, "IPTTL": 64, "IPFragmentID": 4329, "Proto": 1,
				"Bytes": 32, "Packets": 1,
			}, {
				"TimeReceived": testTimeUnix, "SamplingRate": 1, "ExporterAddress": "172.19.64.116",
				"OutIf": 2, "EType": 0x0800, "SrcAddr": "69.58.92.107", "DstAddr": "92.222.184.1",
				"IPTos": 8, "IPTTL": 64, "IPFragmentID": 62945, "Proto": 1,
				"Bytes": 32, "Packets": 1,
			},
		}},
		// Without decapsulation: the outer VXLAN packet (UDP to 4789).
		{file: "data-encap-vxlan.pcap", flows: []flowtest.Flow{{
			"TimeReceived": testTimeUnix, "SamplingRate": 1, "ExporterAddress": "127.0.0.1",
			"SrcMAC": 0x0017087d7742, "DstMAC": 0x30e4db3e337f,
			"EType": 0x0800, "SrcAddr": "192.168.108.40", "DstAddr": "192.168.15.14",
			"IPTTL": 64, "IPFragmentID": 0x8d6a, "Proto": 17, "SrcPort": 45833, "DstPort": 4789,
			"Bytes": 154, "Packets": 1,
		}}},
		// VXLAN decapsulation: VNI 100, inner Ethernet, IPv6 ICMP echo request.
		{file: "data-encap-vxlan.pcap", decap: packet.DecapVXLAN, flows: []flowtest.Flow{{
			"TimeReceived": testTimeUnix, "SamplingRate": 1, "ExporterAddress": "127.0.0.1",
			"TunnelSrcAddr": "192.168.108.40", "TunnelDstAddr": "192.168.15.14", "TunnelProto": 17,
			"VXLANVNI": 100,
			"SrcMAC":   0xca6e98f8498f, "DstMAC": 0x010203040506,
			"EType": 0x86dd, "SrcAddr": "2001:db8:4::1", "DstAddr": "2001:db8:4::3",
			"IPTTL": 64, "IPv6FlowLabel": 0xa461c, "Proto": 58, "ICMPv6Type": 128,
			"Bytes": 104, "Packets": 1,
		}}},
	}
	s := allColumns(t)
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.file, ".pcap")+"/"+tc.decap.String(), func(t *testing.T) {
			cfg := DefaultConfiguration()
			cfg.Packet.Decapsulation = tc.decap
			d, _ := newTestDecoder(t, cfg, s)
			flows, err := decodeAll(t, d, s, payload(t, tc.file))
			if err != nil {
				t.Fatalf("Decode() error: %v", err)
			}
			if len(flows) != len(tc.flows) {
				t.Fatalf("Decode() emitted %d flows, want %d", len(flows), len(tc.flows))
			}
			for i := range flows {
				if diff := flowtest.Diff(flows[i], tc.flows[i]); diff != "" {
					t.Errorf("flow %d:\n%s", i, diff)
				}
			}
		})
	}
}

// TestDecapsulationDropsPlainTraffic checks that with VXLAN decapsulation, samples of
// non-VXLAN traffic are dropped and counted, as Akvorado does.
func TestDecapsulationDropsPlainTraffic(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.Packet.Decapsulation = packet.DecapVXLAN
	d, reg := newTestDecoder(t, cfg, s)
	flows, err := decodeAll(t, d, s, payload(t, "data-1140.pcap"))
	if err != nil || len(flows) != 0 {
		t.Fatalf("Decode() = %d flows, %v; want none, no error", len(flows), err)
	}
	expected := `
# HELP flowzero_sflow_errors_total Decoding errors and dropped samples, by exporter, agent and reason.
# TYPE flowzero_sflow_errors_total counter
flowzero_sflow_errors_total{agent="172.16.0.3",exporter="192.0.2.10",reason="not-encapsulated"} 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "flowzero_sflow_errors_total"); err != nil {
		t.Error(err)
	}
}

func TestMetrics(t *testing.T) {
	s := allColumns(t)
	d, reg := newTestDecoder(t, DefaultConfiguration(), s)
	for range 2 {
		if _, err := decodeAll(t, d, s, payload(t, "data-1140.pcap")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := decodeAll(t, d, s, payload(t, "data-qinq.pcap")); err != nil {
		t.Fatal(err)
	}
	expected := `
# HELP flowzero_sflow_agents (exporter, agent) pairs with their own metrics (bounded by max-agents).
# TYPE flowzero_sflow_agents gauge
flowzero_sflow_agents 2
# HELP flowzero_sflow_flows_total Flows decoded and emitted, by exporter and agent.
# TYPE flowzero_sflow_flows_total counter
flowzero_sflow_flows_total{agent="172.16.0.3",exporter="192.0.2.10"} 10
flowzero_sflow_flows_total{agent="172.17.128.58",exporter="192.0.2.10"} 1
# HELP flowzero_sflow_packets_total sFlow datagrams received, by exporter (UDP source) and agent.
# TYPE flowzero_sflow_packets_total counter
flowzero_sflow_packets_total{agent="172.16.0.3",exporter="192.0.2.10"} 2
flowzero_sflow_packets_total{agent="172.17.128.58",exporter="192.0.2.10"} 1
# HELP flowzero_sflow_samples_total Samples received, by exporter, agent and type (counter samples are only counted).
# TYPE flowzero_sflow_samples_total counter
flowzero_sflow_samples_total{agent="172.16.0.3",exporter="192.0.2.10",type="flow"} 10
flowzero_sflow_samples_total{agent="172.17.128.58",exporter="192.0.2.10",type="expanded-flow"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"flowzero_sflow_agents", "flowzero_sflow_flows_total", "flowzero_sflow_packets_total", "flowzero_sflow_samples_total"); err != nil {
		t.Error(err)
	}
}

// TestDefaultSchema checks the flow of the default configuration: no L2, L3/L4 extra or
// community columns, the AS path kept.
func TestDefaultSchema(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	flows, err := decodeAll(t, d, s, payload(t, "data-1140.pcap"))
	if err != nil || len(flows) != 5 {
		t.Fatalf("Decode() = %d flows, %v", len(flows), err)
	}
	want := flowtest.Flow{
		"TimeReceived": testTimeUnix, "SamplingRate": 1024, "ExporterAddress": "172.16.0.3",
		"InIf": 28, "OutIf": 49001,
		"EType": 0x0800, "SrcAddr": "45.90.161.148", "DstAddr": "191.87.91.27",
		"Proto": 6, "SrcPort": 55658, "DstPort": 5555,
		"SrcNetMask": 27, "DstNetMask": 17,
		"SrcAS": 39421, "DstAS": 26615, "DstASPath": []int{203698, 6762, 26615},
		"Bytes": 40, "Packets": 1,
	}
	if diff := flowtest.Diff(flows[3], want); diff != "" {
		t.Errorf("flow 3:\n%s", diff)
	}
}
