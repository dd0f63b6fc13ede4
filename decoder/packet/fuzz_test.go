package packet

import (
	"path/filepath"
	"testing"

	"flowzero/decoder/packet/flowtest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// FuzzPacketParse parses arbitrary frames with every decapsulation mode and checks that the
// parser never panics and always leaves a well-formed message.
func FuzzPacketParse(f *testing.F) {
	// The decapsulation frames, and the Ethernet frames of the sFlow captures (which carry
	// the sampled headers inside).
	paths := testdata.Glob(f, filepath.Join("decap", "*.pcap"))
	paths = append(paths, testdata.Glob(f, filepath.Join("sflow", "*.pcap"))...)
	for _, path := range paths {
		frames, err := pcapfile.ReadFrames(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, fr := range frames {
			f.Add(fr.Data)
		}
	}
	// Nesting that must stay bounded.
	f.Add(nestedGRE(20))
	f.Add(nestedEoMPLS(8))
	s, err := flowtest.AllColumns()
	if err != nil {
		f.Fatal(err)
	}
	var parsers []*Parser
	for d := DecapNone; d <= DecapSRv6; d++ {
		cfg := DefaultConfiguration()
		cfg.Decapsulation = d
		p, err := New(cfg)
		if err != nil {
			f.Fatal(err)
		}
		parsers = append(parsers, p)
	}
	fm := s.NewFlowMessage()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range parsers {
			for _, parse := range []func([]byte, *schema.FlowMessage) (int, error){p.ParseEthernet, p.ParseIP} {
				fm.Reset()
				l3, err := parse(data, fm)
				if err != nil && l3 != 0 {
					t.Fatalf("error %v with length %d", err, l3)
				}
				if _, err := flowtest.Decode(s, fm.Finalize()); err != nil {
					t.Fatalf("malformed flow: %v", err)
				}
			}
		}
	})
}
