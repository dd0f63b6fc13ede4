package rib

import (
	"fmt"

	"flowzero/rib/bgp"
)

// Selection is how the route used for enrichment is chosen among a prefix's paths.
type Selection uint8

const (
	// SelectFirst takes the path of the first registered peer.
	SelectFirst Selection = iota
	// SelectBest applies the documented subset of the BGP decision process.
	SelectBest
	// SelectPeer takes the path of the peer named in Configuration.Peer, else SelectFirst.
	SelectPeer
)

var selectionNames = [...]string{SelectFirst: "first", SelectBest: "best", SelectPeer: "peer"}

func (s Selection) String() string {
	if int(s) < len(selectionNames) {
		return selectionNames[s]
	}
	return fmt.Sprintf("Selection(%d)", s)
}

func parseSelection(s string) (Selection, error) {
	for i, n := range selectionNames {
		if n == s {
			return Selection(i), nil
		}
	}
	if s == "" {
		return SelectFirst, nil
	}
	return 0, fmt.Errorf("unknown selection %q (want first, best or peer)", s)
}

// selectPath returns the index of the selected path in ps (len(ps) > 0).
func (r *RIB) selectPath(ps []path) int {
	best := 0
	for i := 1; i < len(ps); i++ {
		if r.prefer(&ps[i], &ps[best]) {
			best = i
		}
	}
	return best
}

// prefer reports whether a is preferred to b under the RIB's selection.
func (r *RIB) prefer(a, b *path) bool {
	switch r.sel {
	case SelectPeer:
		na, nb := r.peers[a.peer].named, r.peers[b.peer].named
		if na != nb {
			return na
		}
	case SelectBest:
		if c := compareBest(&r.set(*a).Attributes, &r.set(*b).Attributes); c != 0 {
			return c < 0
		}
		if c := r.peers[a.peer].info.Address.Compare(r.peers[b.peer].info.Address); c != 0 {
			return c < 0
		}
	}
	if a.peer != b.peer {
		return a.peer < b.peer
	}
	return a.pathID < b.pathID
}

// compareBest applies RFC 4271 §9.1.2.2 steps a–c and §9.1.2.1's LOCAL_PREF: it returns -1
// when a is better, 1 when b is, 0 when they tie.
func compareBest(a, b *bgp.Attributes) int {
	lpA, lpB := localPref(a), localPref(b)
	if lpA != lpB {
		return cmpBool(lpA > lpB)
	}
	if a.ASPathLength != b.ASPathLength {
		return cmpBool(a.ASPathLength < b.ASPathLength)
	}
	if a.Origin != b.Origin {
		return cmpBool(a.Origin < b.Origin)
	}
	if a.MED != b.MED {
		return cmpBool(a.MED < b.MED)
	}
	return 0
}

func localPref(a *bgp.Attributes) uint32 {
	if a.HasLocalPref {
		return a.LocalPref
	}
	return 100 // the common default of implementations
}

func cmpBool(better bool) int {
	if better {
		return -1
	}
	return 1
}
