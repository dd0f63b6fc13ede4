package storetest

import (
	"hash/fnv"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// CaptureMessages decodes every NetFlow/IPFIX and sFlow capture of the shared test data with
// the collector's decoders (templates before data, one exporter address per capture group) and
// returns the flows as encoded messages (length-delimited), received at CaptureTime.
func CaptureMessages(t testing.TB, s *schema.Schema) [][]byte {
	t.Helper()
	recv := time.Unix(int64(CaptureTime), 0)
	var msgs [][]byte
	emitTo := func(fm *schema.FlowMessage) { msgs = append(msgs, slices.Clone(fm.Finalize())) }
	fm := s.NewFlowMessage()

	nfDir := filepath.Dir(testdata.Path(t, "netflow", "data.pcap"))
	files, _ := filepath.Glob(filepath.Join(nfDir, "*.pcap"))
	group := func(f string) string {
		b := strings.TrimSuffix(filepath.Base(f), ".pcap")
		for _, suffix := range []string{"-options-template", "-options-data", "-templates", "-template", "-data"} {
			b = strings.TrimSuffix(b, suffix)
		}
		return b
	}
	rank := func(f string) int {
		switch b := filepath.Base(f); {
		case strings.Contains(b, "template"):
			return 0
		case strings.Contains(b, "options"):
			return 1
		}
		return 2
	}
	slices.SortStableFunc(files, func(a, b string) int {
		if c := strings.Compare(group(a), group(b)); c != 0 {
			return c
		}
		return rank(a) - rank(b)
	})
	nf, err := netflow.New(prometheus.NewRegistry(), netflow.DefaultConfiguration(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		dgs, err := pcapfile.ReadUDP(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		h := fnv.New32a()
		h.Write([]byte(group(f)))
		exporter := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 99, byte(h.Sum32() >> 8), byte(h.Sum32())}), 2055)
		for _, dg := range dgs {
			_ = nf.Decode(netflow.Packet{Payload: dg.Payload, Exporter: exporter, TimeReceived: recv}, fm, emitTo)
		}
	}
	nfFlows := len(msgs)
	sfFiles, _ := filepath.Glob(filepath.Join(filepath.Dir(testdata.Path(t, "sflow", "data-1140.pcap")), "*.pcap"))
	sf, err := sflow.New(prometheus.NewRegistry(), sflow.DefaultConfiguration(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sfFiles {
		dgs, err := pcapfile.ReadUDP(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, dg := range dgs {
			_ = sf.Decode(sflow.Packet{Payload: dg.Payload, Exporter: netip.MustParseAddrPort("10.98.0.1:6343"), TimeReceived: recv}, fm, emitTo)
		}
	}
	t.Logf("decoded %d NetFlow/IPFIX flows from %d files, %d sFlow flows from %d files", nfFlows, len(files), len(msgs)-nfFlows, len(sfFiles))
	if nfFlows == 0 || len(msgs) == nfFlows {
		t.Fatal("the captures gave no NetFlow or no sFlow flows")
	}
	return msgs
}
