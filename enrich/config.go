package enrich

import (
	"fmt"
	"strings"

	"flowzero/internal/config"
)

// ASNProvider is one source of AS numbers, tried in the configured order: the first that
// gives a non-zero AS wins.
type ASNProvider uint8

// AS number providers (Akvorado's names; "bmp" is accepted for "routing").
const (
	// ASNFlow is the AS number the exporter put in the flow.
	ASNFlow ASNProvider = iota + 1
	// ASNFlowExceptPrivate is ASNFlow unless it is private or reserved (RFC 6996, RFC 7300,
	// AS_TRANS, documentation ASNs).
	ASNFlowExceptPrivate
	// ASNFlowExceptDefaultRoute is ASNFlow unless the exporter matched a default route
	// (its netmask is 0): the AS is then its upstream's, not the destination's.
	ASNFlowExceptDefaultRoute
	// ASNRouting is the origin AS of the RIB's route.
	ASNRouting
	// ASNRoutingExceptPrivate is ASNRouting unless it is private or reserved.
	ASNRoutingExceptPrivate
	// ASNRoutingExceptDefaultRoute is ASNRouting unless the RIB matched a default route.
	ASNRoutingExceptDefaultRoute
	// ASNGeoIP is the AS number of the network attributes (networks, then network sources,
	// then GeoIP): it must come last, as the network attributes step runs after the others.
	ASNGeoIP
)

var asnProviderNames = map[string]ASNProvider{
	"flow":                         ASNFlow,
	"flow-except-private":          ASNFlowExceptPrivate,
	"flow-except-default-route":    ASNFlowExceptDefaultRoute,
	"routing":                      ASNRouting,
	"bmp":                          ASNRouting,
	"routing-except-private":       ASNRoutingExceptPrivate,
	"bmp-except-private":           ASNRoutingExceptPrivate,
	"routing-except-default-route": ASNRoutingExceptDefaultRoute,
	"geoip":                        ASNGeoIP,
}

// String returns the configuration name.
func (p ASNProvider) String() string {
	for name, v := range asnProviderNames {
		if v == p && !strings.HasPrefix(name, "bmp") {
			return name
		}
	}
	return fmt.Sprintf("asn-provider(%d)", uint8(p))
}

// UnmarshalText reads a provider name.
func (p *ASNProvider) UnmarshalText(b []byte) error {
	v, ok := asnProviderNames[strings.ToLower(string(b))]
	if !ok {
		return fmt.Errorf("unknown AS number provider %q (flow, flow-except-private, flow-except-default-route, routing, routing-except-private, routing-except-default-route, geoip)", b)
	}
	*p = v
	return nil
}

// MarshalText writes the provider name.
func (p ASNProvider) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// NetProvider is one source of network masks and next hops, tried in the configured order:
// the first that gives a value wins.
type NetProvider uint8

// Network providers.
const (
	// NetFlow is what the exporter put in the flow.
	NetFlow NetProvider = iota + 1
	// NetRouting is the RIB's route.
	NetRouting
	// NetRoutingExceptDefaultRoute is the RIB's route unless it is a default route.
	NetRoutingExceptDefaultRoute
)

var netProviderNames = map[string]NetProvider{
	"flow":                         NetFlow,
	"routing":                      NetRouting,
	"bmp":                          NetRouting,
	"routing-except-default-route": NetRoutingExceptDefaultRoute,
}

// String returns the configuration name.
func (p NetProvider) String() string {
	for name, v := range netProviderNames {
		if v == p && name != "bmp" {
			return name
		}
	}
	return fmt.Sprintf("net-provider(%d)", uint8(p))
}

// UnmarshalText reads a provider name.
func (p *NetProvider) UnmarshalText(b []byte) error {
	v, ok := netProviderNames[strings.ToLower(string(b))]
	if !ok {
		return fmt.Errorf("unknown network provider %q (flow, routing, routing-except-default-route)", b)
	}
	*p = v
	return nil
}

// MarshalText writes the provider name.
func (p NetProvider) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Configuration says how routing data and exporter metadata fill a flow.
type Configuration struct {
	// ASNProviders are the sources of SrcAS and DstAS, first non-zero wins. geoip, the AS
	// number of enrich.networks, enrich.network-sources or enrich.geoip, can only be last.
	ASNProviders []ASNProvider `yaml:"asn-providers"`
	// NetProviders are the sources of SrcNetMask, DstNetMask and NextHop, first set wins.
	NetProviders []NetProvider `yaml:"net-providers"`
	// RoutingAttributes fills DstASPath and the communities from the RIB's route; they are
	// never taken from a default route, whose attributes describe an upstream, not the
	// destination.
	RoutingAttributes bool `yaml:"routing-attributes"`
	// Exporters gives static metadata by exporter address or prefix (the longest prefix
	// wins): the exporter's name and classification, and its interfaces by SNMP index.
	// Flows of exporters not listed keep these columns empty.
	Exporters map[string]ExporterMetadata `yaml:"exporters"`
	// Dynamic completes Exporters with SNMP and classifier rules (metadata_cache_config.go).
	Dynamic DynamicMetadataConfiguration `yaml:",inline"`
	// NetworkAttributes are enrich.networks, enrich.network-sources and enrich.geoip
	// (networks_config.go).
	NetworkAttributes `yaml:",inline"`
}

// DefaultConfiguration is Akvorado's default precedence: the exporter's data, then the RIB.
func DefaultConfiguration() Configuration {
	return Configuration{
		ASNProviders:      []ASNProvider{ASNFlow, ASNRouting, ASNGeoIP},
		NetProviders:      []NetProvider{NetFlow, NetRouting},
		RoutingAttributes: true,
		Dynamic:           DefaultDynamicMetadataConfiguration(),
		NetworkAttributes: DefaultNetworkAttributes(),
	}
}

// Validate checks the configuration and names the bad key.
func (c *Configuration) Validate() error {
	seen := map[ASNProvider]bool{}
	for i, p := range c.ASNProviders {
		if p < ASNFlow || p > ASNGeoIP {
			return config.Errorf(fmt.Sprintf("asn-providers[%d]", i), "unknown provider %d", p)
		}
		if seen[p] {
			return config.Errorf(fmt.Sprintf("asn-providers[%d]", i), "%s listed twice", p)
		}
		if p == ASNGeoIP && i != len(c.ASNProviders)-1 {
			return config.Errorf(fmt.Sprintf("asn-providers[%d]", i), "geoip must be the last provider (the network attributes step runs after the others)")
		}
		seen[p] = true
	}
	seenNet := map[NetProvider]bool{}
	for i, p := range c.NetProviders {
		if p < NetFlow || p > NetRoutingExceptDefaultRoute {
			return config.Errorf(fmt.Sprintf("net-providers[%d]", i), "unknown provider %d", p)
		}
		if seenNet[p] {
			return config.Errorf(fmt.Sprintf("net-providers[%d]", i), "%s listed twice", p)
		}
		seenNet[p] = true
	}
	if err := validateMetadata(c.Exporters); err != nil {
		return err
	}
	if err := c.Dynamic.Validate(); err != nil {
		return err
	}
	return c.NetworkAttributes.Validate()
}
