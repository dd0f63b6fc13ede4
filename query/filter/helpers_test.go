package filter

import (
	"testing"

	"flowzero/query/catalog"
	"flowzero/schema"
	"flowzero/store"
)

// testCatalog is the catalog of a schema with every column enabled, naming a few protocols.
func testCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	var names []string
	for _, k := range schema.Keys() {
		names = append(names, k.String())
	}
	return catalogOf(t, schema.Configuration{Enabled: names})
}

func catalogOf(t testing.TB, sc schema.Configuration) *catalog.Catalog {
	t.Helper()
	s, err := schema.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := store.DefaultConfiguration()
	cat, err := catalog.FromStore(s, cfg, store.NewDDL(cfg, s, ""))
	if err != nil {
		t.Fatal(err)
	}
	return cat.WithProtocols([]catalog.Protocol{{Number: 1, Name: "ICMP"}, {Number: 6, Name: "TCP"}, {Number: 17, Name: "UDP"}, {Number: 58, Name: "IPv6-ICMP"}, {Number: 135, Name: "Mobility Header"}})
}

func schemaDefault() schema.Configuration { return schema.DefaultConfiguration() }

func schemaWith(names ...string) schema.Configuration { return schema.Configuration{Enabled: names} }
