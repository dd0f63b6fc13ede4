package app

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"flowzero/enrich/snmp"
	"flowzero/enrich/snmp/snmptest"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

// TestEnrichmentSNMP replays the NetFlow v5 capture through an app polling Debian's snmpd for
// the exporter's interfaces and sysName, with classifier rules: the first run's flows all go
// on without waiting for the agent, its answers are saved to the cache file when the app
// stops, and a second app, with the agent silent, names and classifies every flow from that
// file.
func TestEnrichmentSNMP(t *testing.T) {
	// The capture's interfaces: 85 and 86 to an IX, 124 and 126 transit, 115-118 customers.
	indexes := []uint32{85, 86, 115, 116, 117, 118, 124, 126}
	names, aliases, speeds := map[uint32]string{}, map[uint32]string{}, map[uint32]uint32{}
	for _, index := range indexes {
		names[index] = fmt.Sprintf("xe-0/0/%d", index)
		switch {
		case index < 100:
			aliases[index], speeds[index] = fmt.Sprintf("IX: FranceIX %d", index), 10000
		case index > 120:
			aliases[index], speeds[index] = fmt.Sprintf("Transit: Cogent %d", index), 100000
		default:
			aliases[index], speeds[index] = fmt.Sprintf("customer %d", index), 1000
		}
	}
	agent := snmptest.Start(t, snmptest.Options{Community: "flowzero-ro", SysName: "edge1.lab2.example.net",
		Names: names, Aliases: aliases, Speeds: speeds})
	cacheFile := filepath.Join(t.TempDir(), "snmp-cache.json")
	capture := [][]string{{testdata.Path(t, "netflow", "nfv5.pcap")}}
	const flows = 29

	run := func(check func(a *App)) []map[string]any {
		t.Helper()
		cfg := testConfig(t)
		d := &cfg.Enrich.Dynamic
		d.SNMP.Enabled = true
		d.SNMP.Credentials = map[string]snmp.Credentials{"::/0": {Communities: snmp.Strings{"flowzero-ro"}}}
		d.SNMP.Ports = map[string]uint16{"127.0.0.1": uint16(agent.Addr.Port)}
		d.SNMP.CachePersistFile = cacheFile
		d.ExporterClassifiers = []string{`ClassifySiteRegex(Exporter.Name, "^[^.]+\\.([a-z]+)", "$1")`}
		d.InterfaceClassifiers = []string{
			`ClassifyConnectivityRegex(Interface.Description, "^(?i)(transit|pni|ix):? ", "$1") && ClassifyProviderRegex(Interface.Description, "^[^ ]+? ([^ ]+)", "$1") && ClassifyExternal()`,
			`ClassifyInternal()`,
		}
		a, err := New(cfg, testDeps())
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		replayGroups(t, a, capture, flows)
		check(a)
		if err := a.Stop(); err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, msg := range archivedMessages(t, cfg) {
			got := map[string]any{}
			a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v })
			out = append(out, got)
		}
		if len(out) != flows {
			t.Fatalf("%d flows archived, want %d", len(out), flows)
		}
		return out
	}

	// First run: the flows do not wait for the agent (they are all archived, named or not);
	// the answers come meanwhile.
	exporter := netip.MustParseAddr("127.0.0.1")
	run(func(a *App) {
		testutil.WaitUntil(t, "the agent's answers for every interface of the capture", func() bool {
			for _, index := range indexes {
				if got, ok := a.metadata.SNMP().Lookup(exporter, index); !ok || !got.Found || got.ExporterName == "" {
					return false
				}
			}
			return true
		})
	})
	if _, err := os.Stat(cacheFile); err != nil {
		t.Fatalf("cache file not saved at stop: %v", err)
	}

	// Second run, the agent silent: every flow is named and classified from the cache file.
	agent.Pause(t)
	defer agent.Resume(t)
	for _, got := range run(func(*App) {}) {
		if got["ExporterName"] != "edge1.lab2.example.net" || got["ExporterSite"] != "lab" {
			t.Errorf("exporter columns: %v", got)
		}
		for _, dir := range []string{"In", "Out"} {
			index := uint32(got[dir+"If"].(uint64))
			want := map[string]any{
				"Name": names[index], "Description": aliases[index], "Speed": uint64(speeds[index]),
				"Boundary": uint64(schema.BoundaryInternal), "Provider": nil, "Connectivity": nil,
			}
			switch {
			case index < 100:
				want["Boundary"], want["Provider"], want["Connectivity"] = uint64(schema.BoundaryExternal), "franceix", "ix"
			case index > 120:
				want["Boundary"], want["Provider"], want["Connectivity"] = uint64(schema.BoundaryExternal), "cogent", "transit"
			}
			for k, v := range want {
				if got[dir+"If"+k] != v {
					t.Errorf("%sIf %d: %s %v, want %v", dir, index, k, got[dir+"If"+k], v)
				}
			}
		}
	}
}
