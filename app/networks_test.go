package app

import (
	"net/netip"
	"strings"
	"testing"

	"flowzero/enrich/networks"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// TestEnrichmentNetworks replays the NetFlow v5 capture with network attributes configured
// for its addresses: every flow gets the attributes of its addresses' networks, the longest
// prefix winning per attribute, and the networks' AS where the exporter sent none.
func TestEnrichmentNetworks(t *testing.T) {
	cfg := testConfig(t)
	cfg.Enrich.Networks = map[string]networks.Attributes{
		"0.0.0.0/0":      {Name: "internet", Role: "remote"},
		"202.152.0.0/16": {Name: "customer-a", Role: "customers", Site: "jkt1", Tenant: "a", Country: "ID"},
		"202.160.0.0/16": {Name: "customer-b", Role: "customers", ASN: 64512},
		"61.6.0.0/16":    {Name: "customer-c", Role: "customers", Site: "kul1", Tenant: "c", City: "Kuala Lumpur"},
		"61.6.236.0/24":  {Name: "customer-c-dc", Tenant: "c-dc"},
		"119.160.0.0/16": {Name: "customer-d"},
	}
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	replayGroups(t, a, [][]string{{testdata.Path(t, "netflow", "nfv5.pcap")}}, 29)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	type attrs struct{ name, role, site, tenant, city string }
	expect := func(a netip.Addr) attrs {
		a = a.Unmap()
		in := func(p string) bool { return netip.MustParsePrefix(p).Contains(a) }
		switch {
		case in("61.6.236.0/24"):
			return attrs{"customer-c-dc", "customers", "kul1", "c-dc", "Kuala Lumpur"}
		case in("61.6.0.0/16"):
			return attrs{"customer-c", "customers", "kul1", "c", "Kuala Lumpur"}
		case in("202.152.0.0/16"):
			return attrs{"customer-a", "customers", "jkt1", "a", ""}
		case in("202.160.0.0/16"):
			return attrs{"customer-b", "customers", "", "", ""}
		case in("119.160.0.0/16"):
			return attrs{"customer-d", "remote", "", "", ""}
		}
		return attrs{"internet", "remote", "", "", ""}
	}
	flows, customers, filledAS := 0, 0, 0
	for _, msg := range archivedMessages(t, cfg) {
		got := map[string]any{}
		a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v })
		for _, dir := range []string{"Src", "Dst"} {
			addr := got[dir+"Addr"].(netip.Addr)
			str := func(col string) string { s, _ := got[dir+col].(string); return s }
			gotAttrs := attrs{str("NetName"), str("NetRole"), str("NetSite"), str("NetTenant"), str("GeoCity")}
			if want := expect(addr); gotAttrs != want {
				t.Errorf("%s %s: %+v, want %+v", dir, addr, gotAttrs, want)
			}
			if strings.HasPrefix(gotAttrs.name, "customer") {
				customers++
			}
			// The network's AS fills only what the exporter left at 0.
			if as, _ := got[dir+"AS"].(uint64); gotAttrs.name == "customer-b" && as == 0 {
				t.Errorf("%s %s: AS 0, want the network's 64512", dir, addr)
			} else if as == 64512 {
				filledAS++
			}
		}
		flows++
	}
	if flows != 29 || customers == 0 || filledAS == 0 {
		t.Fatalf("%d flows, %d addresses in customer networks, %d AS filled: the test proves nothing", flows, customers, filledAS)
	}
}

// TestNetworksVRFNeedsColumns checks that entries per VRF are refused while the VRF columns
// are off, naming the key.
func TestNetworksVRFNeedsColumns(t *testing.T) {
	cfg := testConfig(t)
	cfg.Enrich.Networks = map[string]networks.Attributes{"10.0.0.0/8@5": {Name: "cust"}}
	_, err := New(cfg, testDeps())
	if err == nil || !strings.Contains(err.Error(), "enrich.networks.10.0.0.0/8@5: needs the IngressVRFID and EgressVRFID columns") {
		t.Fatalf("New() = %v", err)
	}
	cfg.Schema.Enabled = []string{"IngressVRFID", "EgressVRFID"}
	if _, err := New(cfg, testDeps()); err != nil {
		t.Fatal(err)
	}
}

// TestEnrichmentNetworksVRF replays the NetFlow v9 capture whose flows carry VRF IDs (all
// ingress VRF 1610612738; egress 1610612738, but 1610612736 for one flow) with entries per
// VRF: each source address gets its ingress VRF's entry, each destination its egress VRF's,
// entries without VRF filling the attributes the VRF's entry leaves empty.
func TestEnrichmentNetworksVRF(t *testing.T) {
	cfg := testConfig(t)
	cfg.Schema.Enabled = []string{"IngressVRFID", "EgressVRFID"}
	cfg.Enrich.Networks = map[string]networks.Attributes{
		"0.0.0.0/0":                 {Name: "global", Role: "internet"},
		"37.165.0.0/16":             {Name: "mobile-global", Site: "par1"},
		"0.0.0.0/0@1610612738":      {Name: "vrf-a", Tenant: "a"},
		"0.0.0.0/0@1610612736":      {Name: "vrf-b", Tenant: "b"},
		"37.165.0.0/16@99":          {Name: "other-vrf"},
		"173.194.0.0/16@1610612738": {Role: "cdn"},
	}
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	nf := func(n string) string { return testdata.Path(t, "netflow", n+".pcap") }
	replayGroups(t, a, [][]string{{nf("options-template"), nf("options-data"), nf("template"), nf("data")}}, 4)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	type attrs struct{ name, role, site, tenant string }
	want := map[string]attrs{
		// Sources, all in ingress VRF 1610612738.
		"Src 198.38.121.178":  {"vrf-a", "internet", "", "a"},
		"Src 198.38.121.219":  {"vrf-a", "internet", "", "a"},
		"Src 173.194.190.106": {"vrf-a", "cdn", "", "a"},
		"Src 74.125.100.234":  {"vrf-a", "internet", "", "a"},
		// Destinations, in their egress VRF.
		"Dst 91.170.143.87":  {"vrf-a", "internet", "", "a"},
		"Dst 88.122.57.97":   {"vrf-a", "internet", "", "a"},
		"Dst 37.165.129.20":  {"vrf-b", "internet", "par1", "b"},
		"Dst 88.120.219.117": {"vrf-a", "internet", "", "a"},
	}
	seen := 0
	for _, msg := range archivedMessages(t, cfg) {
		got := map[string]any{}
		a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v })
		for _, dir := range []string{"Src", "Dst"} {
			str := func(col string) string { s, _ := got[dir+col].(string); return s }
			key := dir + " " + got[dir+"Addr"].(netip.Addr).Unmap().String()
			w, ok := want[key]
			if !ok {
				t.Errorf("unexpected address %s", key)
				continue
			}
			seen++
			if g := (attrs{str("NetName"), str("NetRole"), str("NetSite"), str("NetTenant")}); g != w {
				t.Errorf("%s (VRFs %v, %v): %+v, want %+v", key, got["IngressVRFID"], got["EgressVRFID"], g, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d addresses checked, want %d", seen, len(want))
	}
}
