package app

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	"flowzero/enrich"
	"flowzero/enrich/networks"
)

// demoRemote is what the demo's GeoIP database says of one of the remote networks the demo
// traffic goes to (demo/traffic.go): the layout is GeoLite2-City's with GeoLite2-ASN's fields.
type demoRemote struct {
	prefix, country, state, city string
	asn                          uint32
	org                          string
}

var demoRemotes = []demoRemote{
	{"142.250.0.0/15", "US", "California", "Mountain View", 15169, "Google LLC"},
	{"198.38.96.0/19", "US", "California", "Los Gatos", 2906, "Netflix Streaming Services Inc."},
	{"104.16.0.0/13", "US", "California", "San Francisco", 13335, "Cloudflare, Inc."},
	{"157.240.0.0/16", "IE", "Leinster", "Dublin", 32934, "Meta Platforms, Inc."},
	{"52.84.0.0/15", "DE", "Hesse", "Frankfurt am Main", 16509, "Amazon.com, Inc."},
	{"23.32.0.0/11", "NL", "North Holland", "Amsterdam", 20940, "Akamai International B.V."},
	{"13.104.0.0/14", "US", "Washington", "Redmond", 8075, "Microsoft Corporation"},
	{"17.0.0.0/8", "US", "California", "Cupertino", 714, "Apple Inc."},
	{"4.0.0.0/9", "US", "Louisiana", "Monroe", 3356, "Level 3 Parent, LLC"},
	{"2a00:1450::/29", "BE", "Wallonia", "Saint-Ghislain", 15169, "Google LLC"},
	{"2a00:86c0::/32", "GB", "England", "London", 2906, "Netflix Streaming Services Inc."},
}

// demoGeoIP is the demo's GeoIP database, built from demoRemotes by TestDemoGeoIP
// (UPDATE=1 writes it again) with github.com/maxmind/mmdbwriter.
//
//go:embed demo-geoip.mmdb
var demoGeoIP []byte

// DemoNetworkAttributes describes the demo's networks as a user would: its customer
// networks under enrich.networks (the demo's clients are in 10.1.0.0/16 to 10.3.0.0/16 and
// 2001:db8::/32) and a GeoIP database for the remote networks, written into dir.
func DemoNetworkAttributes(dir string) (enrich.NetworkAttributes, error) {
	na := enrich.DefaultNetworkAttributes()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return na, err
	}
	path := filepath.Join(dir, "demo-geoip.mmdb")
	if err := os.WriteFile(path, demoGeoIP, 0o644); err != nil {
		return na, err
	}
	na.GeoIP.Databases = []string{path}
	local := networks.Attributes{Role: "customers", Site: "par1", Region: "eu-west", Country: "FR", State: "Île-de-France", City: "Paris"}
	na.Networks = map[string]networks.Attributes{}
	for i, tenant := range []string{"residential", "business", "hosting"} {
		a := local
		a.Name, a.Tenant = fmt.Sprintf("customers-%c", 'a'+i), tenant
		na.Networks[fmt.Sprintf("10.%d.0.0/16", i+1)] = a
	}
	v6 := local
	v6.Name, v6.Tenant = "customers-v6", "residential"
	na.Networks["2001:db8::/32"] = v6
	return na, nil
}
