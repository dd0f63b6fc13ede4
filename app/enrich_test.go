package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"flowzero/enrich"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// TestEnrichmentFromMRT loads the real 2002 RIPE dump into the collector's RIB, replays the
// NetFlow v5 capture with AS numbers taken from routing only, and checks every flow's
// SrcAS/DstAS against the collector's own lookup API for its addresses.
func TestEnrichmentFromMRT(t *testing.T) {
	cfg := testConfig(t)
	cfg.Routing.MRT = []string{testdata.Path(t, "rib", "ripe-bgpdump-bview.20020722.2337.gz")}
	cfg.Enrich.ASNProviders = []enrich.ASNProvider{enrich.ASNRouting}
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	groups := [][]string{{testdata.Path(t, "netflow", "nfv5.pcap")}}
	replayGroups(t, a, groups, 29)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}

	type flow struct {
		src, dst     string
		srcAS, dstAS uint64
	}
	var flows []flow
	for _, msg := range archivedMessages(t, cfg) {
		var f flow
		a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) {
			switch c.Key {
			case schema.ColumnSrcAddr:
				f.src = v.(interface{ String() string }).String()
			case schema.ColumnDstAddr:
				f.dst = v.(interface{ String() string }).String()
			case schema.ColumnSrcAS:
				f.srcAS = v.(uint64)
			case schema.ColumnDstAS:
				f.dstAS = v.(uint64)
			}
		})
		flows = append(flows, f)
	}
	if len(flows) != 29 {
		t.Fatalf("%d flows, want 29", len(flows))
	}

	// A second collector on the same configuration answers the lookup API from the same
	// dump: its answers must be what the first one wrote into the flows.
	b, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	var addrs []string
	for _, f := range flows {
		addrs = append(addrs, f.src, f.dst)
	}
	body, _ := json.Marshal(map[string]any{"addresses": addrs})
	resp, err := http.Post("http://"+b.Collector().HTTPAddr()+"/api/v0/rib/lookup", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Results []struct {
			Found    bool   `json:"found"`
			OriginAS uint32 `json:"origin-as"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || len(res.Results) != len(addrs) {
		t.Fatalf("lookup API: %v, %d results", err, len(res.Results))
	}
	found := 0
	for i, f := range flows {
		src, dst := res.Results[2*i], res.Results[2*i+1]
		if uint64(src.OriginAS) != f.srcAS || uint64(dst.OriginAS) != f.dstAS {
			t.Errorf("flow %s → %s: AS %d → %d, RIB says %d → %d", f.src, f.dst, f.srcAS, f.dstAS, src.OriginAS, dst.OriginAS)
		}
		if src.Found {
			found++
		}
		if dst.Found {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no address of the capture is in the 2002 table: the test proves nothing")
	}
	t.Logf("%d of %d addresses routed in the 2002 table", found, len(addrs))
}

// TestEnrichmentMetadata replays the NetFlow v5 capture with static exporter and interface
// metadata configured: every flow gets its exporter's name and its interfaces' names and
// boundaries, looked up by the InIf and OutIf the flow carries.
func TestEnrichmentMetadata(t *testing.T) {
	cfg := testConfig(t)
	ifaces := map[uint32]enrich.InterfaceMetadata{}
	for i := range uint32(64) {
		ifaces[i] = enrich.InterfaceMetadata{Name: fmt.Sprintf("if%d", i), Speed: 1000 * (i + 1), Boundary: "external"}
	}
	cfg.Enrich.Exporters = map[string]enrich.ExporterMetadata{
		"127.0.0.0/8": {Name: "replay", Site: "lab", Interfaces: ifaces, Default: &enrich.InterfaceMetadata{Name: "other", Boundary: "internal"}},
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
	flows := 0
	for _, msg := range archivedMessages(t, cfg) {
		got := map[string]any{}
		a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v })
		if got["ExporterName"] != "replay" || got["ExporterSite"] != "lab" {
			t.Errorf("exporter columns: %v", got)
		}
		for _, dir := range []string{"In", "Out"} {
			index, _ := got[dir+"If"].(uint64)
			name, boundary := "other", uint64(schema.BoundaryInternal)
			if index < 64 {
				name, boundary = fmt.Sprintf("if%d", index), schema.BoundaryExternal
			}
			if got[dir+"IfName"] != name || got[dir+"IfBoundary"] != boundary {
				t.Errorf("%sIf %d: name %v, boundary %v; want %s, %d", dir, index, got[dir+"IfName"], got[dir+"IfBoundary"], name, boundary)
			}
		}
		flows++
	}
	if flows != 29 {
		t.Fatalf("%d flows, want 29", flows)
	}
}
