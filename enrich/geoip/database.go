// Package geoip reads MaxMind DB files (GeoLite2 and GeoIP2 from MaxMind, DB-IP, IPinfo) into
// country, state, city and AS number per network, with github.com/oschwald/maxminddb-golang.
//
// # Design
//
// Flows never query a database: at load, every network of every file is read once (records
// decoded once per data offset and interned), the files are merged into a Layer where, for
// each attribute, the first file that has a value wins, and enrich/networks folds that layer
// into its own longest-prefix table with the configured networks. A file is read whole into
// memory rather than mapped, so that a file rewritten in place while it is read cannot fault
// the process; nothing of it is kept once the layer is built. Databases polls the files and
// hands a new layer over when one changes.
package geoip

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"
)

// Info is what a database says of a network. Empty fields are unknown.
type Info struct {
	// Country is the ISO 3166-1 alpha-2 code (for example "GB").
	Country string
	// State is the first subdivision's English name (for example "England"), or its ISO
	// code when the database has no name.
	State string
	// City is the city's English name.
	City string
	// ASN is the autonomous system number.
	ASN uint32
}

// MaxValueLen bounds a string attribute, in bytes, here and in enrich/networks: the
// attributes of an address, encoded together, must fit a flow fragment (4 KiB).
const MaxValueLen = 256

// IsCountryCode tells whether s looks like an ISO 3166-1 alpha-2 code: two ASCII capital
// letters, what the FixedString(2) country columns hold.
func IsCountryCode(s string) bool {
	return len(s) == 2 && isUpperLetter(s[0]) && isUpperLetter(s[1])
}

func isUpperLetter(b byte) bool { return b >= 'A' && b <= 'Z' }

// IsZero tells if the record has no attribute.
func (i Info) IsZero() bool { return i == Info{} }

// merge fills the empty fields of i from o.
func (i *Info) merge(o *Info) {
	if i.Country == "" {
		i.Country = o.Country
	}
	if i.State == "" {
		i.State = o.State
	}
	if i.City == "" {
		i.City = o.City
	}
	if i.ASN == 0 {
		i.ASN = o.ASN
	}
}

// Layout is the shape of a database's records.
type Layout uint8

const (
	// LayoutMaxMind is the GeoIP2 layout (country.iso_code, subdivisions[0].names.en,
	// city.names.en, autonomous_system_number), also used by DB-IP.
	LayoutMaxMind Layout = iota + 1
	// LayoutIPinfo is IPinfo's flat layout (country or country_code, region, city, asn as
	// "AS123").
	LayoutIPinfo
)

func (l Layout) String() string {
	switch l {
	case LayoutMaxMind:
		return "maxmind"
	case LayoutIPinfo:
		return "ipinfo"
	}
	return "layout(" + strconv.Itoa(int(l)) + ")"
}

// DetectLayout tells the layout from the metadata's database_type: IPinfo's start with
// "ipinfo"; MaxMind's ("GeoLite2-City", "GeoIP2-Country"...) and DB-IP's ("DBIP-City-Lite"...)
// share the GeoIP2 layout, which is also assumed for other types.
func DetectLayout(databaseType string) Layout {
	if strings.HasPrefix(strings.ToLower(databaseType), "ipinfo") {
		return LayoutIPinfo
	}
	return LayoutMaxMind
}

// Database is one MaxMind DB file read into memory.
type Database struct {
	// Path is the file it was read from.
	Path string
	// Type is the metadata's database_type.
	Type string
	// Layout is the shape of its records.
	Layout Layout
	// Invalid counts the values the last Each left out: a country that is not two letters,
	// a state or city longer than MaxValueLen.
	Invalid int
	reader  *maxminddb.Reader
}

// Open reads a MaxMind DB file. A file that is not one, or is truncated, is an error naming it.
func Open(path string) (*Database, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return OpenBytes(path, b)
}

// OpenBytes reads a MaxMind DB from memory; name is what errors call it. b must not change
// while the Database is used.
func OpenBytes(name string, b []byte) (*Database, error) {
	r, err := maxminddb.OpenBytes(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Database{Path: name, Type: r.Metadata.DatabaseType, Layout: DetectLayout(r.Metadata.DatabaseType), reader: r}, nil
}

// maxmindRecord is the part of a GeoIP2 record flowzero reads.
type maxmindRecord struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	Subdivisions []struct {
		ISOCode string `maxminddb:"iso_code"`
		Names   struct {
			EN string `maxminddb:"en"`
		} `maxminddb:"names"`
	} `maxminddb:"subdivisions"`
	City struct {
		Names struct {
			EN string `maxminddb:"en"`
		} `maxminddb:"names"`
	} `maxminddb:"city"`
	ASN uint32 `maxminddb:"autonomous_system_number"`
}

// ipinfoRecord is the part of an IPinfo record flowzero reads: "country" is the code in
// IPinfo's location databases and the name in IPinfo Lite, which has "country_code".
type ipinfoRecord struct {
	Country     string `maxminddb:"country"`
	CountryCode string `maxminddb:"country_code"`
	Region      string `maxminddb:"region"`
	City        string `maxminddb:"city"`
	ASN         string `maxminddb:"asn"`
}

// decode reads the record of a lookup or network. Values a column cannot hold are left out
// and counted in invalid.
func (d *Database) decode(r maxminddb.Result) (info Info, invalid int, err error) {
	switch d.Layout {
	case LayoutIPinfo:
		var rec ipinfoRecord
		if err := r.Decode(&rec); err != nil {
			return info, 0, err
		}
		info.Country = rec.CountryCode
		if info.Country == "" && len(rec.Country) == 2 {
			info.Country = rec.Country
		}
		info.State, info.City = rec.Region, rec.City
		if rec.ASN != "" {
			as, err := parseASN(rec.ASN)
			if err != nil {
				return info, 0, err
			}
			info.ASN = as
		}
	default:
		var rec maxmindRecord
		if err := r.Decode(&rec); err != nil {
			return info, 0, err
		}
		info.Country, info.City, info.ASN = rec.Country.ISOCode, rec.City.Names.EN, rec.ASN
		if len(rec.Subdivisions) > 0 {
			info.State = rec.Subdivisions[0].Names.EN
			if info.State == "" {
				info.State = rec.Subdivisions[0].ISOCode
			}
		}
	}
	info.Country = strings.ToUpper(info.Country)
	if info.Country != "" && !IsCountryCode(info.Country) {
		info.Country = "" // the column holds two letters
		invalid++
	}
	for _, v := range []*string{&info.State, &info.City} {
		if len(*v) > MaxValueLen {
			*v = "" // it would not fit a flow fragment with the other attributes
			invalid++
		}
	}
	return info, invalid, nil
}

// parseASN reads IPinfo's "AS15169".
func parseASN(s string) (uint32, error) {
	digits, ok := strings.CutPrefix(strings.ToUpper(s), "AS")
	if !ok {
		return 0, fmt.Errorf("AS number %q does not start with AS", s)
	}
	as, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("AS number %q: %w", s, err)
	}
	return uint32(as), nil
}

// Lookup returns what the database says of a. It decodes the record: it is for tools and
// tests, not for flows (see Layer).
func (d *Database) Lookup(a netip.Addr) (Info, error) {
	r := d.reader.Lookup(a.Unmap())
	if err := r.Err(); err != nil {
		return Info{}, fmt.Errorf("%s: %w", d.Path, err)
	}
	if !r.Found() {
		return Info{}, nil
	}
	info, _, err := d.decode(r)
	if err != nil {
		return Info{}, fmt.Errorf("%s: %s: %w", d.Path, a, err)
	}
	return info, nil
}

// Each calls fn for every network of the database that has an attribute, in address order,
// IPv4 networks as IPv4 prefixes. Records shared by several networks are decoded once and
// given as the same *Info, whose strings no longer refer to the file. A record that cannot
// be decoded stops the walk with an error naming the network. Values left out are counted
// in Invalid, once per record.
func (d *Database) Each(fn func(netip.Prefix, *Info)) error {
	seen := map[uintptr]*Info{}
	d.Invalid = 0
	for r := range d.reader.Networks() {
		if err := r.Err(); err != nil {
			return fmt.Errorf("%s: %w", d.Path, err)
		}
		info, ok := seen[r.Offset()]
		if !ok {
			v, invalid, err := d.decode(r)
			if err != nil {
				return fmt.Errorf("%s: network %s: %w", d.Path, r.Prefix(), err)
			}
			d.Invalid += invalid
			if !v.IsZero() {
				v.State, v.City = strings.Clone(v.State), strings.Clone(v.City)
				v.Country = strings.Clone(v.Country)
				info = &v
			}
			seen[r.Offset()] = info
		}
		if info != nil {
			fn(r.Prefix(), info)
		}
	}
	return nil
}
