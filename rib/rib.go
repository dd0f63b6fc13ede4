// Package rib is flowzero's in-process routing table: IPv4 and IPv6 longest-prefix match over
// full Internet tables from several peers, fed by MRT dumps (rib/mrt) and BMP (rib/bmp), read
// by the enrichment of every flow.
//
// # Design
//
// Two tries. The lookup trie (github.com/gaissmai/bart's Fast: an 8-bit-stride multibit trie
// with popcount-compressed ART nodes and a per-node child rank cache) maps each prefix to the
// one Route selected for enrichment, stored inline in the node (24 bytes: attributes pointer,
// origin AS, peer, prefix length), so a lookup is one atomic pointer load plus bart's walk: no
// lock, no allocation, and the origin AS comes with the route without touching the
// attributes. The writer trie (bart's Table, the memory-lean variant) maps each prefix to its
// paths, a slice of 12-byte (attribute set index, path ID, peer) entries without pointers
// (not scanned by the garbage collector); only writers read it.
//
// Why bart and not a structure of our own: on a full table a lookup costs its cache and TLB
// misses, not the trie's arithmetic, and an 8-bit stride reaches a /24 in three node visits.
// bart also gives persistent (path-copying) updates, which the concurrency below is built on.
// What flowzero adds is where the data sits: the origin AS inline in the route (two cache
// misses fewer than reading it through the attributes) and, after a bulk change such as a
// load, one copy of the trie so that its nodes sit together in traversal order. Fast rather
// than Table for its faster level traversal. docs/design/rib.md has the alternatives (bart's
// Table, gobgp) with their figures and the benchmarks that measure them.
//
// For IPv4, when the table is large (a full table), a DIR-24-8 array beside the trie answers
// lookups (flat.go): one or two entries and the route, where the trie walks three or four
// nodes, each a likely cache miss for the addresses of a flow stream's long tail. It costs
// 64 MiB (Configuration.IPv4Array switches it off). For IPv6, fixed 8-bit tables below a
// 24-bit array do the same down to /48 (flat6.go, Configuration.IPv6Array).
//
// Concurrency is RCU-style: readers load the current lookup trie from an atomic pointer and
// never block. Writers serialize on a mutex inside a Tx; a Tx modifies a private version of the
// lookup trie (bart's persistent insert/delete copy only the nodes on the path, and a Tx that
// changes many prefixes clones the trie once and then updates it in place) and publishes it
// with one atomic store at Commit, so readers of the trie see a batch all at once. The IPv4
// array is then updated in place, before Commit returns: each IPv4 lookup sees its address's
// route before or after the commit, but two lookups during the commit may see one each.
//
// Attribute sets are interned: identical sets (same AS path, communities, large communities,
// next hop, origin, local preference, MED) are stored once and reference-counted by the
// paths that use them, so they are freed when the last path goes away.
//
// # Selection
//
// Every prefix may have paths from several peers (and several paths per peer with Add-Path).
// The route used for enrichment is chosen by Configuration.Selection:
//   - "first": the path of the peer registered first (lowest PeerID, for MRT the peer index
//     order of the dump), then the lowest path ID;
//   - "best": a subset of the BGP decision process (RFC 4271 §9.1.2.2): highest LOCAL_PREF
//     (100 when absent), shortest AS path (an AS_SET counts as one), lowest ORIGIN, lowest MED
//     (0 when absent) compared across all peers (always-compare-med), then lowest peer address
//     and lowest path ID. IGP cost, eBGP over iBGP and router ID steps are not applied;
//   - "peer": the paths of the peer named by Configuration.Peer (its address), falling back to
//     "first" for prefixes that peer does not announce.
package rib

import (
	"iter"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/gaissmai/bart"

	"flowzero/internal/health"
	"flowzero/rib/bgp"
)

// PeerID numbers the peers of a RIB in registration order, from 0.
type PeerID uint32

// PeerKey identifies a BGP peer across sources. MRT dumps set Address, AS and BGPID; BMP also
// sets Router (the monitored router) and the peer distinguisher, and PostPolicy for the
// post-policy Adj-RIB-In.
type PeerKey struct {
	Router        netip.Addr
	Distinguisher uint64
	Address       netip.Addr
	AS            uint32
	PostPolicy    bool
}

// PeerInfo describes a registered peer.
type PeerInfo struct {
	PeerKey
	ID    PeerID
	BGPID netip.Addr
	// Routes is the number of paths the peer currently has in the table.
	Routes int
}

// Route is what a lookup returns: the route selected for enrichment of the longest matching
// prefix. Attrs is interned and read-only; it stays valid after later updates.
type Route struct {
	Attrs *bgp.Attributes
	// OriginAS is Attrs.OriginAS(), kept in the trie with the route: the one attribute every
	// flow needs (SrcAS, DstAS) is read without the two cache misses of Attrs and its AS path.
	OriginAS uint32
	Peer     PeerID
	// Bits is the length of the matched prefix.
	Bits uint8
}

// Prefix returns the matched prefix for the address that was looked up.
func (r Route) Prefix(a netip.Addr) netip.Prefix {
	p, _ := a.Unmap().Prefix(int(r.Bits))
	return p
}

// path is one path of a prefix in the writer trie.
type path struct {
	set    uint32 // interner.sets index
	pathID uint32
	peer   PeerID
}

type peerState struct {
	info  PeerInfo
	named bool // the peer Configuration.Peer names
}

// RIB is the routing table. Lookup is safe from any goroutine concurrently with updates, which
// go through Begin/Tx (or the one-change helpers Add, Withdraw, RemovePeer).
type RIB struct {
	cur atomic.Pointer[bart.Fast[Route]]
	// flat answers IPv4 lookups in place of cur when the table is large (flat.go); nil
	// otherwise. Commit keeps it equal to cur.
	flat atomic.Pointer[flat4]
	// flat6 answers IPv6 lookups in place of cur when the table is large (flat6.go), but for
	// the /48s holding longer prefixes; nil otherwise. Commit keeps it equal to cur.
	flat6 atomic.Pointer[flat6]
	// peerAS is the AS of each peer by ID, published with the trie so that PeerAS knows the
	// peer of every route a lookup can return.
	peerAS atomic.Pointer[[]uint32]

	mu       sync.Mutex // serializes writers
	paths    *bart.Table[[]path]
	peers    []peerState
	peerIdx  map[PeerKey]PeerID
	interner interner
	newPeers bool // peers registered since peerAS was published
	sel      Selection
	selPeer  netip.Addr
	routes   int

	stats counters
	// sizes as of the last commit, read by Stats without the writer lock
	pubRoutes, pubSets, pubPeers atomic.Int64
	cfg                          Configuration

	// component state (New/Start/Stop)
	stop chan struct{}
	wg   sync.WaitGroup
	// health is degraded while the last snapshot load or save failed.
	health *health.State
}

// NewTable returns an empty RIB with the given selection (Configuration.Peer is used for
// SelectPeer), without metrics or snapshots; New wraps it into a component.
func NewTable(cfg Configuration) *RIB {
	r := &RIB{
		paths:   new(bart.Table[[]path]),
		peerIdx: make(map[PeerKey]PeerID),
		cfg:     cfg,
		health:  health.NewState(nil),
	}
	r.sel, _ = parseSelection(cfg.Selection)
	if cfg.Peer != "" {
		r.selPeer, _ = netip.ParseAddr(cfg.Peer)
	}
	r.interner.init()
	r.cur.Store(new(bart.Fast[Route]))
	return r
}

// Lookup returns the route selected for the longest prefix containing a. It never blocks and
// never allocates. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d, as some decoders store every
// address) are looked up as IPv4.
func (r *RIB) Lookup(a netip.Addr) (Route, bool) {
	a = a.Unmap()
	if a.Is4() {
		if f := r.flat.Load(); f != nil {
			return f.lookup(a)
		}
	} else if f := r.flat6.Load(); f != nil {
		if rt, ok, inTrie := f.lookup(a); !inTrie {
			return rt, ok
		}
	}
	return r.cur.Load().Lookup(a)
}

// PeerAS returns the AS number of a peer (0 for an unknown ID). Like Lookup, it never blocks
// and never allocates: enrichment takes the origin AS of a route with an empty AS path (a
// route originated in the peer's own AS, typically iBGP) from it.
func (r *RIB) PeerAS(id PeerID) uint32 {
	if as := r.peerAS.Load(); as != nil && int(id) < len(*as) {
		return (*as)[id]
	}
	return 0
}

// publishPeersLocked publishes the peers' AS numbers for PeerAS when peers were registered.
func (r *RIB) publishPeersLocked() {
	if !r.newPeers {
		return
	}
	as := make([]uint32, len(r.peers))
	for i := range r.peers {
		as[i] = r.peers[i].info.AS
	}
	r.peerAS.Store(&as)
	r.newPeers = false
}

// LookupPrefix returns the selected route of the longest prefix containing p.
func (r *RIB) LookupPrefix(p netip.Prefix) (Route, bool) {
	return r.cur.Load().LookupPrefix(p)
}

// All iterates over the prefixes and selected routes of the table as published when All is
// called (a consistent view; updates made meanwhile are not seen).
func (r *RIB) All() iter.Seq2[netip.Prefix, Route] {
	return r.cur.Load().All()
}

// PathInfo is one path of a prefix, as returned by Paths.
type PathInfo struct {
	Prefix   netip.Prefix
	Peer     PeerID
	PathID   uint32
	Attrs    *bgp.Attributes
	Selected bool
}

// Paths returns every path of the longest prefix containing a (for diagnostics and the CLI;
// it takes the writer lock, so never call it while holding a Tx, and allocates).
func (r *RIB) Paths(a netip.Addr) []PathInfo {
	sel, ok := r.Lookup(a)
	if !ok {
		return nil
	}
	pfx := sel.Prefix(a)
	r.mu.Lock()
	defer r.mu.Unlock()
	ps, _ := r.paths.Get(pfx)
	out := make([]PathInfo, 0, len(ps))
	for _, p := range ps {
		out = append(out, PathInfo{
			Prefix: pfx, Peer: p.peer, PathID: p.pathID, Attrs: &r.set(p).Attributes,
			Selected: p.peer == sel.Peer && &r.set(p).Attributes == sel.Attrs,
		})
	}
	return out
}

// Peers returns the registered peers (it takes the writer lock: not while holding a Tx).
func (r *RIB) Peers() []PeerInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PeerInfo, len(r.peers))
	for i := range r.peers {
		out[i] = r.peers[i].info
	}
	return out
}

// Stats are the table's sizes.
type Stats struct {
	Prefixes4, Prefixes6 int
	Routes               int // paths over all prefixes and peers
	AttributeSets        int // distinct interned attribute sets
	Peers                int
}

// Stats returns the sizes as of the last commit. It does not wait for writers.
func (r *RIB) Stats() Stats {
	t := r.cur.Load()
	return Stats{
		Prefixes4: t.Size4(), Prefixes6: t.Size6(), Routes: int(r.pubRoutes.Load()),
		AttributeSets: int(r.pubSets.Load()), Peers: int(r.pubPeers.Load()),
	}
}

// Peer returns the ID of the peer with key k, registering it (with BGP identifier bgpID, which
// may be the zero Addr) when new. Inside a transaction, use Tx.Peer.
func (r *RIB) Peer(k PeerKey, bgpID netip.Addr) PeerID {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.peerLocked(k, bgpID)
	r.pubPeers.Store(int64(len(r.peers)))
	r.publishPeersLocked()
	return id
}

func (r *RIB) peerLocked(k PeerKey, bgpID netip.Addr) PeerID {
	if id, ok := r.peerIdx[k]; ok {
		if bgpID.IsValid() {
			r.peers[id].info.BGPID = bgpID
		}
		return id
	}
	id := PeerID(len(r.peers))
	r.peers = append(r.peers, peerState{
		info:  PeerInfo{PeerKey: k, ID: id, BGPID: bgpID},
		named: r.selPeer.IsValid() && k.Address == r.selPeer,
	})
	r.peerIdx[k] = id
	r.newPeers = true
	return id
}

// set returns the attribute set of a path.
func (r *RIB) set(p path) *AttrSet { return r.interner.sets[p.set] }

// Add adds or replaces one path in its own transaction (see Tx.Add).
func (r *RIB) Add(peer PeerID, p netip.Prefix, pathID uint32, a *bgp.Attributes) {
	tx := r.Begin()
	tx.Add(peer, p, pathID, a)
	tx.Commit()
}

// Withdraw removes one path in its own transaction (see Tx.Withdraw).
func (r *RIB) Withdraw(peer PeerID, p netip.Prefix, pathID uint32) {
	tx := r.Begin()
	tx.Withdraw(peer, p, pathID)
	tx.Commit()
}

// RemovePeer removes every path of a peer in its own transaction (see Tx.RemovePeer).
func (r *RIB) RemovePeer(peer PeerID) {
	tx := r.Begin()
	tx.RemovePeer(peer)
	tx.Commit()
}

// cloneThreshold is the number of lookup-trie changes after which a Tx stops path-copying
// and clones the trie once to update it in place.
const cloneThreshold = 1 << 14

// Tx is a batch of changes by one writer. Readers keep seeing the previous table until Commit.
// A Tx holds the writer lock: keep it short (one BMP message, a few thousand MRT records) and
// always Commit.
type Tx struct {
	r *RIB
	// counted here and added to the RIB's atomic counters at Commit
	adds, withdraws uint64
	next            *bart.Fast[Route]
	changes         int
	owned           bool
	done            bool
	// the prefixes whose route changed, for RIB.flat and RIB.flat6
	flat4Changes, flat6Changes flatChanges
}

// Begin starts a transaction; it waits for the previous writer to commit.
func (r *RIB) Begin() *Tx {
	r.mu.Lock()
	next := r.cur.Load()
	if next.Size() == 0 {
		// Nothing to share with readers: build a new trie in place (MRT loads, first BMP dump).
		return &Tx{r: r, next: new(bart.Fast[Route]), owned: true}
	}
	return &Tx{r: r, next: next}
}

// Commit publishes the changes and releases the writer lock.
func (tx *Tx) Commit() {
	if tx.done {
		return
	}
	tx.done = true
	r := tx.r
	r.stats.adds.Add(tx.adds)
	r.stats.withdraws.Add(tx.withdraws)
	r.pubRoutes.Store(int64(r.routes))
	r.pubSets.Store(int64(r.interner.len()))
	r.pubPeers.Store(int64(len(r.peers)))
	r.publishPeersLocked() // before the trie: a route is never seen before its peer's AS
	if tx.owned && tx.changes >= compactThreshold {
		// A bulk change (MRT load, snapshot, full BMP dump) built the trie among millions of
		// other allocations; a copy lays its nodes out together, in traversal order, which
		// makes every later lookup miss the cache and TLB less.
		tx.next = tx.next.Clone()
	}
	r.cur.Store(tx.next)
	r.commitFlat(tx)
	tx.r.mu.Unlock()
}

// flatMaxChanges is the number of changed prefixes of a family past which a commit rebuilds
// its flat array rather than updating their ranges.
const flatMaxChanges = 1 << 15

// flatChanges are the prefixes of one family whose route changed in a Tx, or rebuild when
// they are too many (or too short) to update its flat array in place.
type flatChanges struct {
	prefixes []netip.Prefix
	rebuild  bool
}

// note records a change of p's route; a prefix shorter than rebuildBits rebuilds the array.
func (c *flatChanges) note(p netip.Prefix, rebuildBits int) {
	if c.rebuild {
		return
	}
	if p.Bits() < rebuildBits || len(c.prefixes) >= flatMaxChanges {
		c.rebuild, c.prefixes = true, nil
		return
	}
	c.prefixes = append(c.prefixes, p)
}

// noteChange records a change of p's route for the flat arrays.
func (tx *Tx) noteChange(p netip.Prefix) {
	switch {
	case p.Addr().Is4() && tx.r.cfg.IPv4Array:
		tx.flat4Changes.note(p, flatRebuildBits)
	case p.Addr().Is6() && tx.r.cfg.IPv6Array:
		tx.flat6Changes.note(p, flat6RebuildBits)
	}
}

// commitFlat brings the flat arrays to the committed trie.
func (r *RIB) commitFlat(tx *Tx) {
	if r.cfg.IPv4Array {
		commitArray(&r.flat, tx.next, tx.next.Size4() <= flatMinPrefixes, tx.flat4Changes, newFlat4)
	}
	if r.cfg.IPv6Array {
		commitArray(&r.flat6, tx.next, tx.next.Size6() <= flat6MinPrefixes, tx.flat6Changes, newFlat6)
	}
}

// flatArray is what commitArray needs of flat4 and flat6.
type flatArray[F any] interface {
	*F
	update(t *bart.Fast[Route], p netip.Prefix)
	worn() bool
}

// commitArray brings the flat array in slot to the committed trie t: built when the table
// becomes large (or the changes are many), dropped when it becomes small, updated otherwise.
func commitArray[F any, P flatArray[F]](slot *atomic.Pointer[F], t *bart.Fast[Route], small bool, c flatChanges, build func(*bart.Fast[Route]) P) {
	f := P(slot.Load())
	switch {
	case small:
		if f != nil {
			slot.Store(nil)
		}
	case f == nil || c.rebuild:
		slot.Store(build(t))
	case len(c.prefixes) > 0:
		for _, p := range c.prefixes {
			f.update(t, p)
		}
		if f.worn() {
			slot.Store(build(t))
		}
	}
}

// compactThreshold is the number of trie changes of a Tx past which Commit compacts the trie.
const compactThreshold = 1 << 17

// Peer is RIB.Peer inside a transaction.
func (tx *Tx) Peer(k PeerKey, bgpID netip.Addr) PeerID { return tx.r.peerLocked(k, bgpID) }

// Add adds the path (peer, pathID) of prefix p with attributes a, replacing the previous path
// with the same peer and path ID (an implicit withdraw, RFC 4271 §3.1). a is copied (interned):
// the caller may reuse it. p must be masked (bgp.NLRIReader returns masked prefixes). To add
// many prefixes with the same attributes (one UPDATE), Intern once and use AddSet.
func (tx *Tx) Add(peer PeerID, p netip.Prefix, pathID uint32, a *bgp.Attributes) {
	s := tx.Intern(a)
	tx.AddSet(peer, p, pathID, s)
	tx.Release(s)
}

// Attrs returns the interned attributes (read-only).
func (s *AttrSet) Attrs() *bgp.Attributes { return &s.Attributes }

// Intern returns the interned copy of a, holding a reference for the caller.
func (tx *Tx) Intern(a *bgp.Attributes) *AttrSet { return tx.r.interner.intern(a, false) }

// InternOwned is Intern for attributes whose slices the caller gives away (a decoder's own
// copy): they are kept instead of copied when the set is new.
func (tx *Tx) InternOwned(a *bgp.Attributes) *AttrSet { return tx.r.interner.intern(a, true) }

// Hold takes one more reference on s for the caller (to keep it in a cache).
func (tx *Tx) Hold(s *AttrSet) { tx.r.interner.refs[s.id]++ }

// Release drops the caller's reference on s.
func (tx *Tx) Release(s *AttrSet) { tx.r.interner.release(s) }

// AddSet is Add with an interned attribute set (s stays held by the caller).
func (tx *Tx) AddSet(peer PeerID, p netip.Prefix, pathID uint32, s *AttrSet) {
	r := tx.r
	if int(peer) >= len(r.peers) {
		return
	}
	ps, _ := r.paths.Get(p)
	tx.adds++
	if ps, changed := r.addPath(ps, peer, pathID, s.id); changed {
		r.paths.Insert(p, ps)
		tx.reselect(p, ps)
	}
}

// SetID numbers an interned attribute set (AttrSet.ID). It names the set only while a
// reference on it is held: the number of a released set is reused.
type SetID uint32

// ID returns the set's number.
func (s *AttrSet) ID() SetID { return SetID(s.id) }

// NewPath is one path for Tx.AddPaths. Set is a number rather than the *AttrSet so that a
// bulk loader that kept the numbers of its sets does not touch each set's memory per route.
type NewPath struct {
	Peer   PeerID
	PathID uint32
	Set    SetID
}

// AddPaths adds several paths of one prefix (an MRT RIB record) with one trie update.
func (tx *Tx) AddPaths(p netip.Prefix, paths []NewPath) {
	r := tx.r
	ps, _ := r.paths.Get(p)
	if cap(ps)-len(ps) < len(paths) {
		ps = append(make([]path, 0, len(ps)+len(paths)), ps...)
	}
	any := false
	for _, np := range paths {
		if int(np.Peer) >= len(r.peers) || int(np.Set) >= len(r.interner.sets) || r.interner.refs[np.Set] <= 0 {
			continue
		}
		var changed bool
		ps, changed = r.addPath(ps, np.Peer, np.PathID, uint32(np.Set))
		tx.adds++
		any = any || changed
	}
	if any {
		r.paths.Insert(p, ps)
		tx.reselect(p, ps)
	}
}

// addPath adds or replaces (peer, pathID) in ps with a new reference on set id.
func (r *RIB) addPath(ps []path, peer PeerID, pathID uint32, id uint32) ([]path, bool) {
	for i := range ps {
		if ps[i].peer == peer && ps[i].pathID == pathID {
			if ps[i].set == id {
				return ps, false
			}
			r.interner.refs[id]++
			r.interner.releaseID(ps[i].set)
			ps[i].set = id
			return ps, true
		}
	}
	r.interner.refs[id]++
	if len(ps) == cap(ps) {
		// Grow by one: most prefixes have as many paths as peers, and each slot is 16 bytes.
		ps = append(make([]path, 0, len(ps)+1), ps...)
	}
	ps = append(ps, path{set: id, pathID: pathID, peer: peer})
	r.routes++
	r.peers[peer].info.Routes++
	return ps, true
}

// Withdraw removes the path (peer, pathID) of prefix p, if present.
func (tx *Tx) Withdraw(peer PeerID, p netip.Prefix, pathID uint32) {
	r := tx.r
	ps, ok := r.paths.Get(p)
	if !ok {
		return
	}
	for i := range ps {
		if ps[i].peer == peer && ps[i].pathID == pathID {
			r.interner.releaseID(ps[i].set)
			ps = append(ps[:i], ps[i+1:]...)
			r.routes--
			r.peers[peer].info.Routes--
			tx.withdraws++
			if len(ps) == 0 {
				r.paths.Delete(p)
			} else {
				r.paths.Insert(p, ps)
			}
			tx.reselect(p, ps)
			return
		}
	}
}

// RemovePeer removes every path of peer (BMP peer down, end of an MRT source). The peer stays
// registered with its ID.
func (tx *Tx) RemovePeer(peer PeerID) {
	r := tx.r
	if int(peer) >= len(r.peers) || r.peers[peer].info.Routes == 0 {
		return
	}
	type change struct {
		p  netip.Prefix
		ps []path
	}
	var changes []change
	for p, ps := range r.paths.All() {
		for _, x := range ps {
			if x.peer == peer {
				changes = append(changes, change{p, ps})
				break
			}
		}
	}
	for _, c := range changes {
		ps := c.ps[:0]
		for _, x := range c.ps {
			if x.peer == peer {
				r.interner.releaseID(x.set)
				r.routes--
				continue
			}
			ps = append(ps, x)
		}
		if len(ps) == 0 {
			r.paths.Delete(c.p)
		} else {
			r.paths.Insert(c.p, ps)
		}
		tx.reselect(c.p, ps)
	}
	r.peers[peer].info.Routes = 0
	r.stats.peerRemovals.Add(1)
}

// reselect recomputes the selected route of p from its paths and updates the lookup trie when
// it changed.
func (tx *Tx) reselect(p netip.Prefix, ps []path) {
	r := tx.r
	if len(ps) == 0 {
		if _, ok := tx.next.Get(p); ok {
			tx.mutate(p, Route{}, true)
		}
		return
	}
	best := r.selectPath(ps)
	id := ps[best].set
	nr := Route{Attrs: &r.interner.sets[id].Attributes, OriginAS: r.interner.origin[id], Peer: ps[best].peer, Bits: uint8(p.Bits())}
	if tx.owned {
		// Private trie: overwrite without looking first.
		tx.changes++
		tx.next.Insert(p, nr)
		tx.noteChange(p)
		return
	}
	if cur, ok := tx.next.Get(p); ok && cur == nr {
		return
	}
	tx.mutate(p, nr, false)
}

func (tx *Tx) mutate(p netip.Prefix, rt Route, del bool) {
	tx.changes++
	tx.noteChange(p)
	if !tx.owned && tx.changes > cloneThreshold {
		tx.next = tx.next.Clone()
		tx.owned = true
	}
	switch {
	case tx.owned && del:
		tx.next.Delete(p)
	case tx.owned:
		tx.next.Insert(p, rt)
	case del:
		tx.next = tx.next.DeletePersist(p)
	default:
		tx.next = tx.next.InsertPersist(p, rt)
	}
}
