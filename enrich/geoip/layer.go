package geoip

import (
	"net/netip"

	"github.com/gaissmai/bart"
)

// Layer is several databases merged: for each network of any of them, each attribute from the
// first database that has it for that network. Its records are interned (one *Info per
// distinct value) and it is read-only once built: safe for concurrent use.
type Layer struct {
	table *bart.Table[*Info]
	// Records is the number of distinct records.
	Records int
	// Invalid is the number of values the databases' records had that were left out (see
	// Database.Invalid).
	Invalid int
}

// NewLayer merges databases, the first winning per attribute. Each database is walked once;
// with several, each network of one is completed from the networks of the others that
// contain it.
func NewLayer(dbs []*Database) (*Layer, error) {
	tables := make([]*bart.Table[*Info], len(dbs))
	invalid := 0
	for i, d := range dbs {
		t := new(bart.Table[*Info])
		if err := d.Each(func(p netip.Prefix, info *Info) { t.Insert(p, info) }); err != nil {
			return nil, err
		}
		tables[i] = t
		invalid += d.Invalid
	}
	l := &Layer{table: new(bart.Table[*Info]), Invalid: invalid}
	intern := map[Info]*Info{}
	for _, t := range tables {
		for p := range t.All() {
			if _, done := l.table.Get(p); done {
				continue
			}
			var merged Info
			for _, o := range tables {
				if info, ok := o.LookupPrefix(p); ok {
					merged.merge(info)
				}
			}
			v, ok := intern[merged]
			if !ok {
				v = &merged
				intern[merged] = v
			}
			l.table.Insert(p, v)
		}
	}
	l.Records = len(intern)
	return l, nil
}

// Lookup returns the record of the longest network holding a, or nil.
func (l *Layer) Lookup(a netip.Addr) *Info {
	if l == nil {
		return nil
	}
	v, _ := l.table.Lookup(a.Unmap())
	return v
}

// LookupPrefix returns the record of the longest network holding all of p, or nil.
func (l *Layer) LookupPrefix(p netip.Prefix) *Info {
	if l == nil {
		return nil
	}
	v, _ := l.table.LookupPrefix(p)
	return v
}

// All yields every network with its record.
func (l *Layer) All(yield func(netip.Prefix, *Info) bool) {
	if l == nil {
		return
	}
	for p, v := range l.table.All() {
		if !yield(p, v) {
			return
		}
	}
}

// Size is the number of networks.
func (l *Layer) Size() int {
	if l == nil {
		return 0
	}
	return l.table.Size()
}

// Subnets yields the networks inside p (p included).
func (l *Layer) Subnets(p netip.Prefix, yield func(netip.Prefix, *Info) bool) {
	if l == nil {
		return
	}
	for q, v := range l.table.Subnets(p) {
		if !yield(q, v) {
			return
		}
	}
}
