package netflow

import (
	"net/netip"
	"strings"
	"testing"

	"flowzero/internal/config"
)

// TestConfigurationKeys: every configuration error names its key, the sampling-rate
// prefixes and the decapsulation of data-link frames included.
func TestConfigurationKeys(t *testing.T) {
	for _, tc := range []struct {
		doc, want string
	}{
		// 10.0.0.1/24 has host bits: the operator meant 10.0.0.0/24 or 10.0.0.1/32.
		{"sampling-rates: [{exporter: 10.0.0.1/24, default: 10}]", `sampling-rates[0].exporter: 10.0.0.1/24 has host bits set (10.0.0.0/24 or 10.0.0.1/32?)`},
		{"sampling-rates: [{exporter: 10.0.0.0/8, default: 10}, {exporter: '2001:db8::1/64', override: 10}]", `sampling-rates[1].exporter: 2001:db8::1/64 has host bits set`},
		{"packet:\n  decapsulation: geneve", `line 2: packet.decapsulation: unknown decapsulation "geneve" (want none, gre, ipip, vxlan or srv6)`},
	} {
		cfg := DefaultConfiguration()
		err := config.Decode([]byte(tc.doc), &cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.doc, err, tc.want)
		}
	}
	// Without host bits, the prefix is accepted.
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte("sampling-rates: [{exporter: 10.0.0.0/24, default: 10}, {exporter: 10.0.0.1/32, override: 5}]"), &cfg); err != nil {
		t.Error(err)
	}
}

// TestSamplingRateRuleYAML: a sampling-rates item reports a prefix that does not parse, and an
// unknown key, with its line and its full key.
func TestSamplingRateRuleYAML(t *testing.T) {
	for _, tc := range []struct {
		doc, want string
	}{
		{"sampling-rates:\n  - exporter: 10.0.0.0/33\n    default: 10", `line 2: sampling-rates[0].exporter: "10.0.0.0/33" is not a prefix (address/length): prefix length out of range`},
		{"sampling-rates:\n  - exporter: 10.0.0.1\n    default: 10", `line 2: sampling-rates[0].exporter: "10.0.0.1" is not a prefix (address/length): no '/'`},
		{"sampling-rates:\n  - exporter: 10.0.0.0/8\n    defualt: 10", `line 3: sampling-rates[0]: unknown key "defualt"`},
		{"sampling-rates:\n  - exporter: 10.0.0.0/8\n    default: many", `line 3: sampling-rates[0].default: cannot unmarshal !!str`},
		{"sampling-rates: [10.0.0.0/8]", `line 1: sampling-rates[0]: a sampling-rates item is a mapping`},
	} {
		cfg := DefaultConfiguration()
		err := config.Decode([]byte(tc.doc), &cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.doc, err, tc.want)
		}
	}
	cfg := DefaultConfiguration()
	if err := config.Decode([]byte("sampling-rates:\n  - exporter: 192.0.2.0/24\n    default: 100\n    override: 200"), &cfg); err != nil {
		t.Fatal(err)
	}
	if want := (SamplingRateRule{netip.MustParsePrefix("192.0.2.0/24"), 100, 200}); len(cfg.SamplingRates) != 1 || cfg.SamplingRates[0] != want {
		t.Errorf("decoded %+v, want %+v", cfg.SamplingRates, want)
	}
}
