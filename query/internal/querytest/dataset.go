// Package querytest holds what the query layer's tests share: a data set of generated flows
// whose sums are known, and (with the chdb build tag) an embedded engine holding it, filled
// through the store's insert path.
package querytest

import (
	"net/netip"
	"time"

	"flowzero/schema"
)

// Flow is one generated flow, with every value the tests query.
type Flow struct {
	Time                    time.Time
	SamplingRate            uint64
	Exporter                netip.Addr
	ExporterName            string
	SrcAddr, DstAddr        netip.Addr
	SrcAS, DstAS            uint32
	SrcNetMask, DstNetMask  uint8
	InIf, OutIf             uint32
	InIfName, OutIfName     string
	InIfSpeed, OutIfSpeed   uint64 // Mbps
	InBoundary, OutBoundary uint64 // 1 external, 2 internal
	Proto, EType            uint64
	SrcPort, DstPort        uint64
	Bytes, Packets          uint64
	DstASPath               []uint32
	SrcCommunities          []uint32
	SrcLargeCommunities     []schema.LargeCommunity
	SrcMAC                  uint64
	SrcCountry              string
}

// Schema is the configuration of the test schema: the default columns, with MAC addresses
// and communities.
func Schema() schema.Configuration {
	return schema.Configuration{Enabled: []string{"SrcMAC", "DstMAC", "SrcCommunities", "DstCommunities",
		"SrcLargeCommunities", "DstLargeCommunities"}}
}

// Windows of the data set, relative to its anchor (a whole hour in the past).
const (
	// Recent is the window ending at the anchor: [anchor − Recent, anchor).
	Recent = 6 * time.Hour
	// Yesterday is the same window one day earlier, with twice the bytes and packets.
	Yesterday = 24 * time.Hour
)

// Dataset returns the flows of the data set for anchor (a whole hour, in the past): six
// flows a minute over [anchor − 6 h, anchor), and the same a day before with twice the
// bytes and packets. In each minute m:
//   - AS64500 → AS64510 over TCP, 1000+m bytes and 10 packets sampled 1/100, from edge1's
//     et-0/0/1 (external, 10 Gbps) to et-0/0/2 (internal, 1 Gbps);
//   - AS64501 → AS64510 over TCP, 500 bytes, 5 packets, 1/100, same interfaces;
//   - AS64502 → AS64511 over UDP, 200 bytes, 2 packets, 1/1000, from edge2;
//   - AS64510 → AS64500 over TCP, 300 bytes, 3 packets, 1/100, the reverse of the first;
//   - AS64503 → AS64511 over UDP on IPv6, 100 bytes, 1 packet, unsampled, from edge2;
//   - every tenth minute (m % 10 = 9), AS64504 → AS64510, 6000 bytes, 6 packets, 1/100: a
//     burst that ranks first by max, last and 95th percentile, third by average (after
//     AS64502 and AS64500).
func Dataset(anchor time.Time) []Flow {
	var out []Flow
	for day, factor := range []uint64{2, 1} {
		base := anchor.Add(-Recent).Add(-time.Duration(1-day) * Yesterday)
		for m := range int(Recent / time.Minute) {
			at := func(sec int) time.Time {
				return base.Add(time.Duration(m)*time.Minute + time.Duration(sec)*time.Second)
			}
			edge1 := Flow{Exporter: netip.MustParseAddr("192.0.2.1"), ExporterName: "edge1", InIf: 10, OutIf: 20,
				InIfName: "et-0/0/1", OutIfName: "et-0/0/2", InIfSpeed: 10000, OutIfSpeed: 1000, InBoundary: 1, OutBoundary: 2,
				EType: 0x800, SrcNetMask: 24, DstNetMask: 24, SrcCountry: "FR"}
			edge2 := Flow{Exporter: netip.MustParseAddr("192.0.2.2"), ExporterName: "edge2", InIf: 30, OutIf: 40,
				InIfName: "xe-1/0/0", OutIfName: "xe-1/0/1", InIfSpeed: 1000, OutIfSpeed: 1000, InBoundary: 1, OutBoundary: 2,
				EType: 0x800, SrcNetMask: 24, DstNetMask: 24, SrcCountry: "DE"}
			f := edge1
			f.Time, f.SamplingRate = at(5), 100
			f.SrcAddr, f.DstAddr = netip.AddrFrom4([4]byte{198, 51, 100, byte(m%4 + 1)}), netip.MustParseAddr("203.0.113.10")
			f.SrcAS, f.DstAS, f.Proto, f.SrcPort, f.DstPort = 64500, 64510, 6, 443, uint64(50000+m%100)
			f.Bytes, f.Packets = (1000+uint64(m))*factor, 10*factor
			f.DstASPath = []uint32{64510, 174}
			f.SrcCommunities = []uint32{65000<<16 | 100}
			f.SrcLargeCommunities = []schema.LargeCommunity{{ASN: 65000, LocalData1: 1, LocalData2: 2}}
			f.SrcMAC = 0x0011223344aa
			out = append(out, f)

			f = edge1
			f.Time, f.SamplingRate = at(18), 100
			f.SrcAddr, f.DstAddr = netip.MustParseAddr("198.51.100.20"), netip.MustParseAddr("203.0.113.11")
			f.SrcAS, f.DstAS, f.Proto, f.SrcPort, f.DstPort = 64501, 64510, 6, 80, 40000
			f.Bytes, f.Packets = 500*factor, 5*factor
			f.DstASPath = []uint32{64510}
			out = append(out, f)

			f = edge2
			f.Time, f.SamplingRate = at(31), 1000
			f.SrcAddr, f.DstAddr = netip.MustParseAddr("198.51.100.30"), netip.MustParseAddr("203.0.113.12")
			f.SrcAS, f.DstAS, f.Proto, f.SrcPort, f.DstPort = 64502, 64511, 17, 53, 33000
			f.Bytes, f.Packets = 200*factor, 2*factor
			f.DstASPath = []uint32{64511, 3356}
			out = append(out, f)

			f = edge1
			f.Time, f.SamplingRate = at(44), 100
			f.InIf, f.OutIf, f.InIfName, f.OutIfName = 20, 10, "et-0/0/2", "et-0/0/1"
			f.InIfSpeed, f.OutIfSpeed, f.InBoundary, f.OutBoundary = 1000, 10000, 2, 1
			f.SrcAddr, f.DstAddr = netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("198.51.100.1")
			f.SrcAS, f.DstAS, f.Proto, f.SrcPort, f.DstPort = 64510, 64500, 6, 50000, 443
			f.Bytes, f.Packets = 300*factor, 3*factor
			f.SrcCountry = "US"
			out = append(out, f)

			f = edge2
			f.Time, f.SamplingRate = at(57), 1
			f.EType = 0x86dd
			f.SrcAddr, f.DstAddr = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 15: byte(m%3 + 1)}), netip.MustParseAddr("2001:db8:2::1")
			f.SrcNetMask, f.DstNetMask = 48, 48
			f.SrcAS, f.DstAS, f.Proto, f.SrcPort, f.DstPort = 64503, 64511, 17, 4500, 4500
			f.Bytes, f.Packets = 100*factor, 1*factor
			out = append(out, f)

			if m%10 == 9 {
				f = edge1
				f.Time, f.SamplingRate = at(59), 100
				f.SrcAddr, f.DstAddr = netip.MustParseAddr("198.51.100.99"), netip.MustParseAddr("203.0.113.99")
				f.SrcAS, f.DstAS, f.Proto, f.SrcPort, f.DstPort = 64504, 64510, 6, 8080, 8080
				f.Bytes, f.Packets = 6000*factor, 6*factor
				out = append(out, f)
			}
		}
	}
	return out
}

// Encode fills fm with f and returns the framed message.
func (f Flow) Encode(fm *schema.FlowMessage) []byte {
	fm.Reset()
	fm.TimeReceived = uint64(f.Time.Unix())
	fm.SamplingRate = f.SamplingRate
	fm.ExporterAddress = f.Exporter
	fm.SrcAddr, fm.DstAddr = f.SrcAddr, f.DstAddr
	fm.SrcAS, fm.DstAS = f.SrcAS, f.DstAS
	fm.SrcNetMask, fm.DstNetMask = f.SrcNetMask, f.DstNetMask
	fm.InIf, fm.OutIf = f.InIf, f.OutIf
	fm.DstASPath = f.DstASPath
	fm.SrcCommunities = f.SrcCommunities
	fm.SrcLargeCommunities = f.SrcLargeCommunities
	fm.AppendUint(schema.ColumnBytes, f.Bytes)
	fm.AppendUint(schema.ColumnPackets, f.Packets)
	fm.AppendUint(schema.ColumnEType, f.EType)
	fm.AppendUint(schema.ColumnProto, f.Proto)
	fm.AppendUint(schema.ColumnSrcPort, f.SrcPort)
	fm.AppendUint(schema.ColumnDstPort, f.DstPort)
	fm.AppendUint(schema.ColumnInIfSpeed, f.InIfSpeed)
	fm.AppendUint(schema.ColumnOutIfSpeed, f.OutIfSpeed)
	fm.AppendUint(schema.ColumnInIfBoundary, f.InBoundary)
	fm.AppendUint(schema.ColumnOutIfBoundary, f.OutBoundary)
	fm.AppendUint(schema.ColumnSrcMAC, f.SrcMAC)
	fm.AppendString(schema.ColumnExporterName, f.ExporterName)
	fm.AppendString(schema.ColumnInIfName, f.InIfName)
	fm.AppendString(schema.ColumnOutIfName, f.OutIfName)
	fm.AppendString(schema.ColumnSrcCountry, f.SrcCountry)
	return fm.Finalize()
}
