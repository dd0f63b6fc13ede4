package networks

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/gaissmai/bart"

	"flowzero/enrich/geoip"
	"flowzero/schema"
)

// Where a leaf's attributes came from (leaf.from), for the hit and miss counters.
const (
	fromNetworks uint8 = 1 << iota
	fromSources
	fromGeoIP
	fromAll = fromNetworks | fromSources | fromGeoIP
)

// leaf is what a flow's address resolves to: its attributes already merged from every
// source and encoded for each direction. It is held by value in the table, so that a lookup
// does not follow one more pointer; its fragments are interned.
type leaf struct {
	frag  [2]*schema.Fragment // source, destination columns; nil when no column is set
	asn   uint32
	from  uint8
	attrs *Attributes // as resolved, for Lookup
}

// table is one immutable generation of the merged data: flows read it without locks while
// the next one is built.
type table struct {
	global *bart.Fast[leaf]
	// vrfs holds, per VRF with entries of its own, the VRF's prefixes and the global
	// prefixes nested in them, resolved for that VRF; an address outside them falls back
	// to global. nil when no entry names a VRF.
	vrfs map[uint32]*bart.Fast[leaf]
	// flat answers global IPv4 lookups in place of the trie when the table is large; nil
	// otherwise.
	flat *flat4
	// flat6 answers global IPv6 lookups in place of the trie when the table is large; nil
	// otherwise.
	flat6 *flat6
	// sizes for the metrics
	prefixes, leaves int
}

// lookup returns the leaf of the longest prefix holding a in the flow's vrf (a unmapped).
func (t *table) lookup(a netip.Addr, vrf uint32) (leaf, bool) {
	if t.vrfs != nil && vrf != 0 {
		if vt := t.vrfs[vrf]; vt != nil {
			if l, ok := vt.Lookup(a); ok {
				return l, true
			}
		}
	}
	if t.flat != nil && a.Is4() {
		return t.flat.lookup(a)
	}
	if t.flat6 != nil && a.Is6() {
		return t.flat6.lookup(a)
	}
	return t.global.Lookup(a)
}

// layer is the entries of one precedence level (networks or network sources) for one VRF
// (0: every VRF), by prefix; entries for the same prefix are merged, the first winning per
// attribute.
type layer = bart.Table[*Attributes]

// builder merges the entries and the GeoIP layer into a table for a schema.
type builder struct {
	schema *schema.Schema
	asn    bool // keep AS numbers (the "geoip" provider is on)
	flat   bool // build a flat4 for large tables
	flat6  bool // build a flat6 for large tables
	// mask blanks the attributes whose columns are off in both directions
	mask   Attributes
	static map[uint32]*layer
	source map[uint32]*layer
	geo    *geoip.Layer

	leaves    map[leafKey]leaf
	fragments map[Attributes][2]*schema.Fragment
	// dropped counts the values left out of fragments, first says which
	dropped int
	first   error
}

type leafKey struct {
	a    Attributes
	from uint8
}

// maskAll keeps an attribute (any non-empty value, ASN non-zero).
const maskAll = "*"

func newBuilder(s *schema.Schema, asn bool) *builder {
	b := &builder{schema: s, asn: asn, static: map[uint32]*layer{}, source: map[uint32]*layer{},
		leaves: map[leafKey]leaf{}, fragments: map[Attributes][2]*schema.Fragment{}}
	keep := func(src, dst schema.ColumnKey) string {
		if s.Enabled(src) || s.Enabled(dst) {
			return maskAll
		}
		return ""
	}
	b.mask = Attributes{
		Name:    keep(schema.ColumnSrcNetName, schema.ColumnDstNetName),
		Role:    keep(schema.ColumnSrcNetRole, schema.ColumnDstNetRole),
		Site:    keep(schema.ColumnSrcNetSite, schema.ColumnDstNetSite),
		Region:  keep(schema.ColumnSrcNetRegion, schema.ColumnDstNetRegion),
		Tenant:  keep(schema.ColumnSrcNetTenant, schema.ColumnDstNetTenant),
		Country: keep(schema.ColumnSrcCountry, schema.ColumnDstCountry),
		State:   keep(schema.ColumnSrcGeoState, schema.ColumnDstGeoState),
		City:    keep(schema.ColumnSrcGeoCity, schema.ColumnDstGeoCity),
	}
	if asn && (s.Enabled(schema.ColumnSrcAS) || s.Enabled(schema.ColumnDstAS)) {
		b.mask.ASN = 1
	}
	return b
}

// add puts entries into the layers of one precedence level.
func add(layers map[uint32]*layer, entries []Entry) {
	for i := range entries {
		e := &entries[i]
		l := layers[e.VRF]
		if l == nil {
			l = new(layer)
			layers[e.VRF] = l
		}
		l.Modify(e.Prefix, func(old *Attributes, ok bool) (*Attributes, bool) {
			a := e.Attrs
			if ok {
				merged := *old
				merged.fill(&a)
				return &merged, false
			}
			return &a, false
		})
	}
}

// resolve gives the attributes of the addresses whose longest prefix is p, in vrf: each
// attribute from the networks of the VRF, then those of every VRF (longest prefix first in
// each), then the network sources likewise, then GeoIP.
func (b *builder) resolve(p netip.Prefix, vrf uint32) (Attributes, uint8) {
	var a Attributes
	var from uint8
	fillFrom := func(l *layer, bit uint8) {
		if l == nil {
			return
		}
		for _, v := range l.Supernets(p) {
			before := a
			a.fill(v)
			if a != before {
				from |= bit
			}
			if a.complete() {
				return
			}
		}
	}
	if vrf != 0 {
		fillFrom(b.static[vrf], fromNetworks)
	}
	fillFrom(b.static[0], fromNetworks)
	if vrf != 0 {
		fillFrom(b.source[vrf], fromSources)
	}
	fillFrom(b.source[0], fromSources)
	if g := b.geo.LookupPrefix(p); g != nil {
		before := a
		a.fill(&Attributes{Country: g.Country, State: g.State, City: g.City, ASN: g.ASN})
		if a != before {
			from |= fromGeoIP
		}
	}
	return a, from
}

// leafOf interns the leaf of resolved attributes.
func (b *builder) leafOf(a Attributes, from uint8) leaf {
	m := b.applyMask(a)
	k := leafKey{m, from}
	if l, ok := b.leaves[k]; ok {
		return l
	}
	noASN := m
	noASN.ASN = 0
	frags, ok := b.fragments[noASN]
	if !ok {
		frags = b.encode(&noASN)
		b.fragments[noASN] = frags
	}
	l := leaf{frag: frags, asn: m.ASN, from: from, attrs: &a}
	b.leaves[k] = l
	return l
}

func (b *builder) applyMask(a Attributes) Attributes {
	keep := func(s, mask string) string {
		if mask == "" {
			return ""
		}
		return s
	}
	a.Name, a.Role, a.Site = keep(a.Name, b.mask.Name), keep(a.Role, b.mask.Role), keep(a.Site, b.mask.Site)
	a.Region, a.Tenant = keep(a.Region, b.mask.Region), keep(a.Tenant, b.mask.Tenant)
	a.Country, a.State, a.City = keep(a.Country, b.mask.Country), keep(a.State, b.mask.State), keep(a.City, b.mask.City)
	if b.mask.ASN == 0 {
		a.ASN = 0
	}
	return a
}

// netColumns are the network columns of each direction.
var netColumns = [2]struct{ name, role, site, region, tenant, country, state, city schema.ColumnKey }{
	{schema.ColumnSrcNetName, schema.ColumnSrcNetRole, schema.ColumnSrcNetSite, schema.ColumnSrcNetRegion,
		schema.ColumnSrcNetTenant, schema.ColumnSrcCountry, schema.ColumnSrcGeoState, schema.ColumnSrcGeoCity},
	{schema.ColumnDstNetName, schema.ColumnDstNetRole, schema.ColumnDstNetSite, schema.ColumnDstNetRegion,
		schema.ColumnDstNetTenant, schema.ColumnDstCountry, schema.ColumnDstGeoState, schema.ColumnDstGeoCity},
}

// encode makes the fragments of a's columns. Attributes too long to fit a fragment together
// (values are bounded where they are read, so this is a safeguard) lose their longest
// value, counted, rather than every column.
func (b *builder) encode(a *Attributes) [2]*schema.Fragment {
	v := *a
	for {
		fs, err := b.encodeAs(&v)
		if err == nil {
			return fs
		}
		name, n, ok := dropLongest(&v)
		if !ok || !errors.Is(err, schema.ErrFragmentSize) {
			b.dropped++
			if b.first == nil {
				b.first = err
			}
			return [2]*schema.Fragment{}
		}
		b.dropped++
		if b.first == nil {
			b.first = fmt.Errorf("a %s of %d bytes left out: %w", name, n, err)
		}
	}
}

func (b *builder) encodeAs(a *Attributes) ([2]*schema.Fragment, error) {
	var fs [2]*schema.Fragment
	if *a == (Attributes{}) {
		return fs, nil
	}
	for dir, c := range netColumns {
		f, err := b.schema.NewFragment(func(fm *schema.FlowMessage) {
			fm.AppendString(c.name, a.Name)
			fm.AppendString(c.role, a.Role)
			fm.AppendString(c.site, a.Site)
			fm.AppendString(c.region, a.Region)
			fm.AppendString(c.tenant, a.Tenant)
			fm.AppendString(c.country, a.Country)
			fm.AppendString(c.state, a.State)
			fm.AppendString(c.city, a.City)
		})
		if err != nil {
			return fs, err
		}
		if len(f.Columns()) > 0 {
			fs[dir] = f
		}
	}
	return fs, nil
}

// dropLongest blanks the longest value of a and tells which and its length; false when a
// has none.
func dropLongest(a *Attributes) (string, int, bool) {
	fields := []struct {
		name string
		v    *string
	}{{"name", &a.Name}, {"role", &a.Role}, {"site", &a.Site}, {"region", &a.Region},
		{"tenant", &a.Tenant}, {"country", &a.Country}, {"state", &a.State}, {"city", &a.City}}
	longest := -1
	for i, f := range fields {
		if *f.v != "" && (longest < 0 || len(*f.v) > len(*fields[longest].v)) {
			longest = i
		}
	}
	if longest < 0 {
		return "", 0, false
	}
	n := len(*fields[longest].v)
	*fields[longest].v = ""
	return fields[longest].name, n, true
}

// build makes the table of everything added to the builder.
func (b *builder) build() *table {
	t := &table{global: new(bart.Fast[leaf])}
	insert := func(dst *bart.Fast[leaf], p netip.Prefix, vrf uint32) {
		if _, done := dst.Get(p); done {
			return
		}
		a, from := b.resolve(p, vrf)
		dst.Insert(p, b.leafOf(a, from))
	}
	// Global: every prefix of the networks and sources without VRF, and GeoIP's.
	for _, layers := range []map[uint32]*layer{b.static, b.source} {
		if l := layers[0]; l != nil {
			for p := range l.All() {
				insert(t.global, p, 0)
			}
		}
	}
	if lenLayer(b.static[0]) == 0 && lenLayer(b.source[0]) == 0 {
		// GeoIP alone: its records map to leaves directly.
		byInfo := map[*geoip.Info]leaf{}
		b.geo.All(func(p netip.Prefix, g *geoip.Info) bool {
			l, ok := byInfo[g]
			if !ok {
				a, from := b.resolve(p, 0)
				l = b.leafOf(a, from)
				byInfo[g] = l
			}
			t.global.Insert(p, l)
			return true
		})
	} else {
		b.geo.All(func(p netip.Prefix, _ *geoip.Info) bool {
			insert(t.global, p, 0)
			return true
		})
	}
	t.prefixes = t.global.Size()
	if b.flat && t.global.Size4() > flatMinPrefixes {
		t.flat = newFlat4(t.global.AllSorted4())
	}
	if b.flat6 && t.global.Size6() > flat6MinPrefixes {
		t.flat6 = newFlat6(t.global.AllSorted6())
	}
	// Per VRF: its own prefixes, and the global ones nested in them.
	vrfs := map[uint32]bool{}
	for _, layers := range []map[uint32]*layer{b.static, b.source} {
		for vrf := range layers {
			vrfs[vrf] = vrf != 0
		}
	}
	for vrf, own := range vrfs {
		if !own {
			continue
		}
		vt := new(bart.Fast[leaf])
		for _, layers := range []map[uint32]*layer{b.static, b.source} {
			l := layers[vrf]
			if l == nil {
				continue
			}
			for q := range l.All() {
				insert(vt, q, vrf)
				for _, global := range []*layer{b.static[0], b.source[0]} {
					if global != nil {
						for p := range global.Subnets(q) {
							insert(vt, p, vrf)
						}
					}
				}
				b.geo.Subnets(q, func(p netip.Prefix, _ *geoip.Info) bool {
					insert(vt, p, vrf)
					return true
				})
			}
		}
		if t.vrfs == nil {
			t.vrfs = map[uint32]*bart.Fast[leaf]{}
		}
		t.vrfs[vrf] = vt
		t.prefixes += vt.Size()
	}
	t.leaves = len(b.leaves)
	return t
}

// len of a nil-able layer
func lenLayer(l *layer) int {
	if l == nil {
		return 0
	}
	return l.Size()
}
