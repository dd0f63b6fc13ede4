package snmp

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gaissmai/bart"
	"github.com/gosnmp/gosnmp"
	"gopkg.in/yaml.v3"

	"flowzero/internal/config"
)

// Configuration of the SNMP poller and its cache.
type Configuration struct {
	// Credentials gives, by exporter address or prefix (the longest prefix wins), the SNMPv2c
	// communities to try in order, or the SNMPv3 user (user-name set) to poll with. Written,
	// it replaces the default entirely: exporters it does not cover are not polled. A prefix
	// with host bits set, or two keys for the same prefix (192.0.2.0/24 and
	// ::ffff:192.0.2.0/120), are errors.
	Credentials PrefixMap[Credentials] `yaml:"credentials"`
	// Agents maps an exporter address or prefix to the address of the SNMP agent to poll
	// instead of the exporter's own ("192.0.2.1" or, with a port, "192.0.2.1:1161" or
	// "[2001:db8::1]:1161"). Results stay keyed by the exporter. Keys as for credentials.
	Agents PrefixMap[string] `yaml:"agents"`
	// Ports gives the agent's UDP port by exporter address or prefix (an agent written with
	// its port wins). Written, it replaces the default entirely; keys as for credentials.
	Ports PrefixMap[uint16] `yaml:"ports"`
	// PollerTimeout is how long a request waits for an answer before a retry.
	PollerTimeout time.Duration `yaml:"poller-timeout"`
	// PollerRetries is how many times a request is sent again after a timeout.
	PollerRetries int `yaml:"poller-retries"`
	// Workers bounds the polls in flight at once (one at most per exporter).
	Workers int `yaml:"workers"`
	// MaxBatchRequests is how many interfaces one request asks about: sysName, then ifDescr,
	// ifName, ifAlias and ifHighSpeed of each (at most 14, so that a request holds at most 57
	// OIDs). An agent answering tooBig gets requests half as large from then on, down to one
	// interface.
	MaxBatchRequests int `yaml:"max-batch-requests"`
	// QueueSize bounds the interfaces waiting for a poll; a flow on an interface that does
	// not fit is counted and asks again later.
	QueueSize int `yaml:"queue-size"`
	// CacheRefresh is the age at which an interface still in use is polled again, in the
	// background: flows keep getting the previous answer meanwhile, and keep it if the agent
	// does not answer or answers with values of the wrong type.
	CacheRefresh time.Duration `yaml:"cache-refresh"`
	// CacheDuration forgets an interface no flow used for that long, and the sysName of an
	// exporter left without interfaces once no flow used the exporter for that long.
	CacheDuration time.Duration `yaml:"cache-duration"`
	// CacheCheckInterval is how often the cache looks for interfaces to refresh or forget,
	// and saves the cache file when it changed.
	CacheCheckInterval time.Duration `yaml:"cache-check-interval"`
	// CachePersistFile, when set, is where the cache is saved (at each check when it changed,
	// and at stop) and read back at start, so that a restart enriches flows at once.
	CachePersistFile string `yaml:"cache-persist-file"`
	// BreakerFailures is how many polls in a row must fail (time out, or be refused) to open
	// an exporter's circuit breaker: no poll is sent to it while it is open.
	BreakerFailures int `yaml:"breaker-failures"`
	// BreakerCooldown is how long a breaker stays open before one poll tries the agent again;
	// each failed try doubles it, up to an hour (or BreakerCooldown if longer).
	BreakerCooldown time.Duration `yaml:"breaker-cooldown"`
}

// Credentials are SNMPv2c communities or SNMPv3 user-based security parameters.
type Credentials struct {
	// Communities are tried in order (SNMPv2c) when user-name is empty; a single string is
	// accepted. Each has 1 to 127 bytes (gosnmp encodes no longer one).
	Communities Strings `yaml:"communities"`
	// UserName selects SNMPv3 with this user.
	UserName string `yaml:"user-name"`
	// AuthenticationProtocol is none, MD5, SHA, SHA224, SHA256, SHA384 or SHA512.
	AuthenticationProtocol AuthProtocol `yaml:"authentication-protocol"`
	// AuthenticationPassphrase is the user's authentication passphrase (8 characters or more).
	AuthenticationPassphrase string `yaml:"authentication-passphrase"`
	// PrivacyProtocol is none, DES, AES, AES192, AES256, AES192C or AES256C (the last two are
	// Cisco's variant); it needs authentication.
	PrivacyProtocol PrivProtocol `yaml:"privacy-protocol"`
	// PrivacyPassphrase is the user's privacy passphrase (8 characters or more).
	PrivacyPassphrase string `yaml:"privacy-passphrase"`
	// ContextName is the SNMPv3 context.
	ContextName string `yaml:"context-name"`
}

// DefaultConfiguration polls with the community "public" on port 161, refreshes interfaces
// every 30 minutes and forgets those unused for a day.
func DefaultConfiguration() Configuration {
	return Configuration{
		Credentials:        PrefixMap[Credentials]{"::/0": {Communities: Strings{"public"}}},
		Ports:              PrefixMap[uint16]{"::/0": 161},
		PollerTimeout:      time.Second,
		PollerRetries:      1,
		Workers:            10,
		MaxBatchRequests:   10,
		QueueSize:          10000,
		CacheRefresh:       30 * time.Minute,
		CacheDuration:      24 * time.Hour,
		CacheCheckInterval: time.Minute,
		BreakerFailures:    3,
		BreakerCooldown:    time.Minute,
	}
}

// maxBatchRequests keeps a request within gosnmp's default of 60 OIDs.
const maxBatchRequests = 14

// Validate checks the configuration and names the bad key.
func (c *Configuration) Validate() error {
	_, err := c.tables()
	return err
}

// tables are the configuration's prefix maps, compiled for lookups.
type tables struct {
	credentials *bart.Table[*Credentials]
	agents      *bart.Table[netip.AddrPort] // port 0: from ports
	ports       *bart.Table[uint16]
}

func (c *Configuration) tables() (*tables, error) {
	t := &tables{credentials: new(bart.Table[*Credentials]), agents: new(bart.Table[netip.AddrPort]), ports: new(bart.Table[uint16])}
	err := eachPrefix("credentials", c.Credentials, func(p netip.Prefix, cr Credentials) error {
		if err := cr.validate(); err != nil {
			return err
		}
		t.credentials.Insert(p, &cr)
		return nil
	})
	if err == nil {
		err = eachPrefix("agents", c.Agents, func(p netip.Prefix, agent string) error {
			ap, err := parseAgent(agent)
			if err != nil {
				return err
			}
			t.agents.Insert(p, ap)
			return nil
		})
	}
	if err == nil {
		err = eachPrefix("ports", c.Ports, func(p netip.Prefix, port uint16) error {
			if port == 0 {
				return errors.New("port 0")
			}
			t.ports.Insert(p, port)
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	switch {
	case c.PollerTimeout <= 0:
		return nil, config.Errorf("poller-timeout", "must be positive, not %s", c.PollerTimeout)
	case c.PollerRetries < 0:
		return nil, config.Errorf("poller-retries", "negative")
	case c.Workers < 1:
		return nil, config.Errorf("workers", "must be at least 1")
	case c.MaxBatchRequests < 1 || c.MaxBatchRequests > maxBatchRequests:
		return nil, config.Errorf("max-batch-requests", "must be between 1 and %d", maxBatchRequests)
	case c.QueueSize < 1:
		return nil, config.Errorf("queue-size", "must be at least 1")
	case c.CacheRefresh <= 0:
		return nil, config.Errorf("cache-refresh", "must be positive")
	case c.CacheDuration <= 0:
		return nil, config.Errorf("cache-duration", "must be positive")
	case c.CacheCheckInterval <= 0:
		return nil, config.Errorf("cache-check-interval", "must be positive")
	case c.BreakerFailures < 1:
		return nil, config.Errorf("breaker-failures", "must be at least 1")
	case c.BreakerCooldown <= 0:
		return nil, config.Errorf("breaker-cooldown", "must be positive")
	}
	return t, nil
}

// eachPrefix calls fn for each entry of m, in key order, with its key read as a prefix; an
// error (a bad key, two keys for the same prefix, or fn's) names section.key.
func eachPrefix[V any](section string, m map[string]V, fn func(netip.Prefix, V) error) error {
	seen := make(map[netip.Prefix]string, len(m))
	for _, key := range slices.Sorted(maps.Keys(m)) {
		p, err := parsePrefix(key)
		if err != nil {
			return config.Errorf(section+"."+key, "%v", err)
		}
		if other, dup := seen[p]; dup {
			return config.Errorf(section+"."+key, "same prefix as %q", other)
		}
		seen[p] = key
		if err := fn(p, m[key]); err != nil {
			return config.Prefix(section+"."+key, err)
		}
	}
	return nil
}

// maxCommunityLen is the longest community gosnmp encodes: it writes the length of the
// community string in one byte, BER's short form.
const maxCommunityLen = 127

func (cr *Credentials) validate() error {
	if cr.UserName == "" {
		if len(cr.Communities) == 0 {
			return config.Errorf("communities", "no community and no user-name")
		}
		for i, s := range cr.Communities {
			if s == "" {
				return config.Errorf(fmt.Sprintf("communities[%d]", i), "empty community")
			}
			if len(s) > maxCommunityLen {
				// Its length only: a community is a secret.
				return config.Errorf(fmt.Sprintf("communities[%d]", i), "%d bytes, longer than the %d an SNMP request can carry", len(s), maxCommunityLen)
			}
		}
		if cr.AuthenticationProtocol > AuthNone || cr.PrivacyProtocol > PrivNone {
			return config.Errorf("user-name", "SNMPv3 protocols without a user-name")
		}
		return nil
	}
	if len(cr.Communities) > 0 {
		return config.Errorf("communities", "both communities (SNMPv2c) and user-name (SNMPv3)")
	}
	if cr.AuthenticationProtocol > AuthNone && len(cr.AuthenticationPassphrase) < 8 {
		return config.Errorf("authentication-passphrase", "must have 8 characters or more (RFC 3414)")
	}
	if cr.PrivacyProtocol > PrivNone {
		if cr.AuthenticationProtocol <= AuthNone {
			return config.Errorf("privacy-protocol", "privacy needs an authentication-protocol")
		}
		if len(cr.PrivacyPassphrase) < 8 {
			return config.Errorf("privacy-passphrase", "must have 8 characters or more (RFC 3414)")
		}
	}
	return nil
}

// parsePrefix reads an address or prefix, refusing host bits as enrich.exporters does. IPv4
// is stored IPv4-mapped, and addresses are looked up in that form (key), so that ::/0 covers
// every exporter as in Akvorado.
func parsePrefix(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = config.ParsePrefix(s); err != nil {
			return netip.Prefix{}, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("not an address or prefix: %q", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4() {
		p = netip.PrefixFrom(netip.AddrFrom16(p.Addr().As16()), 96+p.Bits())
	}
	return p, nil
}

// key is the form in which addresses are looked up in the tables: IPv6, IPv4-mapped.
func key(a netip.Addr) netip.Addr { return netip.AddrFrom16(a.As16()) }

// parseAgent reads an agent address, with or without a port.
func parseAgent(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 0), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("not an address or address:port: %q", s)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("not an address: %q", host)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", port)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(n)), nil
}

// PrefixMap maps exporter addresses or prefixes to values. Read from YAML, it replaces the
// map it is decoded into rather than adding to it, so that a map written by the user
// replaces the default instead of being merged with it.
type PrefixMap[V any] map[string]V

// UnmarshalYAML reads a mapping into a new map.
func (m *PrefixMap[V]) UnmarshalYAML(n *yaml.Node) error {
	var v map[string]V
	if err := n.Decode(&v); err != nil {
		return err
	}
	*m = v
	return nil
}

// Strings is a list of strings that also reads a single string.
type Strings []string

// UnmarshalYAML reads a string or a list of strings.
func (s *Strings) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = Strings{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

// AuthProtocol is an SNMPv3 authentication protocol.
type AuthProtocol gosnmp.SnmpV3AuthProtocol

// AuthNone is no authentication; the zero value is too.
const AuthNone = AuthProtocol(gosnmp.NoAuth)

var authProtocols = map[string]gosnmp.SnmpV3AuthProtocol{
	"none": gosnmp.NoAuth, "md5": gosnmp.MD5, "sha": gosnmp.SHA, "sha224": gosnmp.SHA224,
	"sha256": gosnmp.SHA256, "sha384": gosnmp.SHA384, "sha512": gosnmp.SHA512,
}

// UnmarshalText reads a protocol name, in any case.
func (p *AuthProtocol) UnmarshalText(b []byte) error {
	v, ok := authProtocols[strings.ToLower(string(b))]
	if !ok {
		return fmt.Errorf("unknown authentication protocol %q (none, MD5, SHA, SHA224, SHA256, SHA384, SHA512)", b)
	}
	*p = AuthProtocol(v)
	return nil
}

// MarshalText writes the protocol's name.
func (p AuthProtocol) MarshalText() ([]byte, error) {
	for name, v := range authProtocols {
		if AuthProtocol(v) == p {
			return []byte(strings.ToUpper(name)), nil
		}
	}
	return []byte("none"), nil
}

// PrivProtocol is an SNMPv3 privacy protocol.
type PrivProtocol gosnmp.SnmpV3PrivProtocol

// PrivNone is no privacy; the zero value is too.
const PrivNone = PrivProtocol(gosnmp.NoPriv)

var privProtocols = map[string]gosnmp.SnmpV3PrivProtocol{
	"none": gosnmp.NoPriv, "des": gosnmp.DES, "aes": gosnmp.AES, "aes192": gosnmp.AES192,
	"aes256": gosnmp.AES256, "aes192c": gosnmp.AES192C, "aes256c": gosnmp.AES256C,
}

// UnmarshalText reads a protocol name, in any case.
func (p *PrivProtocol) UnmarshalText(b []byte) error {
	v, ok := privProtocols[strings.ToLower(string(b))]
	if !ok {
		return fmt.Errorf("unknown privacy protocol %q (none, DES, AES, AES192, AES256, AES192C, AES256C)", b)
	}
	*p = PrivProtocol(v)
	return nil
}

// MarshalText writes the protocol's name.
func (p PrivProtocol) MarshalText() ([]byte, error) {
	for name, v := range privProtocols {
		if PrivProtocol(v) == p {
			return []byte(strings.ToUpper(name)), nil
		}
	}
	return []byte("none"), nil
}
