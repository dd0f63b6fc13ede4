package storetest

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"flowzero/schema"
)

// MustSchema returns the schema of cfg.
func MustSchema(t testing.TB, cfg schema.Configuration) *schema.Schema {
	t.Helper()
	s, err := schema.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// AllColumnsSchema enables every column.
func AllColumnsSchema(t testing.TB) *schema.Schema {
	t.Helper()
	var all []string
	for k := schema.ColumnKey(1); k < schema.ColumnLast; k++ {
		all = append(all, k.String())
	}
	return MustSchema(t, schema.Configuration{Enabled: all})
}

// Unframe returns the message of a length-delimited one.
func Unframe(t testing.TB, framed []byte) []byte {
	t.Helper()
	n, w := binary.Uvarint(framed)
	if w <= 0 || uint64(len(framed)-w) != n {
		t.Fatalf("not one length-delimited message: % x", framed)
	}
	return framed[w:]
}

// QuietLogger discards what it is given.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Flow is one flow with the values the tests read back.
type Flow struct {
	Time             uint64
	Sampling         uint64
	Exporter         string
	Src, Dst         string
	SrcPort, DstPort uint64
	Proto, EType     uint64
	SrcAS, DstAS     uint32
	SrcMask, DstMask uint8
	InIf, OutIf      uint32
	Bytes, Packets   uint64
	ASPath           []uint32
	Direction        uint64
	ExporterName     string
	SrcCountry       string
	SrcVlan, DstVlan uint16
}

// Flows are four flows from BaseTime over 400 s: the first two share the minute and every
// aggregated dimension but Proto, the last is IPv6. Their Bytes sum to 74800, their
// Packets to 60.
var Flows = []Flow{
	{BaseTime + 5, 1000, "192.0.2.1", "198.51.100.7", "203.0.113.9", 443, 51000, 6, 0x800, 64500, 64501, 24, 16, 10, 20, 1500, 1, []uint32{64501, 3356}, 1, "edge1", "FR", 0, 0},
	{BaseTime + 35, 1000, "192.0.2.1", "198.51.100.8", "203.0.113.9", 53, 40000, 17, 0x800, 64500, 64501, 24, 16, 10, 20, 300, 3, []uint32{64501}, 1, "edge1", "FR", 0, 0},
	{BaseTime + 70, 1000, "192.0.2.1", "198.51.100.7", "203.0.113.10", 443, 51001, 6, 0x800, 64500, 64502, 24, 24, 10, 21, 64000, 50, []uint32{64502, 174, 2914}, 2, "edge1", "DE", 0, 0},
	{BaseTime + 400, 512, "2001:db8::1", "2001:db8:1::5", "2001:db8:2::6", 22, 60022, 6, 0x86dd, 0, 64510, 48, 32, 3, 4, 9000, 6, nil, 1, "edge2", "US", 0, 0},
}

// Encode returns f encoded by fm (reset first), length-delimited; the slice is fm's.
func (f Flow) Encode(fm *schema.FlowMessage) []byte {
	fm.Reset()
	fm.TimeReceived = f.Time
	fm.SamplingRate = f.Sampling
	fm.ExporterAddress = netip.MustParseAddr(f.Exporter)
	fm.SrcAddr = netip.MustParseAddr(f.Src)
	fm.DstAddr = netip.MustParseAddr(f.Dst)
	fm.SrcAS, fm.DstAS = f.SrcAS, f.DstAS
	fm.SrcNetMask, fm.DstNetMask = f.SrcMask, f.DstMask
	fm.InIf, fm.OutIf = f.InIf, f.OutIf
	fm.DstASPath = f.ASPath
	fm.SrcVlan, fm.DstVlan = f.SrcVlan, f.DstVlan
	fm.AppendUint(schema.ColumnBytes, f.Bytes)
	fm.AppendUint(schema.ColumnPackets, f.Packets)
	fm.AppendUint(schema.ColumnSrcPort, f.SrcPort)
	fm.AppendUint(schema.ColumnDstPort, f.DstPort)
	fm.AppendUint(schema.ColumnProto, f.Proto)
	fm.AppendUint(schema.ColumnEType, f.EType)
	fm.AppendUint(schema.ColumnFlowDirection, f.Direction)
	fm.AppendString(schema.ColumnExporterName, f.ExporterName)
	fm.AppendString(schema.ColumnSrcCountry, f.SrcCountry)
	return fm.Finalize()
}
