// Package enrich fills each flow's routing columns from the routing component's lookups
// (flowzero/routing): SrcAS, DstAS, SrcNetMask, DstNetMask, NextHop, DstASPath (from which
// ClickHouse materializes Dst1stAS, Dst2ndAS and Dst3rdAS) and the source and destination
// standard and large communities.
//
// # Design
//
// The collector calls Enrich between decoding and Finalize. It costs at most two lookups
// through routing.Lookup (source and destination address; the RIB answers each with a
// lock-free walk of its current trie), and then plain field assignments: the AS path and
// community slices are not copied but pointed at the RIB's interned, read-only attribute sets,
// which stay valid after the RIB changes. Nothing allocates. Lookups that no enabled column
// needs are skipped, as is everything when no provider uses routing.
//
// Precedence between the exporter's data and the RIB follows Akvorado's providers: an ordered
// list per kind of value, the first provider that gives a value wins (flow, routing,
// flow-except-private, routing-except-default-route...).
//
// Metadata (metadata.go) fills the exporter and interface columns (names, descriptions,
// speeds, classification, boundaries) from static configuration, by exporter address or
// prefix and SNMP interface index. Their values change only with the configuration, so each
// exporter's columns, and each interface's in each direction, are encoded once into a schema
// Fragment; a flow then costs three lookups and three copies instead of encoding up to
// eighteen columns.
//
// Enricher and Metadata are safe for concurrent use by several workers; Chain runs both.
package enrich

import (
	"errors"
	"net/netip"
	"unsafe"

	"flowzero/rib"
	"flowzero/rib/bgp"
	"flowzero/routing"
	"flowzero/schema"
)

// Enricher fills flows from the routing component's lookups.
type Enricher struct {
	routes  routing.Lookup
	cfg     Configuration
	lookSrc bool // a source lookup can change an enabled column
	lookDst bool
}

// New returns an Enricher reading routes for flows of schema s. The configuration is expected
// to be validated (internal/config does it when decoding); New validates it again.
func New(cfg Configuration, routes routing.Lookup, s *schema.Schema) (*Enricher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if routes == nil {
		return nil, errors.New("enrich: no routing lookup")
	}
	e := &Enricher{routes: routes, cfg: cfg}
	usesRIB := false
	for _, p := range cfg.ASNProviders {
		usesRIB = usesRIB || (p >= ASNRouting && p <= ASNRoutingExceptDefaultRoute)
	}
	asnFromRIB := usesRIB
	netFromRIB := false
	for _, p := range cfg.NetProviders {
		netFromRIB = netFromRIB || p >= NetRouting
	}
	attrs := cfg.RoutingAttributes
	on := s.Enabled
	e.lookSrc = (asnFromRIB && on(schema.ColumnSrcAS)) || (netFromRIB && on(schema.ColumnSrcNetMask)) ||
		(attrs && (on(schema.ColumnSrcCommunities) || on(schema.ColumnSrcLargeCommunities)))
	e.lookDst = (asnFromRIB && on(schema.ColumnDstAS)) ||
		(netFromRIB && (on(schema.ColumnDstNetMask) || on(schema.ColumnNextHop))) ||
		(attrs && (on(schema.ColumnDstASPath) || on(schema.ColumnDstCommunities) || on(schema.ColumnDstLargeCommunities)))
	return e, nil
}

// Enrich sets fm's routing fields from the routes according to the providers.
func (e *Enricher) Enrich(fm *schema.FlowMessage) {
	var src, dst rib.Route
	var srcOK, dstOK bool
	if e.lookSrc && fm.SrcAddr.IsValid() {
		src, srcOK = e.routes.Lookup(unmap(fm.SrcAddr))
	}
	if e.lookDst && fm.DstAddr.IsValid() {
		dst, dstOK = e.routes.Lookup(unmap(fm.DstAddr))
	}
	flowSrcMask, flowDstMask := fm.SrcNetMask, fm.DstNetMask
	fm.SrcNetMask = e.netMask(fm.SrcNetMask, src, srcOK)
	fm.DstNetMask = e.netMask(fm.DstNetMask, dst, dstOK)
	fm.NextHop = e.nextHop(fm.NextHop, dst, dstOK)
	fm.SrcAS = e.asn(fm.SrcAS, flowSrcMask, src, srcOK)
	fm.DstAS = e.asn(fm.DstAS, flowDstMask, dst, dstOK)
	if !e.cfg.RoutingAttributes {
		return
	}
	// A default route's attributes are an upstream's, not the destination's.
	if dstOK && dst.Bits > 0 {
		a := dst.Attrs
		if len(fm.DstASPath) == 0 {
			fm.DstASPath = a.ASPath
		}
		if len(fm.DstCommunities) == 0 {
			fm.DstCommunities = a.Communities
		}
		if len(fm.DstLargeCommunities) == 0 {
			fm.DstLargeCommunities = largeCommunities(a.LargeCommunities)
		}
	}
	if srcOK && src.Bits > 0 {
		a := src.Attrs
		if len(fm.SrcCommunities) == 0 {
			fm.SrcCommunities = a.Communities
		}
		if len(fm.SrcLargeCommunities) == 0 {
			fm.SrcLargeCommunities = largeCommunities(a.LargeCommunities)
		}
	}
}

// unmap turns an IPv4-mapped IPv6 address into IPv4, which is how the RIB stores IPv4.
func unmap(a netip.Addr) netip.Addr {
	if a.Is4In6() {
		return a.Unmap()
	}
	return a
}

// asn returns the first non-zero AS number of the providers.
func (e *Enricher) asn(flowAS uint32, flowMask uint8, r rib.Route, ok bool) uint32 {
	for _, p := range e.cfg.ASNProviders {
		var as uint32
		switch p {
		case ASNFlow:
			as = flowAS
		case ASNFlowExceptPrivate:
			if !PrivateAS(flowAS) {
				as = flowAS
			}
		case ASNFlowExceptDefaultRoute:
			if flowMask != 0 {
				as = flowAS
			}
		case ASNRouting:
			if ok {
				as = e.originAS(r)
			}
		case ASNRoutingExceptPrivate:
			if ok {
				if as = e.originAS(r); PrivateAS(as) {
					as = 0
				}
			}
		case ASNRoutingExceptDefaultRoute:
			if ok && r.Bits > 0 {
				as = e.originAS(r)
			}
		}
		if as != 0 {
			return as
		}
	}
	return 0
}

// originAS is the last AS of the route's AS path or, when the path is empty (a route
// originated in the peer's own AS, typically iBGP), the peer's AS, as Akvorado does.
func (e *Enricher) originAS(r rib.Route) uint32 {
	if r.OriginAS != 0 || len(r.Attrs.ASPath) != 0 {
		return r.OriginAS
	}
	return e.routes.PeerAS(r.Peer)
}

// netMask returns the first non-zero prefix length of the providers.
func (e *Enricher) netMask(flowMask uint8, r rib.Route, ok bool) uint8 {
	for _, p := range e.cfg.NetProviders {
		var m uint8
		switch p {
		case NetFlow:
			m = flowMask
		case NetRouting, NetRoutingExceptDefaultRoute:
			if ok {
				m = r.Bits // 0 for a default route either way
			}
		}
		if m != 0 {
			return m
		}
	}
	return 0
}

// nextHop returns the first specified next hop of the providers.
func (e *Enricher) nextHop(flowNH netip.Addr, r rib.Route, ok bool) netip.Addr {
	for _, p := range e.cfg.NetProviders {
		var nh netip.Addr
		switch p {
		case NetFlow:
			nh = flowNH
		case NetRouting:
			if ok {
				nh = r.Attrs.NextHop
			}
		case NetRoutingExceptDefaultRoute:
			if ok && r.Bits > 0 {
				nh = r.Attrs.NextHop
			}
		}
		if nh.IsValid() && !nh.IsUnspecified() {
			return nh
		}
	}
	return flowNH
}

// PrivateAS reports whether as is not a public AS number: 0, AS_TRANS (RFC 6793), the
// documentation ranges (RFC 5398), private use (RFC 6996) and the last ASNs (RFC 7300).
func PrivateAS(as uint32) bool {
	switch {
	case as == 0, as == bgp.ASTrans:
		return true
	case as >= 64496 && as <= 65551:
		return true
	case as >= 4200000000:
		return true
	}
	return false
}

// The two large community types hold the same three uint32 in the same order; the RIB's
// slice is viewed as the schema's without copying.
var _ = [1]struct{}{}[unsafe.Sizeof(bgp.LargeCommunity{})-unsafe.Sizeof(schema.LargeCommunity{})]
var _ = [1]struct{}{}[unsafe.Offsetof(bgp.LargeCommunity{}.LocalData2)-unsafe.Offsetof(schema.LargeCommunity{}.LocalData2)]

func largeCommunities(lcs []bgp.LargeCommunity) []schema.LargeCommunity {
	if len(lcs) == 0 {
		return nil
	}
	return unsafe.Slice((*schema.LargeCommunity)(unsafe.Pointer(unsafe.SliceData(lcs))), len(lcs))
}
