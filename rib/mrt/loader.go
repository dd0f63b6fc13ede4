package mrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/netip"
	"os"
	"runtime/debug"
	"time"

	"flowzero/rib"
	"flowzero/rib/bgp"
)

// Options tune a load.
type Options struct {
	// Progress receives a progress line (carriage-return refreshed) every ProgressInterval
	// while loading; nil for none.
	Progress         io.Writer
	ProgressInterval time.Duration
	// MaxRecords stops after that many records (0: the whole file).
	MaxRecords int
	// GCPercent, when positive, is the garbage collector's target (debug.SetGCPercent) for the
	// duration of the load, restored afterwards. A full table allocates a few hundred MB that
	// all stay live, so collections during the load free little: a higher target (400)
	// collects less often while the heap grows, for a higher peak during the load only.
	GCPercent int
	// Metrics count corrupt records in Prometheus as well as in Stats; nil for none.
	Metrics *Metrics
}

// Stats count what a load did.
type Stats struct {
	Records       uint64 // MRT records read
	RIBEntries    uint64 // TABLE_DUMP / TABLE_DUMP_V2 entries applied
	Updates       uint64 // BGP4MP UPDATE messages applied
	OtherMessages uint64 // BGP4MP messages other than UPDATE (OPEN, KEEPALIVE...), ignored
	Announcements uint64 // prefixes announced by UPDATE messages
	Withdrawals   uint64 // prefixes withdrawn by UPDATE messages
	StateChanges  uint64 // BGP4MP state changes
	PeersDown     uint64 // state changes out of Established (the peer's routes removed)
	Corrupt       uint64 // records skipped because they are malformed
	Unsupported   uint64 // records of other types, subtypes or families (skipped)
	Bytes         int64  // uncompressed bytes read
	Duration      time.Duration
}

// Loader applies MRT records to a RIB. It keeps the TABLE_DUMP_V2 peer index between records
// and caches attribute sets by their raw bytes. Not safe for concurrent use.
type Loader struct {
	rib   *rib.RIB
	opts  Options
	tx    *rib.Tx
	Stats Stats
	// LastError is the last corrupt-record error (for diagnostics).
	LastError error

	peerIndex []rib.PeerID // TABLE_DUMP_V2 peer index → RIB peer
	// last is, per peer index, the raw attributes of that peer's previous entry and their
	// set: neighbouring prefixes of a peer often share attributes, and comparing with hot
	// bytes is cheaper than a hash table probe.
	last   []lastAttrs
	cache  map[cacheKey]*rib.AttrSet
	seeds  [2]maphash.Seed
	parser bgp.AttributeParser
	attrs  bgp.Attributes
	mp     bgp.MPReach
	update bgp.Update
	paths  []rib.NewPath
}

// cacheKey is a 128-bit hash of raw attribute bytes (two independent 64-bit hashes): the
// probability that two different attribute blobs of a full table collide is about 2^-88, so
// entries are not verified against the bytes (which would cost a cache miss per entry).
type cacheKey [2]uint64

type lastAttrs struct {
	raw []byte
	set *rib.AttrSet
}

// maxCacheEntries bounds the raw-attribute cache; past it, the cache is emptied (sets stay
// interned in the RIB).
const maxCacheEntries = 1 << 21

// NewLoader returns a Loader for r.
func NewLoader(r *rib.RIB, opts Options) *Loader {
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = time.Second
	}
	return &Loader{rib: r, opts: opts, cache: make(map[cacheKey]*rib.AttrSet),
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// LoadFile loads an MRT file (optionally gzip or bzip2 compressed) into r.
func LoadFile(r *rib.RIB, path string, opts Options) (Stats, error) {
	f, err := os.Open(path)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	l := NewLoader(r, opts)
	err = l.Load(f)
	return l.Stats, err
}

// Load reads every record of in and applies it, in one RIB transaction: readers see the
// table as it was until the whole input is applied. Corrupt records are skipped and counted;
// the error is for input that cannot be read further (I/O, bad compression, truncation),
// after the records before it were applied.
func (l *Loader) Load(in io.Reader) (err error) {
	start := time.Now()
	rd, err := NewReader(in)
	if err != nil {
		return err
	}
	defer rd.Close()
	if l.opts.GCPercent > 0 {
		defer debug.SetGCPercent(debug.SetGCPercent(l.opts.GCPercent))
	}
	l.tx = l.rib.Begin()
	defer func() {
		l.dropCache()
		l.tx.Commit()
		l.tx = nil
		l.Stats.Duration = time.Since(start)
		if l.opts.Progress != nil {
			l.progress(start)
			fmt.Fprintln(l.opts.Progress)
		}
	}()
	nextProgress := start.Add(l.opts.ProgressInterval)
	return l.loadPipelined(rd, func() {
		if l.opts.Progress != nil {
			if now := time.Now(); now.After(nextProgress) {
				l.progress(start)
				nextProgress = now.Add(l.opts.ProgressInterval)
			}
		}
	})
}

func (l *Loader) progress(start time.Time) {
	fmt.Fprintf(l.opts.Progress, "\rMRT: %d records, %d MB, %d RIB entries, %d updates, %d corrupt, %.1fs",
		l.Stats.Records, l.Stats.Bytes>>20, l.Stats.RIBEntries, l.Stats.Updates, l.Stats.Corrupt,
		time.Since(start).Seconds())
}

// skipCorrupt records a malformed record that was skipped (or a framing error ending the load).
func (l *Loader) skipCorrupt(err error) {
	l.Stats.Corrupt++
	l.LastError = err
	if l.opts.Metrics != nil {
		l.opts.Metrics.corrupt.Inc()
	}
}

// dropCache releases the cache's references.
func (l *Loader) dropCache() {
	for _, s := range l.cache {
		l.tx.Release(s)
	}
	clear(l.cache)
	clear(l.last) // its sets were held by the cache
}

// Apply applies one record inside the Loader's transaction (Load opens it). It returns an
// error wrapping ErrCorrupt (or bgp.ErrMalformed) for a malformed record; entries of the
// record before the bad one are applied.
func (l *Loader) Apply(rec Record) error {
	if l.tx == nil {
		return errors.New("mrt: Apply outside Load")
	}
	switch rec.Type {
	case TypeTableDumpV2:
		switch rec.Subtype {
		case SubtypePeerIndexTable:
			return l.peerIndexTable(rec.Body)
		case SubtypeRIBIPv4Unicast:
			return l.ribEntries(rec.Body, bgp.AFIIPv4, false)
		case SubtypeRIBIPv6Unicast:
			return l.ribEntries(rec.Body, bgp.AFIIPv6, false)
		case SubtypeRIBIPv4UnicastAddPath:
			return l.ribEntries(rec.Body, bgp.AFIIPv4, true)
		case SubtypeRIBIPv6UnicastAddPath:
			return l.ribEntries(rec.Body, bgp.AFIIPv6, true)
		}
	case TypeTableDump:
		switch rec.Subtype {
		case 1:
			return l.tableDump(rec.Body, bgp.AFIIPv4)
		case 2:
			return l.tableDump(rec.Body, bgp.AFIIPv6)
		}
	case TypeBGP4MP, TypeBGP4MPET:
		switch rec.Subtype {
		case SubtypeBGP4MPStateChange:
			return l.stateChange(rec.Body, 2)
		case SubtypeBGP4MPStateChangeAS4:
			return l.stateChange(rec.Body, 4)
		case SubtypeBGP4MPMessage, SubtypeBGP4MPMessageLocal:
			return l.message(rec.Body, 2, false)
		case SubtypeBGP4MPMessageAS4, SubtypeBGP4MPMessageAS4Local:
			return l.message(rec.Body, 4, false)
		case SubtypeBGP4MPMessageAddPath, SubtypeBGP4MPMessageLocalAddPath:
			return l.message(rec.Body, 2, true)
		case SubtypeBGP4MPMessageAS4AddPath, SubtypeBGP4MPMessageAS4LocalAP:
			return l.message(rec.Body, 4, true)
		}
	}
	l.Stats.Unsupported++
	return nil
}

// peerIndexTable decodes RFC 6396 §4.3.1: collector BGP ID (4), view name length (2) and
// name, peer count (2), then per peer: type (bit 0: IPv6 address, bit 1: 4-octet AS), BGP ID
// (4), address (4 or 16), AS (2 or 4).
func (l *Loader) peerIndexTable(b []byte) error {
	if len(b) < 6 {
		return corrupt("PEER_INDEX_TABLE of %d bytes", len(b))
	}
	nameLen := int(binary.BigEndian.Uint16(b[4:]))
	if len(b) < 6+nameLen+2 {
		return corrupt("PEER_INDEX_TABLE view name length %d", nameLen)
	}
	b = b[6+nameLen:]
	count := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	l.peerIndex = l.peerIndex[:0]
	clear(l.last)
	for i := range count {
		if len(b) < 5 {
			return corrupt("PEER_INDEX_TABLE truncated at peer %d", i)
		}
		typ := b[0]
		bgpID := netip.AddrFrom4([4]byte(b[1:5]))
		b = b[5:]
		var k rib.PeerKey
		var ok bool
		if k.Address, b, ok = readAddr(b, typ&1 != 0); !ok {
			return corrupt("PEER_INDEX_TABLE truncated at peer %d", i)
		}
		if k.AS, b, ok = readAS(b, typ&2 != 0); !ok {
			return corrupt("PEER_INDEX_TABLE truncated at peer %d", i)
		}
		l.peerIndex = append(l.peerIndex, l.tx.Peer(k, bgpID))
	}
	return nil
}

func readAddr(b []byte, v6 bool) (netip.Addr, []byte, bool) {
	if v6 {
		if len(b) < 16 {
			return netip.Addr{}, b, false
		}
		return netip.AddrFrom16([16]byte(b[:16])), b[16:], true
	}
	if len(b) < 4 {
		return netip.Addr{}, b, false
	}
	return netip.AddrFrom4([4]byte(b[:4])), b[4:], true
}

func readAS(b []byte, as4 bool) (uint32, []byte, bool) {
	if as4 {
		if len(b) < 4 {
			return 0, b, false
		}
		return binary.BigEndian.Uint32(b), b[4:], true
	}
	if len(b) < 2 {
		return 0, b, false
	}
	return uint32(binary.BigEndian.Uint16(b)), b[2:], true
}

// readPrefix decodes a prefix length octet and the significant octets of the prefix.
func readPrefix(b []byte, afi uint16) (netip.Prefix, []byte, bool) {
	if len(b) < 1 {
		return netip.Prefix{}, b, false
	}
	bits, b := int(b[0]), b[1:]
	n := (bits + 7) / 8
	maxBits := 32
	if afi == bgp.AFIIPv6 {
		maxBits = 128
	}
	if bits > maxBits || len(b) < n {
		return netip.Prefix{}, b, false
	}
	var a netip.Addr
	if afi == bgp.AFIIPv6 {
		var ip [16]byte
		copy(ip[:], b[:n])
		a = netip.AddrFrom16(ip)
	} else {
		var ip [4]byte
		copy(ip[:], b[:n])
		a = netip.AddrFrom4(ip)
	}
	p, _ := a.Prefix(bits)
	return p, b[n:], true
}

// attrSet returns the interned set for raw path attributes of a RIB entry, through the
// cache. The cache holds the reference; the RIB takes its own per path.
func (l *Loader) attrSet(raw []byte, opts bgp.Options) (*rib.AttrSet, error) {
	ctx := uint64(opts.RIBEntryAFI)<<56 ^ uint64(opts.ASN)<<60
	k := cacheKey{maphash.Bytes(l.seeds[0], raw) ^ ctx, maphash.Bytes(l.seeds[1], raw)}
	if s, ok := l.cache[k]; ok {
		return s, nil
	}
	if err := l.parser.Parse(raw, opts, &l.attrs, &l.mp, nil); err != nil {
		return nil, err
	}
	if l.mp.Present {
		l.attrs.NextHop = l.mp.NextHop
	}
	if len(l.cache) >= maxCacheEntries {
		l.dropCache()
	}
	s := l.tx.Intern(&l.attrs)
	l.cache[k] = s
	return s, nil
}

// ribEntries decodes RIB_IPV4_UNICAST / RIB_IPV6_UNICAST (RFC 6396 §4.3.2) and their Add-Path
// forms (RFC 8050 §4): sequence (4), prefix, entry count (2), then per entry: peer index (2),
// originated time (4), [path identifier (4)], attribute length (2), attributes. AS numbers in
// RIB entries are always 4 octets (§4.3.4).
func (l *Loader) ribEntries(b []byte, afi uint16, addPath bool) error {
	if len(b) < 4 {
		return corrupt("RIB record of %d bytes", len(b))
	}
	p, b, ok := readPrefix(b[4:], afi)
	if !ok || len(b) < 2 {
		return corrupt("RIB record prefix")
	}
	count := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	opts := bgp.Options{ASN: bgp.ASN4, RIBEntry: true, RIBEntryAFI: afi}
	l.paths = l.paths[:0]
	var err error
	for i := 0; i < count; i++ {
		hdr := 8
		if addPath {
			hdr = 12
		}
		if len(b) < hdr {
			err = corrupt("RIB entry %d truncated", i)
			break
		}
		idx := int(binary.BigEndian.Uint16(b))
		var pathID uint32
		if addPath {
			pathID = binary.BigEndian.Uint32(b[6:])
		}
		n := int(binary.BigEndian.Uint16(b[hdr-2:]))
		if len(b) < hdr+n {
			err = corrupt("RIB entry %d attributes length %d", i, n)
			break
		}
		raw := b[hdr : hdr+n]
		b = b[hdr+n:]
		if idx >= len(l.peerIndex) {
			err = corrupt("RIB entry peer index %d of %d", idx, len(l.peerIndex))
			continue
		}
		var s *rib.AttrSet
		if idx < len(l.last) && l.last[idx].set != nil && string(l.last[idx].raw) == string(raw) {
			s = l.last[idx].set
		} else {
			var perr error
			if s, perr = l.attrSet(raw, opts); perr != nil {
				err = fmt.Errorf("RIB entry %s: %w", p, perr)
				continue
			}
			if idx >= len(l.last) {
				l.last = append(l.last, make([]lastAttrs, idx+1-len(l.last))...)
			}
			l.last[idx] = lastAttrs{raw: append(l.last[idx].raw[:0], raw...), set: s}
		}
		l.paths = append(l.paths, rib.NewPath{Peer: l.peerIndex[idx], PathID: pathID, Set: s.ID()})
	}
	l.tx.AddPaths(p, l.paths)
	l.Stats.RIBEntries += uint64(len(l.paths))
	return err
}

// tableDump decodes a TABLE_DUMP record (RFC 6396 §4.2): view (2), sequence (2), prefix (4 or
// 16), prefix length (1), status (1), originated time (4), peer address (4 or 16), peer AS
// (2), attribute length (2), attributes with 2-octet AS numbers.
func (l *Loader) tableDump(b []byte, afi uint16) error {
	alen := 4
	if afi == bgp.AFIIPv6 {
		alen = 16
	}
	if len(b) < 4+alen+2+4+alen+2+2 {
		return corrupt("TABLE_DUMP record of %d bytes", len(b))
	}
	a, _, _ := readAddr(b[4:], afi == bgp.AFIIPv6)
	bits := int(b[4+alen])
	p, err := a.Prefix(bits)
	if err != nil {
		return corrupt("TABLE_DUMP prefix length %d", bits)
	}
	off := 4 + alen + 2 + 4
	var k rib.PeerKey
	k.Address, _, _ = readAddr(b[off:], afi == bgp.AFIIPv6)
	off += alen
	k.AS = uint32(binary.BigEndian.Uint16(b[off:]))
	n := int(binary.BigEndian.Uint16(b[off+2:]))
	raw := b[off+4:]
	if len(raw) < n {
		return corrupt("TABLE_DUMP attributes length %d of %d", n, len(raw))
	}
	s, err := l.attrSet(raw[:n], bgp.Options{ASN: bgp.ASN2, RIBEntry: true, RIBEntryAFI: afi})
	if err != nil {
		return fmt.Errorf("TABLE_DUMP %s: %w", p, err)
	}
	l.tx.AddSet(l.tx.Peer(k, netip.Addr{}), p, 0, s)
	l.Stats.RIBEntries++
	return nil
}

// bgp4mpPeer decodes the common BGP4MP prefix (RFC 6396 §4.4.1): peer AS, local AS (2 or 4
// octets each), interface index (2), AFI (2), peer address, local address.
func bgp4mpPeer(b []byte, asLen int) (k rib.PeerKey, rest []byte, err error) {
	if len(b) < 2*asLen+4 {
		return k, nil, corrupt("BGP4MP record of %d bytes", len(b))
	}
	k.AS, _, _ = readAS(b, asLen == 4)
	b = b[2*asLen+2:]
	afi := binary.BigEndian.Uint16(b)
	b = b[2:]
	if afi != bgp.AFIIPv4 && afi != bgp.AFIIPv6 {
		return k, nil, corrupt("BGP4MP AFI %d", afi)
	}
	var ok bool
	if k.Address, b, ok = readAddr(b, afi == bgp.AFIIPv6); !ok {
		return k, nil, corrupt("BGP4MP truncated peer address")
	}
	if _, b, ok = readAddr(b, afi == bgp.AFIIPv6); !ok {
		return k, nil, corrupt("BGP4MP truncated local address")
	}
	return k, b, nil
}

// stateChange applies BGP4MP_STATE_CHANGE(_AS4) (§4.4.1): old and new FSM states (2 each). A
// session leaving Established (6) loses its routes.
func (l *Loader) stateChange(b []byte, asLen int) error {
	k, b, err := bgp4mpPeer(b, asLen)
	if err != nil {
		return err
	}
	if len(b) < 4 {
		return corrupt("BGP4MP_STATE_CHANGE of %d bytes", len(b))
	}
	l.Stats.StateChanges++
	oldState, newState := binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])
	if oldState == 6 && newState != 6 {
		l.tx.RemovePeer(l.tx.Peer(k, netip.Addr{}))
		l.Stats.PeersDown++
	}
	return nil
}

// message applies a BGP4MP_MESSAGE* record holding a BGP message (§4.4.2, RFC 8050 §3 for
// Add-Path): UPDATEs change the RIB, other messages are ignored.
func (l *Loader) message(b []byte, asLen int, addPath bool) error {
	k, msg, err := bgp4mpPeer(b, asLen)
	if err != nil {
		return err
	}
	typ, body, err := bgp.ParseHeader(msg)
	if err != nil {
		return err
	}
	if typ != bgp.MessageUpdate {
		l.Stats.OtherMessages++
		return nil
	}
	opts := bgp.Options{ASN: bgp.ASN2}
	if asLen == 4 {
		opts.ASN = bgp.ASN4
	}
	if addPath {
		opts.AddPath = ^bgp.FamilySet(0)
	}
	u := &l.update
	if err := u.Parse(body, opts); err != nil {
		return err
	}
	l.Stats.Updates++
	tx := l.tx
	peer := tx.Peer(k, netip.Addr{})
	// Withdrawals first (RFC 4271 §9: a prefix both withdrawn and announced is announced).
	wr := u.WithdrawnReader()
	for p, ok := wr.Next(); ok; p, ok = wr.Next() {
		tx.Withdraw(peer, p.Prefix, p.PathID)
		l.Stats.Withdrawals++
	}
	if wr.Err() != nil {
		return wr.Err()
	}
	if r, f, ok := u.MPUnreachReader(); ok && isUnicast(f) {
		for p, ok := r.Next(); ok; p, ok = r.Next() {
			tx.Withdraw(peer, p.Prefix, p.PathID)
			l.Stats.Withdrawals++
		}
		if r.Err() != nil {
			return r.Err()
		}
	}
	if len(u.NLRI) > 0 {
		s := tx.Intern(&u.Attrs)
		r := u.NLRIReader()
		for p, ok := r.Next(); ok; p, ok = r.Next() {
			tx.AddSet(peer, p.Prefix, p.PathID, s)
			l.Stats.Announcements++
		}
		tx.Release(s)
		if r.Err() != nil {
			return r.Err()
		}
	}
	if r, f, ok := u.MPReachReader(); ok && isUnicast(f) {
		a := u.MPAttributes()
		s := tx.Intern(&a)
		for p, ok := r.Next(); ok; p, ok = r.Next() {
			tx.AddSet(peer, p.Prefix, p.PathID, s)
			l.Stats.Announcements++
		}
		tx.Release(s)
		if r.Err() != nil {
			return r.Err()
		}
	}
	return nil
}

func isUnicast(f bgp.Family) bool {
	return f == bgp.FamilyIPv4Unicast || f == bgp.FamilyIPv6Unicast
}
