package networks

import (
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"flowzero/enrich/geoip"
	"flowzero/internal/config"
)

// Configuration gives attributes to networks: static entries, entries fetched over HTTP and
// GeoIP databases. For each attribute, networks win over network sources, which win over
// GeoIP; inside networks and inside network sources, the longest prefix that sets the
// attribute wins, and an entry of the flow's VRF wins over one without VRF.
type Configuration struct {
	// Networks maps a prefix (or an address) to its attributes: the Src/DstNet* columns,
	// and optionally country, state, city and AS number, which then win over GeoIP's. A
	// key "PREFIX@VRF" (for example "10.0.0.0/8@12") applies only to addresses in that VRF
	// ID, and wins over entries without VRF: a flow's source address is in its IngressVRFID,
	// its destination in its EgressVRFID, each taking the other when the exporter sent only
	// one (these two columns must then be enabled). A plain string value is a name:
	// `192.0.2.0/24: customers`. A prefix with host bits set is an error (10.1.2.0/8 is not
	// read as 10.0.0.0/8), and so is a value longer than 256 bytes.
	Networks map[string]Attributes `yaml:"networks"`
	// NetworkSources are lists of networks with attributes fetched over HTTP (JSON or CSV)
	// and refreshed on an interval, by source name (which cannot hold "/", "\" or "..": it
	// names the cache file). The last good copy is kept on disk, so a restart while a source
	// is down still enriches. An answer without any entry is refused while the source has
	// some (a glitch of the server must not erase them; remove the source to drop them). For
	// the same prefix, the first source in name order wins per attribute.
	NetworkSources map[string]SourceConfiguration `yaml:"network-sources"`
	// GeoIP gives country, state, city and AS number from MaxMind DB files.
	GeoIP geoip.Configuration `yaml:"geoip"`
	// IPv4Array looks IPv4 addresses up in an array indexed by their first 24 bits rather
	// than by walking the prefix tree, when networks, network sources and GeoIP together
	// have more than 65,536 IPv4 prefixes (a GeoIP database): fewer memory accesses per flow
	// for 64 MiB more memory (twice that while a change is being applied). Off: the tree alone.
	IPv4Array bool `yaml:"network-ipv4-array"`
	// IPv6Array looks IPv6 addresses up in an array indexed by their first 24 bits, then in
	// 256-entry tables of the next bytes down to /48, rather than by walking the prefix
	// tree, when networks, network sources and GeoIP together have more than 65,536 IPv6
	// prefixes (a GeoIP database): fewer memory accesses per flow for 64 MiB and 1 KiB per
	// block of /24, /32 or /40 holding longer prefixes more memory (about 100 MiB for a
	// GeoIP database over a full table, twice that while a change is being applied). Off:
	// the tree alone.
	IPv6Array bool `yaml:"network-ipv6-array"`
}

// DefaultConfiguration has no network, no source and no GeoIP database.
func DefaultConfiguration() Configuration {
	return Configuration{GeoIP: geoip.DefaultConfiguration(), IPv4Array: true, IPv6Array: true}
}

// Used tells whether anything gives network attributes.
func (c *Configuration) Used() bool {
	return len(c.Networks) > 0 || len(c.NetworkSources) > 0 || len(c.GeoIP.Databases) > 0
}

// VRFKey returns the first key that names a VRF ("" when none does): such entries need the
// IngressVRFID and EgressVRFID columns, without which decoders do not read the flows' VRFs.
func (c *Configuration) VRFKey() string {
	for _, k := range slices.Sorted(mapsKeys(c.Networks)) {
		if strings.Contains(k, "@") {
			return "networks." + k
		}
	}
	for _, name := range slices.Sorted(mapsKeys(c.NetworkSources)) {
		if len(c.NetworkSources[name].Fields.VRF) > 0 {
			return "network-sources." + name + ".fields.vrf"
		}
	}
	return ""
}

// defaultCacheDir holds the network sources' cached copies when Options.CacheDir is unset.
var defaultCacheDir = filepath.Join("var", "network-sources")

// Validate checks the configuration and names the bad key.
func (c *Configuration) Validate() error {
	if _, err := staticEntries(c.Networks); err != nil {
		return err
	}
	for _, name := range slices.Sorted(mapsKeys(c.NetworkSources)) {
		if name == "" || name == "." || strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") {
			return config.Errorf("network-sources."+name, `a source name cannot be empty or hold "/", "\" or "..": it names the cache file`)
		}
		s := c.NetworkSources[name]
		if err := s.Validate(); err != nil {
			return config.Prefix("network-sources."+name, err)
		}
	}
	if _, err := c.cacheFiles(defaultCacheDir); err != nil {
		return err
	}
	if err := c.GeoIP.Validate(); err != nil {
		return config.Prefix("geoip", err)
	}
	return nil
}

// cacheFiles returns each source's cache file, cache-file or dir/<name>, refusing two
// sources that would share one: each would read the other's copy after a restart.
func (c *Configuration) cacheFiles(dir string) (map[string]string, error) {
	files := map[string]string{}
	owner := map[string]string{}
	for _, name := range slices.Sorted(mapsKeys(c.NetworkSources)) {
		f := c.NetworkSources[name].CacheFile
		if f == "" {
			f = filepath.Join(dir, name)
		}
		f = filepath.Clean(f)
		if abs, err := filepath.Abs(f); err == nil {
			f = abs
		}
		if other, dup := owner[f]; dup {
			return nil, config.Errorf("network-sources."+name+".cache-file", "%s is also the cache file of network-sources.%s", f, other)
		}
		owner[f], files[name] = name, f
	}
	return files, nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Attributes describe a network. Empty fields are not set by this entry: a shorter prefix,
// a source of lower precedence or GeoIP may set them.
type Attributes struct {
	// Name fills Src/DstNetName.
	Name string `yaml:"name"`
	// Role fills Src/DstNetRole (for example "customers", "servers").
	Role string `yaml:"role"`
	// Site fills Src/DstNetSite.
	Site string `yaml:"site"`
	// Region fills Src/DstNetRegion.
	Region string `yaml:"region"`
	// Tenant fills Src/DstNetTenant.
	Tenant string `yaml:"tenant"`
	// Country fills Src/DstCountry: an ISO 3166-1 alpha-2 code (for example "FR").
	Country string `yaml:"country"`
	// State fills Src/DstGeoState.
	State string `yaml:"state"`
	// City fills Src/DstGeoCity.
	City string `yaml:"city"`
	// ASN fills SrcAS/DstAS when the "geoip" AS number provider is reached (enrich.asn-providers).
	ASN uint32 `yaml:"asn"`
}

// UnmarshalYAML reads attributes, or a plain string as the name.
func (a *Attributes) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*a = Attributes{Name: s}
		return nil
	}
	type plain Attributes
	return decodeStrict(n, (*plain)(a))
}

// validate checks the values a column would refuse, and the length of each: all of them
// together must fit a flow fragment.
func (a *Attributes) validate() error {
	if a.Country != "" && !geoip.IsCountryCode(a.Country) {
		return config.Errorf("country", "%q is not an ISO 3166-1 alpha-2 code (two letters)", a.Country)
	}
	for _, v := range []struct{ key, value string }{
		{"name", a.Name}, {"role", a.Role}, {"site", a.Site}, {"region", a.Region},
		{"tenant", a.Tenant}, {"state", a.State}, {"city", a.City},
	} {
		if len(v.value) > geoip.MaxValueLen {
			return config.Errorf(v.key, "%d bytes, more than %d", len(v.value), geoip.MaxValueLen)
		}
	}
	return nil
}

// fill sets the empty fields of a from o.
func (a *Attributes) fill(o *Attributes) {
	if a.Name == "" {
		a.Name = o.Name
	}
	if a.Role == "" {
		a.Role = o.Role
	}
	if a.Site == "" {
		a.Site = o.Site
	}
	if a.Region == "" {
		a.Region = o.Region
	}
	if a.Tenant == "" {
		a.Tenant = o.Tenant
	}
	if a.Country == "" {
		a.Country = o.Country
	}
	if a.State == "" {
		a.State = o.State
	}
	if a.City == "" {
		a.City = o.City
	}
	if a.ASN == 0 {
		a.ASN = o.ASN
	}
}

// complete tells if every attribute is set: nothing of lower precedence can add to it.
func (a *Attributes) complete() bool {
	return a.Name != "" && a.Role != "" && a.Site != "" && a.Region != "" && a.Tenant != "" &&
		a.Country != "" && a.State != "" && a.City != "" && a.ASN != 0
}

// Entry is a network with its attributes, from the configuration or a source.
type Entry struct {
	Prefix netip.Prefix
	// VRF is the VRF ID the entry applies to; 0 applies to every flow.
	VRF   uint32
	Attrs Attributes
}

// parseKey reads "PREFIX", "ADDRESS" or either followed by "@VRF". IPv4 stays IPv4 (flows
// are looked up unmapped); a prefix with host bits set is refused.
func parseKey(s string) (netip.Prefix, uint32, error) {
	var vrf uint32
	if p, v, ok := strings.Cut(s, "@"); ok {
		id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || id == 0 {
			return netip.Prefix{}, 0, fmt.Errorf("VRF %q is not a VRF ID (1 to 4294967295)", v)
		}
		s, vrf = p, uint32(id)
	}
	p, err := parsePrefix(s)
	return p, vrf, err
}

// parsePrefix reads a prefix or an address (a host prefix), IPv4-mapped IPv6 as IPv4. A
// prefix with host bits set is refused rather than widened: "10.1.2.0/8" is likely a typo.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		if err := config.CheckHostBits(p); err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return netip.Prefix{}, fmt.Errorf("%q spans IPv4-mapped and other IPv6 addresses", s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not a prefix or an address", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// staticEntries reads the networks section, in key order.
func staticEntries(networks map[string]Attributes) ([]Entry, error) {
	type key struct {
		p   netip.Prefix
		vrf uint32
	}
	seen := map[key]string{}
	entries := make([]Entry, 0, len(networks))
	for _, k := range slices.Sorted(mapsKeys(networks)) {
		a := networks[k]
		p, vrf, err := parseKey(k)
		if err != nil {
			return nil, config.Errorf("networks."+k, "%v", err)
		}
		if other, dup := seen[key{p, vrf}]; dup {
			return nil, config.Errorf("networks."+k, "same network as %q", other)
		}
		seen[key{p, vrf}] = k
		if err := a.validate(); err != nil {
			return nil, config.Prefix("networks."+k, err)
		}
		entries = append(entries, Entry{Prefix: p, VRF: vrf, Attrs: a})
	}
	return entries, nil
}

// Formats of network sources.
const (
	FormatJSON = "json"
	FormatCSV  = "csv"
)

// SourceConfiguration is one list of networks fetched over HTTP.
type SourceConfiguration struct {
	// URL is fetched with GET (http or https). Logs show it without its password and
	// with its query values replaced. Up to 5 redirects are followed, to the same scheme and
	// host only (or from http to https), so that the headers never reach another host.
	URL string `yaml:"url"`
	// Headers are sent with the request (for example an Authorization header). They are
	// never logged.
	Headers map[string]string `yaml:"headers"`
	// Format is json or csv (default json).
	Format string `yaml:"format"`
	// Interval is the time between two fetches (default 10m).
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds a fetch, from the request to the end of the body (default 30s).
	Timeout time.Duration `yaml:"timeout"`
	// MaxSize bounds the body, in bytes (default 64 MiB, at most 1 GiB): a larger answer is
	// an error and the previous copy stays.
	MaxSize int64 `yaml:"max-size"`
	// MaxEntries bounds the entries of an answer, valid or not (default 1,000,000, at most
	// 10,000,000): an answer with more is an error and the previous copy stays.
	MaxEntries int `yaml:"max-entries"`
	// CacheFile keeps the last good answer, read at start before the first fetch, and
	// written (synced, then renamed) when an answer changes the entries. Empty:
	// var/network-sources/<name>. Two sources cannot share one.
	CacheFile string `yaml:"cache-file"`
	// Entries are where the entries are in a JSON answer: dotted paths to arrays of objects
	// (for example "prefixes" and "ipv6_prefixes" in AWS's ip-ranges.json). Empty: the
	// answer is the array. An answer holding none of them (an error message served with
	// status 200) is an error and the previous copy stays. Unused for CSV, whose first line
	// names the columns.
	Entries []string `yaml:"entries"`
	// Fields maps each attribute (prefix, vrf, name, role, site, region, tenant, country,
	// state, city, asn) to the field or CSV column holding it: a name, a dotted path into
	// nested objects, or a list of them, the first present winning (AWS gives "ip_prefix"
	// or "ipv6_prefix"). prefix is required.
	Fields FieldMapping `yaml:"fields"`
	// Values sets attributes to constants for every entry of the source (for example
	// tenant: amazon); a field mapped in Fields wins over them.
	Values Attributes `yaml:"values"`
}

// FieldMapping names the fields of a source that hold each attribute.
type FieldMapping struct {
	// Prefix holds the entry's prefix or address (required). Entries whose prefix has host
	// bits set (10.1.2.0/8), or with a value longer than 256 bytes, or larger than 64 KiB in
	// JSON, are skipped and counted.
	Prefix FieldNames `yaml:"prefix"`
	// VRF holds the VRF ID the entry applies to (empty or absent: every VRF).
	VRF FieldNames `yaml:"vrf"`
	// Name holds the network's name.
	Name FieldNames `yaml:"name"`
	// Role holds the network's role.
	Role FieldNames `yaml:"role"`
	// Site holds the network's site.
	Site FieldNames `yaml:"site"`
	// Region holds the network's region.
	Region FieldNames `yaml:"region"`
	// Tenant holds the network's tenant.
	Tenant FieldNames `yaml:"tenant"`
	// Country holds an ISO 3166-1 alpha-2 code (entries with another value are skipped).
	Country FieldNames `yaml:"country"`
	// State holds the state or region.
	State FieldNames `yaml:"state"`
	// City holds the city.
	City FieldNames `yaml:"city"`
	// ASN holds the AS number ("64500" or "AS64500").
	ASN FieldNames `yaml:"asn"`
}

// FieldNames are candidate field names, the first present winning. YAML gives a string or a
// list of strings.
type FieldNames []string

// UnmarshalYAML reads a string or a list of strings.
func (f *FieldNames) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*f = FieldNames{s}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*f = l
	return nil
}

// DefaultSourceConfiguration is what a source's unset keys take.
func DefaultSourceConfiguration() SourceConfiguration {
	return SourceConfiguration{Format: FormatJSON, Interval: 10 * time.Minute, Timeout: 30 * time.Second,
		MaxSize: 64 << 20, MaxEntries: 1_000_000}
}

// UnmarshalYAML starts a source from its defaults.
func (s *SourceConfiguration) UnmarshalYAML(n *yaml.Node) error {
	*s = DefaultSourceConfiguration()
	type plain SourceConfiguration
	return decodeStrict(n, (*plain)(s))
}

// UnmarshalYAML refuses unknown attributes.
func (f *FieldMapping) UnmarshalYAML(n *yaml.Node) error {
	type plain FieldMapping
	return decodeStrict(n, (*plain)(f))
}

// decodeStrict decodes a mapping into the struct out points to, refusing keys its fields do
// not name: a custom UnmarshalYAML decodes without the caller's strictness.
func decodeStrict(n *yaml.Node, out any) error {
	if n.Kind == yaml.MappingNode {
		t := reflect.TypeOf(out).Elem()
		known := map[string]bool{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			known[name] = true
		}
		var errs []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; !known[k.Value] {
				errs = append(errs, fmt.Sprintf("line %d: unknown key %q", k.Line, k.Value))
			}
		}
		if len(errs) > 0 {
			return &yaml.TypeError{Errors: errs}
		}
	}
	return n.Decode(out)
}

// Bounds of the sources' max-size and max-entries.
const (
	maxMaxSize    = 1 << 30
	maxMaxEntries = 10_000_000
)

// Validate checks a source and names the bad key.
func (s *SourceConfiguration) Validate() error {
	u, err := url.Parse(s.URL)
	switch {
	case s.URL == "":
		return config.Errorf("url", "required")
	case err != nil:
		// url.Parse's error quotes part of the URL, which may be a password.
		return config.Errorf("url", "not a valid URL (characters such as # / ? @ in a user name or password must be percent-encoded)")
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return config.Errorf("url", "must be an http or https URL, not %q", redactURL(u))
	}
	for _, k := range slices.Sorted(mapsKeys(s.Headers)) {
		if !validHeaderName(k) {
			return config.Errorf("headers."+k, "not a valid HTTP header name")
		}
		if !validHeaderValue(s.Headers[k]) {
			// The value may be a secret: do not quote it.
			return config.Errorf("headers."+k, "the value holds characters an HTTP header cannot (a line break or another control character)")
		}
	}
	switch s.Format {
	case FormatJSON, FormatCSV:
	default:
		return config.Errorf("format", "must be json or csv, not %q", s.Format)
	}
	if s.Interval < time.Second {
		return config.Errorf("interval", "must be at least 1s, not %s", s.Interval)
	}
	if s.Timeout <= 0 {
		return config.Errorf("timeout", "must be positive")
	}
	if s.MaxSize <= 0 || s.MaxSize > maxMaxSize {
		return config.Errorf("max-size", "must be from 1 to %d (1 GiB), not %d", maxMaxSize, s.MaxSize)
	}
	if s.MaxEntries <= 0 || s.MaxEntries > maxMaxEntries {
		return config.Errorf("max-entries", "must be from 1 to %d, not %d", maxMaxEntries, s.MaxEntries)
	}
	if len(s.Fields.Prefix) == 0 {
		return config.Errorf("fields.prefix", "required: the field holding each entry's prefix")
	}
	if s.Format == FormatCSV && len(s.Entries) > 0 {
		return config.Errorf("entries", "only for json: a CSV's entries are its lines")
	}
	for i, f := range s.Fields.all() {
		for _, name := range f {
			if name == "" {
				return config.Errorf("fields."+fieldKeys[i], "empty field name")
			}
		}
	}
	if err := s.Values.validate(); err != nil {
		return config.Prefix("values", err)
	}
	return nil
}

// validHeaderName tells whether s is an HTTP header name: a token (RFC 9110 section 5.6.2).
// golang.org/x/net/http/httpguts has the same check but would bring in golang.org/x/text.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue tells whether s can be sent as a header value: no control character but
// tab (RFC 9110 section 5.5), so no line break that would start another header.
func validHeaderValue(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// fieldKeys are the YAML keys of FieldMapping, in the order of all.
var fieldKeys = []string{"prefix", "vrf", "name", "role", "site", "region", "tenant", "country", "state", "city", "asn"}

func (f *FieldMapping) all() []FieldNames {
	return []FieldNames{f.Prefix, f.VRF, f.Name, f.Role, f.Site, f.Region, f.Tenant, f.Country, f.State, f.City, f.ASN}
}
