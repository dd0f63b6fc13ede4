package enrich

import "flowzero/enrich/networks"

// NetworkAttributes configures the network attributes step (enrich/networks): static
// networks, network sources and GeoIP databases. It runs after the routing step, and fills
// SrcAS and DstAS when asn-providers ends with geoip and nothing before gave a number.
type NetworkAttributes = networks.Configuration

// DefaultNetworkAttributes has no network, source or database: the step is off.
func DefaultNetworkAttributes() NetworkAttributes { return networks.DefaultConfiguration() }

// GeoIPASN tells whether the network attributes step fills AS numbers (asn-providers ends
// with geoip).
func (c *Configuration) GeoIPASN() bool {
	n := len(c.ASNProviders)
	return n > 0 && c.ASNProviders[n-1] == ASNGeoIP
}
