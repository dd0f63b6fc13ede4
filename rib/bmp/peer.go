package bmp

import (
	"fmt"
	"net/netip"

	"flowzero/rib"
	"flowzero/rib/bgp"
)

// sessionKey identifies a monitored BGP session within one BMP session: the RFC 7854 §4.2
// fields that tell peers apart. A router sends one peer up and one peer down per BGP session,
// whichever Adj-RIB-In views it monitors.
type sessionKey struct {
	typ  PeerType
	rd   RD
	addr netip.Addr
	as   uint32
}

// peerKey identifies one Adj-RIB-In view (pre- or post-policy) of a monitored BGP session.
type peerKey struct {
	sessionKey
	postPolicy bool
}

// negotiated is what a monitored BGP session agreed in its OPEN messages (RFC 7854 §4.10),
// shared by both views of the session: post-policy routes are parsed as pre-policy ones.
type negotiated struct {
	addPath bgp.FamilySet
}

// peer is the state of one view of a monitored BGP peer.
type peer struct {
	key     peerKey
	label   string
	metrics peerMetrics
	bgp     *negotiated
	// ribPeers are the RIB peers holding this peer's routes: one per route distinguisher,
	// since the RIB keys a path by (peer, prefix, path ID) and VPN routes of several RDs may
	// share a prefix. The first entry is the peer's own distinguisher.
	ribPeers []ribPeer
}

type ribPeer struct {
	rd RD
	id rib.PeerID
}

func keyOf(h *PeerHeader) peerKey {
	return peerKey{
		sessionKey: sessionKey{typ: h.Type, rd: h.Distinguisher, addr: h.Address, as: h.AS},
		postPolicy: h.Type != PeerTypeLocalRIB && h.PostPolicy(),
	}
}

// peerLabel names a peer in metrics: its address, qualified by the RD of a VRF peer and by
// the view when both are collected.
func (c *session) peerLabel(k peerKey) string {
	s := k.addr.String()
	switch k.typ {
	case PeerTypeRD:
		s += "%" + k.rd.String()
	case PeerTypeLocalRIB:
		s = "loc-rib"
		if k.rd != 0 {
			s += "%" + k.rd.String()
		}
	}
	if k.postPolicy {
		s += " post-policy"
	}
	return s
}

// lookupPeer returns the peer of a per-peer header, nil if unknown.
func (c *session) lookupPeer(h *PeerHeader) *peer {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	return c.peers[keyOf(h)]
}

// getPeer returns the peer of a per-peer header, creating it when route monitoring arrives
// without a peer up (a missed message: the routes are still good).
func (c *session) getPeer(h *PeerHeader) *peer {
	k := keyOf(h)
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	if p := c.peers[k]; p != nil {
		return p
	}
	return c.addPeerLocked(k)
}

func (c *session) addPeerLocked(k peerKey) *peer {
	p := &peer{key: k, label: c.peerLabel(k), bgp: c.negotiatedLocked(k.sessionKey)}
	p.metrics = c.srv.metrics.forPeer(c.routerStr, p.label)
	c.peers[k] = p
	c.metrics.peers.Inc()
	return p
}

// negotiatedLocked returns the negotiated state of a BGP session, empty until its peer up.
func (c *session) negotiatedLocked(k sessionKey) *negotiated {
	n := c.negotiated[k]
	if n == nil {
		n = new(negotiated)
		c.negotiated[k] = n
	}
	return n
}

// ribPeer returns the RIB peer holding routes of p with distinguisher rd.
func (c *session) ribPeer(tx *rib.Tx, p *peer, rd RD) rib.PeerID {
	for _, rp := range p.ribPeers {
		if rp.rd == rd {
			return rp.id
		}
	}
	k := rib.PeerKey{
		Router:        c.router.Addr(),
		Distinguisher: uint64(rd),
		Address:       p.key.addr,
		AS:            p.key.as,
		PostPolicy:    p.key.postPolicy,
	}
	id := tx.Peer(k, netip.Addr{})
	c.srv.adopt(tx, c, id)
	p.ribPeers = append(p.ribPeers, ribPeer{rd: rd, id: id})
	return id
}

// peerUp handles a peer up notification (RFC 7854 §4.10): the Add-Path families the session
// negotiated decide how its NLRI are parsed, in both Adj-RIB-In views.
func (c *session) peerUp(h *PeerHeader, body []byte) error {
	pu, err := ParsePeerUp(body, h.Flags&PeerFlagV != 0)
	if err != nil {
		return err
	}
	ap, err := NegotiatedAddPath(pu.SentOpen, pu.ReceivedOpen, h.AdjRIBOut())
	if err != nil {
		return err
	}
	k := keyOf(h)
	c.peersMu.Lock()
	c.negotiatedLocked(k.sessionKey).addPath = ap
	p := c.peers[k]
	if p == nil {
		p = c.addPeerLocked(k)
	}
	c.peersMu.Unlock()
	c.srv.log.Debug("BMP peer up", "router", c.router.String(), "peer", p.label, "as", h.AS)
	return nil
}

// peerDown removes every route of the BGP session at once (RFC 7854 §4.9): both Adj-RIB-In
// views, since the router sends a single peer down whatever the views it monitors, and what
// closed sessions of the same router still keep for that peer.
func (c *session) peerDown(h *PeerHeader) {
	sk := keyOf(h).sessionKey
	c.peersMu.Lock()
	ps := c.detachLocked(sk)
	c.peersMu.Unlock()
	if len(ps) > 0 {
		c.dropRoutes(ps, "down")
	}
	c.srv.peerDownStale(c, sk)
}

// detachLocked forgets both views of a BGP session and returns those there were.
func (c *session) detachLocked(sk sessionKey) []*peer {
	var ps []*peer
	for _, post := range [2]bool{false, true} {
		k := peerKey{sessionKey: sk, postPolicy: post}
		if p := c.peers[k]; p != nil {
			c.forgetPeerLocked(k, p)
			ps = append(ps, p)
		}
	}
	return ps
}

// detachRIBPeerLocked forgets the views whose routes the RIB holds under the same peer key
// fields as sk (RD, address, AS) and returns them. A session restored from the snapshot
// knows its peers by those fields only, not by the per-peer header's type.
func (c *session) detachRIBPeerLocked(sk sessionKey) []*peer {
	var ps []*peer
	for k, p := range c.peers {
		if k.rd == sk.rd && k.addr == sk.addr && k.as == sk.as {
			c.forgetPeerLocked(k, p)
			ps = append(ps, p)
		}
	}
	return ps
}

// dropRoutes removes the routes of peers already detached from the session. It must not be
// called with peersMu held: the RIB's writer lock is taken first elsewhere (adopt).
func (c *session) dropRoutes(ps []*peer, reason string) {
	tx := c.srv.table.Begin()
	for _, p := range ps {
		for _, rp := range p.ribPeers {
			// Another session of the same router may have taken the RIB peer over.
			if c.srv.release(c, rp.id) {
				tx.RemovePeer(rp.id)
			}
		}
	}
	tx.Commit()
	for _, p := range ps {
		c.srv.metrics.removedPeers.WithLabelValues(c.routerStr, reason).Inc()
		c.srv.log.Info("BMP peer removed", "router", c.router.String(), "peer", p.label, "reason", reason)
	}
}

// forgetPeerLocked drops the peer's state and metrics series (its routes are handled by the
// caller), and the BGP session's negotiated state with its last view.
func (c *session) forgetPeerLocked(k peerKey, p *peer) {
	delete(c.peers, k)
	if c.peers[peerKey{sessionKey: k.sessionKey, postPolicy: !k.postPolicy}] == nil {
		delete(c.negotiated, k.sessionKey)
	}
	c.metrics.peers.Dec()
	for _, v := range []interface {
		DeleteLabelValues(...string) bool
	}{c.srv.metrics.announced, c.srv.metrics.withdrawn, c.srv.metrics.endOfRIB, c.srv.metrics.adjRIBIn, c.srv.metrics.rejected} {
		v.DeleteLabelValues(c.routerStr, p.label)
	}
}

// updateDecoder holds the reusable state of route monitoring decoding, so that an UPDATE
// costs no allocation once warmed up.
type updateDecoder struct {
	upd     bgp.Update
	mpAttrs bgp.Attributes
}

// routeMonitoring applies one route monitoring message (RFC 7854 §4.6) to the RIB.
func (c *session) routeMonitoring(h *PeerHeader, body []byte) error {
	s := c.srv
	if h.AdjRIBOut() {
		s.metrics.ignoredUpdates.WithLabelValues(c.routerStr, "adj-rib-out").Inc()
		return nil
	}
	if h.Type != PeerTypeLocalRIB {
		if (s.cfg.AdjRIBIn == "pre-policy" && h.PostPolicy()) || (s.cfg.AdjRIBIn == "post-policy" && !h.PostPolicy()) {
			s.metrics.ignoredUpdates.WithLabelValues(c.routerStr, "adj-rib-in view").Inc()
			return nil
		}
	}
	// An RD instance peer is a VRF's peer: all its routes are in that VRF (Akvorado keeps or
	// drops them by the peer distinguisher).
	vrfPeer := h.Type == PeerTypeRD
	if vrfPeer && !s.acceptRD(h.Distinguisher) {
		s.metrics.ignoredUpdates.WithLabelValues(c.routerStr, "rd").Inc()
		return nil
	}
	opts := bgp.Options{ASN: bgp.ASN4}
	if h.AS2() {
		opts.ASN = bgp.ASN2
	}
	p := c.getPeer(h)
	opts.AddPath = p.bgp.addPath
	d := &c.update
	if err := d.upd.ParseMessage(body, opts); err != nil {
		return err
	}
	u := &d.upd
	if u.IsEndOfRIB() {
		p.metrics.endOfRIB.Inc()
		return nil
	}
	c.trimAttributes(&u.Attrs)

	tx := s.table.Begin()
	defer tx.Commit()
	var announced, withdrawn int
	// RFC 4271 §4.3: IPv4 unicast withdrawals and announcements outside MP attributes. They
	// carry no RD of their own: the peer distinguisher applies (0:0 for a global peer).
	if vrfPeer || s.acceptRD(0) {
		id := c.ribPeer(tx, p, h.Distinguisher)
		r := u.WithdrawnReader()
		for pfx, ok := r.Next(); ok; pfx, ok = r.Next() {
			tx.Withdraw(id, pfx.Prefix, pfx.PathID)
			withdrawn++
		}
		if err := r.Err(); err != nil {
			return c.applied(p, announced, withdrawn, err)
		}
		if len(u.NLRI) > 0 {
			// One UPDATE, one attribute set: interned once for all its prefixes.
			set := tx.Intern(&u.Attrs)
			r = u.NLRIReader()
			for pfx, ok := r.Next(); ok; pfx, ok = r.Next() {
				tx.AddSet(id, pfx.Prefix, pfx.PathID, set)
				announced++
			}
			tx.Release(set)
		}
		if err := r.Err(); err != nil {
			return c.applied(p, announced, withdrawn, err)
		}
	}
	// RFC 4760: multiprotocol withdrawals and announcements.
	if u.MPUnreach.Present {
		n, err := c.applyMP(tx, h, p, u.MPUnreach.AFI, u.MPUnreach.SAFI, u.MPUnreach.Withdrawn, nil)
		withdrawn += n
		if err != nil {
			return c.applied(p, announced, withdrawn, err)
		}
	}
	if u.MPReach.Present {
		d.mpAttrs = u.MPAttributes()
		n, err := c.applyMP(tx, h, p, u.MPReach.AFI, u.MPReach.SAFI, u.MPReach.NLRI, &d.mpAttrs)
		announced += n
		if err != nil {
			return c.applied(p, announced, withdrawn, err)
		}
	}
	return c.applied(p, announced, withdrawn, nil)
}

func (c *session) applied(p *peer, announced, withdrawn int, err error) error {
	p.metrics.announced.Add(float64(announced))
	p.metrics.withdrawn.Add(float64(withdrawn))
	return err
}

// applyMP applies the NLRI of one MP_REACH_NLRI (attrs set) or MP_UNREACH_NLRI (attrs nil).
// Families the RIB does not hold (VPLS, flowspec...) are counted and skipped; EVPN IP prefix
// routes (RFC 9136) are kept like Akvorado does.
func (c *session) applyMP(tx *rib.Tx, h *PeerHeader, p *peer, afi uint16, safi uint8, nlri []byte, attrs *bgp.Attributes) (int, error) {
	var ap mpApply
	ap.init(c, tx, h, p, attrs)
	defer ap.done()
	if rf, ok := bgp.FamilyOf(afi, safi); ok && rf != bgp.FamilyIPv4Multicast && rf != bgp.FamilyIPv6Multicast {
		vpn := rf == bgp.FamilyIPv4VPN || rf == bgp.FamilyIPv6VPN
		r := bgp.NewNLRIReader(nlri, rf, p.bgp.addPath.Has(rf))
		for pfx, ok := r.Next(); ok; pfx, ok = r.Next() {
			rd := h.Distinguisher
			if vpn {
				rd = RD(pfx.RD)
			}
			ap.apply(pfx, rd)
		}
		return ap.n, r.Err()
	}
	if NewFamily(afi, safi) == FamilyL2VPNEVPN {
		r := evpnReader{b: nlri}
		for pfx, ok := r.Next(); ok; pfx, ok = r.Next() {
			ap.apply(pfx, RD(pfx.RD))
		}
		if r.skipped > 0 {
			c.srv.metrics.ignoredNLRI.WithLabelValues(c.routerStr, "l2vpn-evpn-non-ip").Add(float64(r.skipped))
		}
		return ap.n, r.err
	}
	c.srv.metrics.ignoredNLRI.WithLabelValues(c.routerStr, NewFamily(afi, safi).String()).Inc()
	return 0, nil
}

// mpApply applies multiprotocol NLRI one by one, interning the attributes once.
type mpApply struct {
	c     *session
	tx    *rib.Tx
	h     *PeerHeader
	p     *peer
	attrs *bgp.Attributes // nil for withdrawals
	set   *rib.AttrSet
	n     int
}

func (a *mpApply) init(c *session, tx *rib.Tx, h *PeerHeader, p *peer, attrs *bgp.Attributes) {
	*a = mpApply{c: c, tx: tx, h: h, p: p, attrs: attrs}
}

func (a *mpApply) apply(pfx bgp.Prefix, rd RD) {
	vrfPeer := a.h.Type == PeerTypeRD
	if !vrfPeer && !a.c.srv.acceptRD(rd) {
		return
	}
	a.n++
	if vrfPeer {
		// A VRF peer's routes belong to its VRF whatever the NLRI says.
		rd = a.h.Distinguisher
	}
	id := a.c.ribPeer(a.tx, a.p, rd)
	if a.attrs == nil {
		a.tx.Withdraw(id, pfx.Prefix, pfx.PathID)
		return
	}
	if a.set == nil {
		a.set = a.tx.Intern(a.attrs)
	}
	a.tx.AddSet(id, pfx.Prefix, pfx.PathID, a.set)
}

func (a *mpApply) done() {
	if a.set != nil {
		a.tx.Release(a.set)
	}
}

// trimAttributes drops what the configuration does not collect, which also lets the RIB
// intern more routes into the same attribute set.
func (c *session) trimAttributes(a *bgp.Attributes) {
	if !c.srv.cfg.CollectASPaths && len(a.ASPath) > 1 {
		a.ASPath = append(a.ASPath[:0], a.ASPath[len(a.ASPath)-1])
	}
	if !c.srv.cfg.CollectCommunities {
		a.Communities = a.Communities[:0]
		a.LargeCommunities = a.LargeCommunities[:0]
	}
}

// String describes a peer for logs.
func (p *peer) String() string { return fmt.Sprintf("%s AS%d", p.label, p.key.as) }
