package catalog

import (
	"testing"
	"time"

	"flowzero/schema"
	"flowzero/store"
)

// everyColumn is a schema with every column enabled.
func everyColumn(t *testing.T) *schema.Schema {
	t.Helper()
	var names []string
	for _, k := range schema.Keys() {
		names = append(names, k.String())
	}
	s, err := schema.New(schema.Configuration{Enabled: names})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFromStore(t *testing.T) {
	s := everyColumn(t)
	cfg := store.DefaultConfiguration()
	cat, err := FromStore(s, cfg, store.NewDDL(cfg, s, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Columns()) != len(s.Columns()) {
		t.Fatalf("%d columns, want %d", len(cat.Columns()), len(s.Columns()))
	}
	for _, c := range []struct {
		name       string
		kind       Kind
		aggregated bool
		dimension  bool
		reverse    string
		max        uint64
	}{
		{"SrcAS", KindAS, true, true, "DstAS", 1<<32 - 1},
		{"Dst1stAS", KindAS, true, true, "", 1<<32 - 1},
		{"SrcAddr", KindAddress, false, true, "DstAddr", 0},
		{"ExporterAddress", KindAddress, true, true, "", 0},
		{"DstASPath", KindASPath, false, true, "", 0},
		{"SrcLargeCommunities", KindLargeCommunities, false, true, "DstLargeCommunities", 0},
		{"SrcPort", KindPort, false, true, "DstPort", 1<<16 - 1},
		{"Proto", KindProtocol, true, true, "", 1<<32 - 1},
		{"EType", KindEType, true, true, "", 1<<32 - 1},
		{"InIfBoundary", KindEnum, true, true, "OutIfBoundary", 0},
		{"InIfName", KindString, true, true, "OutIfName", 0},
		{"SrcCountry", KindString, true, true, "DstCountry", 0},
		{"SrcMAC", KindMAC, false, true, "DstMAC", 1<<64 - 1},
		{"SrcNetPrefix", KindPrefix, false, true, "DstNetPrefix", 0},
		{"IngressVRFID", KindNumber, true, true, "EgressVRFID", 1<<32 - 1},
		{"TimeReceived", KindTime, true, false, "", 0},
		{"Bytes", KindNumber, false, false, "", 1<<64 - 1},
		{"MPLSLabels", KindArray, false, true, "", 1<<32 - 1},
		{"SRv6SIDs", KindArray, false, true, "", 0},
		{"PacketSizeBucket", KindString, false, true, "", 0},
	} {
		col := cat.Column(c.name)
		if col == nil {
			t.Errorf("%s: missing", c.name)
			continue
		}
		if col.Kind != c.kind || col.Aggregated != c.aggregated || col.Dimension != c.dimension || col.Reverse != c.reverse || col.Max != c.max {
			t.Errorf("%s: %+v", c.name, col)
		}
	}
	if c := cat.Column("srccountry"); c == nil || c.FixedSize != 2 {
		t.Errorf("srccountry: %+v", c)
	}
	if c := cat.Column("FlowDirection"); c == nil || len(c.Enum) != 3 || c.Enum[1] != "ingress" {
		t.Errorf("FlowDirection: %+v", c)
	}
	var names []string
	for _, tb := range cat.Aggregated {
		names = append(names, tb.Name)
		if !tb.FlowCount {
			t.Errorf("%s does not count flows: the store's aggregated tables have a Flows column", tb.Name)
		}
	}
	if len(names) != 3 || names[0] != "flows_1m" || names[2] != "flows_1h" || cat.Aggregated[1].Resolution != 5*time.Minute {
		t.Errorf("aggregated tables %v", names)
	}
	if !cat.Flows.FlowCount || cat.Flows.TTL != cfg.TTL || cat.Database != "flowzero" {
		t.Errorf("flows table %+v", cat.Flows)
	}
	if cat.ReverseOf(cat.Column("InIf")).Name != "OutIf" {
		t.Error("reverse of InIf")
	}
	p := cat.WithProtocols([]Protocol{{Number: 6, Name: "TCP"}})
	if n, ok := p.Protocol("tcp"); !ok || n != 6 || p.ProtocolName(6) != "TCP" || len(cat.Protocols) != 0 {
		t.Error("protocols")
	}
}

func TestFromStoreDefault(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	cfg := store.DefaultConfiguration()
	cat, err := FromStore(s, cfg, store.NewDDL(cfg, s, ""))
	if err != nil {
		t.Fatal(err)
	}
	if cat.Column("SrcMAC") != nil {
		t.Error("SrcMAC is not enabled by default")
	}
	if c := cat.Column("SrcCommunities"); c != nil {
		t.Error("SrcCommunities is not enabled by default")
	}
}
