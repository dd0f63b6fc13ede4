package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"flowzero/enrich"
	"flowzero/internal/testdata"
	"flowzero/output/file"
	"flowzero/schema"
)

// TestEnrichmentFromMRT loads the real 2002 RIPE dump into the collector's RIB, replays the
// NetFlow v5 capture with AS numbers taken from routing only, and checks every flow's
// SrcAS/DstAS against the collector's own lookup API for its addresses.
func TestEnrichmentFromMRT(t *testing.T) {
	cfg := testConfig(t)
	cfg.Routing.MRT = []string{testdata.Path(t, "rib", "ripe-bgpdump-bview.20020722.2337.gz")}
	cfg.Enrich.ASNProviders = []enrich.ASNProvider{enrich.ASNRouting}
	a, err := New(cfg, quietLogger())
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
	files, _ := file.ListArchives(cfg.Outputs.File.Directory, cfg.Outputs.File.Prefix)
	for _, p := range files {
		r, err := file.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
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
		r.Close()
	}
	if len(flows) != 29 {
		t.Fatalf("%d flows, want 29", len(flows))
	}

	// A second collector on the same configuration answers the lookup API from the same
	// dump: its answers must be what the first one wrote into the flows.
	b, err := New(cfg, quietLogger())
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
