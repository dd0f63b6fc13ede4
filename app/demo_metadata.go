package app

import (
	"fmt"

	"flowzero/enrich"
)

// DemoMetadata describes the built-in demo exporters (flowzero collect --demo) the way a user
// would describe real routers in enrich.exporters, so that the demo traffic has exporter and
// interface names, providers and boundaries: ports 1-4 are transit and peering links, 100-123
// customer ports (the demo's traffic generator uses these indexes).
func DemoMetadata() map[string]enrich.ExporterMetadata {
	uplinks := []struct{ provider, connectivity string }{
		{"cogent", "transit"}, {"lumen", "transit"}, {"franceix", "ix"}, {"netflix", "pni"},
	}
	ifaces := map[uint32]enrich.InterfaceMetadata{}
	for i, u := range uplinks {
		ifaces[uint32(i+1)] = enrich.InterfaceMetadata{
			Name:         fmt.Sprintf("et-0/0/%d", i),
			Description:  fmt.Sprintf("%s: %s", u.connectivity, u.provider),
			Speed:        100000,
			Provider:     u.provider,
			Connectivity: u.connectivity,
			Boundary:     "external",
		}
	}
	for i := uint32(100); i < 124; i++ {
		ifaces[i] = enrich.InterfaceMetadata{
			Name:         fmt.Sprintf("ge-1/0/%d", i-100),
			Description:  fmt.Sprintf("customer %d", i-99),
			Speed:        10000,
			Connectivity: "customer",
			Boundary:     "internal",
		}
	}
	edge := func(name string) enrich.ExporterMetadata {
		return enrich.ExporterMetadata{Name: name, Group: "demo", Role: "edge", Site: "par1", Region: "eu-west", Interfaces: ifaces}
	}
	return map[string]enrich.ExporterMetadata{
		"127.0.0.0/8": edge("edge1.par1"), // NetFlow v9 and IPFIX, sent over loopback
		"::1":         edge("edge1.par1"),
		"192.0.2.3":   edge("edge2.par1"), // the sFlow agent address
	}
}
