package app

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
)

// captureGroups lists the exporter captures of ../shared/testdata as the decoder tests use
// them: each group is decoded in order by a fresh exporter session (see its README).
func captureGroups(t testing.TB) [][]string {
	nf := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, testdata.Path(t, "netflow", n+".pcap"))
		}
		return out
	}
	groups := [][]string{
		nf("options-template", "options-data", "template", "data"),
		nf("data+templates", "data+templates"),
		nf("samplingrate-template", "samplingrate-data"),
		nf("multiplesamplingrates-options-template", "multiplesamplingrates-options-data", "multiplesamplingrates-template", "multiplesamplingrates-data"),
		nf("icmp-template", "icmp-data"),
		nf("nat"),
		nf("nfv5"),
		nf("datalink-template", "datalink-data"),
		nf("ethernet-over-mpls-with-control-word-template", "ethernet-over-mpls-with-control-word-data"),
		nf("ipfix-srv6-template", "ipfix-srv6-data"),
		nf("ipfixprobe-templates", "ipfixprobe-data"),
		nf("juniper-cpid-template", "juniper-cpid-data"),
		nf("mpls"),
		nf("physicalinterfaces"),
	}
	for _, p := range testdata.Glob(t, filepath.Join("sflow", "*.pcap")) {
		groups = append(groups, []string{p})
	}
	return groups
}

// normalize drops what legitimately differs between decoding a capture offline and receiving
// it over UDP (the receive time and the exporter's address), so two runs compare exactly.
func normalize(t testing.TB, lines []byte) []string {
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("bad JSON line %q: %v", l, err)
		}
		delete(m, "TimeReceived")
		delete(m, "ExporterAddress")
		b, _ := json.Marshal(m) // sorted keys
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

// expectedFlows decodes every group offline, as `flowzero decode` does.
func expectedFlows(t testing.TB, cfg Configuration, groups [][]string) ([]string, int) {
	var buf bytes.Buffer
	total := 0
	for _, g := range groups {
		sum, err := replay.Decode(replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}, g,
			replay.DecodeOptions{Clock: testutil.Clock()}, &buf)
		if err != nil {
			t.Fatalf("decode %v: %v", g, err)
		}
		if len(sum.Errors) > 0 {
			t.Logf("decode %v: errors %v", shortNames(g), sum.Errors)
		}
		total += sum.Flows
	}
	return normalize(t, buf.Bytes()), total
}

func shortNames(paths []string) string {
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return strings.Join(names, ",")
}

func diffFlows(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) == len(want) {
		same := true
		for i := range got {
			if got[i] != want[i] {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	n := 0
	for k, v := range count {
		if v != 0 && n < 10 {
			t.Errorf("flow %s: %+d (positive: missing, negative: extra or duplicated)", k, v)
			n++
		}
	}
	t.Fatalf("got %d flows, want %d", len(got), len(want))
}
