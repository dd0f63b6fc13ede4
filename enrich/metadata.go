package enrich

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gaissmai/bart"

	"flowzero/internal/config"
	"flowzero/schema"
)

// ExporterMetadata describes one exporter, or every exporter of a prefix: what Akvorado's
// static metadata provider and its exporter and interface classifiers give.
type ExporterMetadata struct {
	// Name fills ExporterName (for example the router's hostname).
	Name string `yaml:"name"`
	// Group fills ExporterGroup.
	Group string `yaml:"group"`
	// Role fills ExporterRole (for example "edge" or "core").
	Role string `yaml:"role"`
	// Site fills ExporterSite.
	Site string `yaml:"site"`
	// Region fills ExporterRegion.
	Region string `yaml:"region"`
	// Tenant fills ExporterTenant.
	Tenant string `yaml:"tenant"`
	// Interfaces describes interfaces by SNMP index (the flow's InIf and OutIf).
	Interfaces map[uint32]InterfaceMetadata `yaml:"interfaces"`
	// Default describes the interfaces Interfaces does not list; without it their columns
	// stay empty.
	Default *InterfaceMetadata `yaml:"default"`
}

// InterfaceMetadata describes one interface of an exporter. It fills the In* columns of
// flows entering through it and the Out* columns of flows leaving through it.
type InterfaceMetadata struct {
	// Name fills In/OutIfName (ifName).
	Name string `yaml:"name"`
	// Description fills In/OutIfDescription (ifAlias).
	Description string `yaml:"description"`
	// Speed fills In/OutIfSpeed, in Mbit/s (ifHighSpeed).
	Speed uint32 `yaml:"speed"`
	// Provider fills In/OutIfProvider (for example "cogent").
	Provider string `yaml:"provider"`
	// Connectivity fills In/OutIfConnectivity (for example "transit", "pni", "ix").
	Connectivity string `yaml:"connectivity"`
	// Boundary fills In/OutIfBoundary: "external", "internal" or empty (undefined).
	Boundary string `yaml:"boundary"`
}

// validateMetadata checks the exporters section and names the bad key.
func validateMetadata(exporters map[string]ExporterMetadata) error {
	for key, e := range exporters {
		if _, err := parseExporterKey(key); err != nil {
			return config.Errorf("exporters."+key, "%v", err)
		}
		for idx, i := range e.Interfaces {
			if err := i.validate(); err != nil {
				return config.Errorf(fmt.Sprintf("exporters.%s.interfaces.%d.boundary", key, idx), "%v", err)
			}
		}
		if e.Default != nil {
			if err := e.Default.validate(); err != nil {
				return config.Errorf("exporters."+key+".default.boundary", "%v", err)
			}
		}
	}
	return nil
}

func (i *InterfaceMetadata) validate() error {
	_, err := boundaryValue(i.Boundary)
	return err
}

func boundaryValue(s string) (uint64, error) {
	switch strings.ToLower(s) {
	case "", "undefined":
		return schema.BoundaryUndefined, nil
	case "external":
		return schema.BoundaryExternal, nil
	case "internal":
		return schema.BoundaryInternal, nil
	}
	return 0, fmt.Errorf("unknown boundary %q (external, internal)", s)
}

// parseExporterKey reads an exporter address or prefix. IPv4 is kept as IPv4: flows carry
// exporter addresses unmapped.
func parseExporterKey(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		// Host bits are refused: 10.0.0.1/24 is a typo for 10.0.0.1 or 10.0.0.0/24.
		return config.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an address or prefix: %q", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Metadata fills each flow's exporter and interface columns from static configuration. The
// columns of an exporter, and of each of its interfaces in each direction, are encoded once
// into schema fragments when the configuration is loaded: a flow then costs a cached lookup
// of its exporter, two of its interfaces and three fragment copies. Metadata is safe for
// concurrent use.
type Metadata struct {
	prefixes *bart.Table[*exporterInfo]
	// seen maps exporter addresses already looked up to their metadata (nil: none), copied
	// on write: lookups read it without locking.
	seen   atomic.Pointer[addrTable[*exporterInfo]]
	seenMu sync.Mutex
}

// maxSeenExporters bounds the cache of exporter addresses (copied on each new one), so that
// spoofed sources cannot grow it without limit; past it new addresses are matched each time.
const maxSeenExporters = 4096

type exporterInfo struct {
	// meta is the configuration, which MetadataCache merges with SNMP and rules.
	meta     *ExporterMetadata
	fragment *schema.Fragment
	// dense holds the interfaces of index below maxDenseIndex, sparse the others.
	dense  []*interfaceInfo
	sparse map[uint32]*interfaceInfo
	def    *interfaceInfo
}

// maxDenseIndex bounds the interface indexes held in a slice (8 bytes per index up to the
// highest configured): most routers number their interfaces below it, and a slice index is
// several times cheaper than a map lookup.
const maxDenseIndex = 4096

type interfaceInfo struct {
	in, out *schema.Fragment
}

// NewMetadata builds the fragments of every configured exporter and interface for schema s.
// It returns nil when exporters is empty.
func NewMetadata(exporters map[string]ExporterMetadata, s *schema.Schema) (*Metadata, error) {
	if len(exporters) == 0 {
		return nil, nil
	}
	if err := validateMetadata(exporters); err != nil {
		return nil, err
	}
	m := &Metadata{prefixes: new(bart.Table[*exporterInfo])}
	for key, e := range exporters {
		p, _ := parseExporterKey(key)
		if _, dup := m.prefixes.Get(p); dup {
			return nil, config.Errorf("exporters."+key, "prefix %s listed twice", p)
		}
		info, err := newExporterInfo(&e, s)
		if err != nil {
			return nil, config.Errorf("exporters."+key, "%v", err)
		}
		m.prefixes.Insert(p, info)
	}
	m.seen.Store(newAddrTable[*exporterInfo]())
	return m, nil
}

func newExporterInfo(e *ExporterMetadata, s *schema.Schema) (*exporterInfo, error) {
	f, err := s.NewFragment(func(fm *schema.FlowMessage) {
		fm.AppendString(schema.ColumnExporterName, e.Name)
		fm.AppendString(schema.ColumnExporterGroup, e.Group)
		fm.AppendString(schema.ColumnExporterRole, e.Role)
		fm.AppendString(schema.ColumnExporterSite, e.Site)
		fm.AppendString(schema.ColumnExporterRegion, e.Region)
		fm.AppendString(schema.ColumnExporterTenant, e.Tenant)
	})
	if err != nil {
		return nil, err
	}
	info := &exporterInfo{meta: e, fragment: f, sparse: map[uint32]*interfaceInfo{}}
	for idx, i := range e.Interfaces {
		ii, err := newInterfaceInfo(&i, s)
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", strconv.FormatUint(uint64(idx), 10), err)
		}
		if idx >= maxDenseIndex {
			info.sparse[idx] = ii
			continue
		}
		if int(idx) >= len(info.dense) {
			info.dense = append(info.dense, make([]*interfaceInfo, int(idx)+1-len(info.dense))...)
		}
		info.dense[idx] = ii
	}
	if e.Default != nil {
		if info.def, err = newInterfaceInfo(e.Default, s); err != nil {
			return nil, fmt.Errorf("default interface: %w", err)
		}
	}
	return info, nil
}

// interfaceColumns are the columns of an interface, inbound then outbound.
var interfaceColumns = [2]struct{ name, description, speed, provider, connectivity, boundary schema.ColumnKey }{
	{schema.ColumnInIfName, schema.ColumnInIfDescription, schema.ColumnInIfSpeed, schema.ColumnInIfProvider, schema.ColumnInIfConnectivity, schema.ColumnInIfBoundary},
	{schema.ColumnOutIfName, schema.ColumnOutIfDescription, schema.ColumnOutIfSpeed, schema.ColumnOutIfProvider, schema.ColumnOutIfConnectivity, schema.ColumnOutIfBoundary},
}

func newInterfaceInfo(i *InterfaceMetadata, s *schema.Schema) (*interfaceInfo, error) {
	boundary, err := boundaryValue(i.Boundary)
	if err != nil {
		return nil, err
	}
	var fs [2]*schema.Fragment
	for dir, c := range interfaceColumns {
		if fs[dir], err = s.NewFragment(func(fm *schema.FlowMessage) {
			fm.AppendString(c.name, i.Name)
			fm.AppendString(c.description, i.Description)
			fm.AppendUint(c.speed, uint64(i.Speed))
			fm.AppendString(c.provider, i.Provider)
			fm.AppendString(c.connectivity, i.Connectivity)
			fm.AppendUint(c.boundary, boundary)
		}); err != nil {
			return nil, err
		}
	}
	return &interfaceInfo{in: fs[0], out: fs[1]}, nil
}

// Enrich appends the exporter's and the flow's interfaces' columns. Columns the decoder
// already set (for example interface names an sFlow agent sent) are kept.
func (m *Metadata) Enrich(fm *schema.FlowMessage) {
	e := m.exporter(fm.ExporterAddress)
	if e == nil {
		return
	}
	fm.AppendFragment(e.fragment)
	if i := e.iface(fm.InIf); i != nil {
		fm.AppendFragment(i.in)
	}
	if i := e.iface(fm.OutIf); i != nil {
		fm.AppendFragment(i.out)
	}
}

func (e *exporterInfo) iface(index uint32) *interfaceInfo {
	if index < uint32(len(e.dense)) {
		if i := e.dense[index]; i != nil {
			return i
		}
	} else if i, ok := e.sparse[index]; ok {
		return i
	}
	return e.def
}

// exporter returns the metadata of the exporter at a, from the cache of addresses already
// seen, or by longest prefix match (then cached).
func (m *Metadata) exporter(a netip.Addr) *exporterInfo {
	seen := m.seen.Load()
	if e, ok := seen.get(a); ok {
		return e
	}
	e, _ := m.prefixes.Lookup(a.Unmap())
	if seen.len() < maxSeenExporters {
		m.seenMu.Lock()
		defer m.seenMu.Unlock()
		cur := m.seen.Load()
		if _, ok := cur.get(a); ok || cur.len() >= maxSeenExporters {
			return e // another worker added it, or the cache filled meanwhile
		}
		m.seen.Store(cur.with(a, e))
	}
	return e
}

// FlowEnricher is one enrichment step: it fills fields of a decoded flow.
type FlowEnricher interface {
	Enrich(fm *schema.FlowMessage)
}

// Chain runs enrichment steps in order.
type Chain []FlowEnricher

// Enrich runs every step on fm, and stops at a step that rejects it.
func (c Chain) Enrich(fm *schema.FlowMessage) {
	for _, e := range c {
		e.Enrich(fm)
		if fm.Rejected() {
			return
		}
	}
}
