package rib

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"

	"github.com/klauspost/compress/zstd"

	"flowzero/internal/atomicfile"
	"flowzero/internal/health"
	"flowzero/rib/bgp"
)

// Snapshot file format (version 1). The table is written so that a restarted collector
// enriches flows from its first second, without waiting for BMP peers or re-reading MRT dumps.
//
//	magic "FZRIBSNP", version byte 1, then a zstd stream (with its content checksum) of:
//	  peers:      uvarint count, then per peer: router addr, uvarint distinguisher, address,
//	              uvarint AS, byte post-policy, BGP ID addr
//	  attributes: uvarint count, then per set: byte origin, byte flags (1 LOCAL_PREF, 2 MED),
//	              uvarint local pref, uvarint MED, uvarint AS path length, next hop addr,
//	              uvarint n + n uvarint ASNs, uvarint n + n uvarint communities,
//	              uvarint n + 3n uvarint large community words
//	  prefixes:   per prefix: byte family (4 or 6), byte length, the ceil(length/8) significant
//	              address bytes, uvarint path count, then per path uvarint peer index, uvarint
//	              path ID, uvarint attribute index; a family byte 0 ends the list.
//	addr is a byte length (0, 4 or 16) followed by the address bytes.
//
// Attribute sets are written once and referenced by index, as in memory.
const (
	snapshotMagic   = "FZRIBSNP"
	snapshotVersion = 1
)

var errSnapshot = errors.New("bad RIB snapshot")

type snapWriter struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
}

func (s *snapWriter) uvarint(v uint64) {
	n := binary.PutUvarint(s.buf[:], v)
	s.w.Write(s.buf[:n])
}

func (s *snapWriter) addr(a netip.Addr) {
	s.w.WriteByte(byte(a.BitLen() / 8))
	if a.IsValid() {
		b := a.AsSlice()
		s.w.Write(b)
	}
}

// WriteSnapshot writes the table to w. It encodes the table into memory under the writer lock
// (updates wait for that part, about 4 bytes per route; readers never wait), then compresses
// and writes it without the lock.
func (r *RIB) WriteSnapshot(w io.Writer) error {
	if _, err := io.WriteString(w, snapshotMagic); err != nil {
		return err
	}
	if _, err := w.Write([]byte{snapshotVersion}); err != nil {
		return err
	}
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	var raw bytes.Buffer
	s := &snapWriter{w: bufio.NewWriterSize(&raw, 1<<16)}

	r.mu.Lock()
	s.uvarint(uint64(len(r.peers)))
	for _, p := range r.peers {
		s.addr(p.info.Router)
		s.uvarint(p.info.Distinguisher)
		s.addr(p.info.Address)
		s.uvarint(uint64(p.info.AS))
		s.w.WriteByte(boolByte(p.info.PostPolicy))
		s.addr(p.info.BGPID)
	}
	// Number the attribute sets in the order prefixes reference them.
	index := make([]uint64, len(r.interner.sets)) // by set id: 1 + its number in the file, 0 if none yet
	var sets []*AttrSet
	for _, ps := range r.paths.All() {
		for _, x := range ps {
			if index[x.set] == 0 {
				index[x.set] = uint64(len(sets)) + 1
				sets = append(sets, r.set(x))
			}
		}
	}
	s.uvarint(uint64(len(sets)))
	for _, ia := range sets {
		a := &ia.Attributes
		s.w.WriteByte(a.Origin)
		s.w.WriteByte(boolByte(a.HasLocalPref) | boolByte(a.HasMED)<<1)
		s.uvarint(uint64(a.LocalPref))
		s.uvarint(uint64(a.MED))
		s.uvarint(uint64(a.ASPathLength))
		s.addr(a.NextHop)
		s.uvarint(uint64(len(a.ASPath)))
		for _, as := range a.ASPath {
			s.uvarint(uint64(as))
		}
		s.uvarint(uint64(len(a.Communities)))
		for _, c := range a.Communities {
			s.uvarint(uint64(c))
		}
		s.uvarint(uint64(len(a.LargeCommunities)))
		for _, c := range a.LargeCommunities {
			s.uvarint(uint64(c.GlobalAdmin))
			s.uvarint(uint64(c.LocalData1))
			s.uvarint(uint64(c.LocalData2))
		}
	}
	for p, ps := range r.paths.All() {
		fam := byte(4)
		if p.Addr().Is6() {
			fam = 6
		}
		s.w.WriteByte(fam)
		s.w.WriteByte(byte(p.Bits()))
		s.w.Write(p.Addr().AsSlice()[:(p.Bits()+7)/8])
		s.uvarint(uint64(len(ps)))
		for _, x := range ps {
			s.uvarint(uint64(x.peer))
			s.uvarint(uint64(x.pathID))
			s.uvarint(index[x.set] - 1)
		}
	}
	s.w.WriteByte(0)
	s.w.Flush() // into memory: cannot fail
	r.mu.Unlock()
	if _, err := zw.Write(raw.Bytes()); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}

// snapReader decodes the uncompressed snapshot, which is in memory whole.
type snapReader struct {
	r   *bytes.Reader
	err error
}

func (s *snapReader) uvarint() uint64 {
	if s.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(s.r)
	if err != nil {
		s.err = err
		return 0
	}
	return v
}

func (s *snapReader) byte() byte {
	if s.err != nil {
		return 0
	}
	b, err := s.r.ReadByte()
	if err != nil {
		s.err = err
	}
	return b
}

func (s *snapReader) count(limit uint64) int {
	n := s.uvarint()
	if n > limit {
		s.err = fmt.Errorf("%w: count %d above %d", errSnapshot, n, limit)
		return 0
	}
	return int(n)
}

func (s *snapReader) addr() netip.Addr {
	var b [16]byte
	switch n := s.byte(); n {
	case 0:
		return netip.Addr{}
	case 4, 16:
		if s.err == nil {
			_, s.err = io.ReadFull(s.r, b[:n])
		}
		if n == 4 {
			return netip.AddrFrom4([4]byte(b[:4]))
		}
		return netip.AddrFrom16(b)
	default:
		if s.err == nil {
			s.err = fmt.Errorf("%w: address length %d", errSnapshot, n)
		}
		return netip.Addr{}
	}
}

// offset is the position of the reader in the uncompressed snapshot, for errors.
func (s *snapReader) offset() int64 { return s.r.Size() - int64(s.r.Len()) }

// ReadSnapshot adds the routes of a snapshot written by WriteSnapshot to the table (usually
// empty, at start). Peers are matched by key, so routes land on the same peers as BMP's later.
// The table is changed only by a whole snapshot: the stream is decompressed into memory (as
// WriteSnapshot encodes it) and its zstd checksum verified, then decoded once to validate it
// and once into one transaction. A truncated or corrupt snapshot leaves the table untouched.
func (r *RIB) ReadSnapshot(rd io.Reader) error {
	hdr := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(rd, hdr); err != nil {
		return fmt.Errorf("%w: %w", errSnapshot, err)
	}
	if string(hdr[:len(snapshotMagic)]) != snapshotMagic {
		return fmt.Errorf("%w: bad magic", errSnapshot)
	}
	if hdr[len(snapshotMagic)] != snapshotVersion {
		return fmt.Errorf("%w: version %d", errSnapshot, hdr[len(snapshotMagic)])
	}
	zr, err := zstd.NewReader(rd, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return err
	}
	defer zr.Close()
	// ReadAll reads to the end of the zstd stream, which checks its content checksum.
	raw, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("%w: after %d uncompressed bytes: %w", errSnapshot, len(raw), err)
	}
	if err := r.decodeSnapshot(raw, nil); err != nil {
		return err
	}
	tx := r.Begin()
	defer tx.Commit()
	return r.decodeSnapshot(raw, tx)
}

// decodeSnapshot decodes an uncompressed snapshot into tx, or only validates it when tx is
// nil.
func (r *RIB) decodeSnapshot(raw []byte, tx *Tx) error {
	s := &snapReader{r: bytes.NewReader(raw)}
	fail := func(part string) error {
		return fmt.Errorf("%w: %s at uncompressed byte %d: %w", errSnapshot, part, s.offset(), s.err)
	}
	const maxCount = 1 << 28
	peers := make([]PeerID, s.count(1<<20))
	if s.err != nil {
		return fail("peers")
	}
	for i := range peers {
		var k PeerKey
		k.Router = s.addr()
		k.Distinguisher = s.uvarint()
		k.Address = s.addr()
		k.AS = uint32(s.uvarint())
		k.PostPolicy = s.byte() != 0
		bgpID := s.addr()
		if s.err != nil {
			return fail("peers")
		}
		if tx != nil {
			peers[i] = tx.Peer(k, bgpID)
		}
	}
	nSets := s.count(maxCount)
	var ids []SetID
	var scratch bgp.Attributes // the validation pass decodes every set into it
	if tx != nil {
		// The validation pass found nSets sets in raw: the slices below are bounded by its size.
		ids = make([]SetID, 0, nSets)
		held := make([]*AttrSet, 0, nSets)
		// Each set is interned once and held until the end; paths refer to it by number.
		defer func() {
			for _, h := range held {
				tx.Release(h)
			}
		}()
		for range nSets {
			var a bgp.Attributes
			s.attributes(&a)
			if s.err != nil {
				return fail("attributes")
			}
			h := tx.InternOwned(&a)
			held = append(held, h)
			ids = append(ids, h.ID())
		}
	} else {
		for range nSets {
			s.attributes(&scratch)
			if s.err != nil {
				return fail("attributes")
			}
		}
	}
	if s.err != nil {
		return fail("attributes")
	}
	var paths []NewPath
	for {
		fam := s.byte()
		if s.err != nil {
			return fail("prefixes")
		}
		if fam == 0 {
			if s.r.Len() > 0 {
				return fmt.Errorf("%w: %d bytes after the end of the prefixes", errSnapshot, s.r.Len())
			}
			return nil
		}
		bits := int(s.byte())
		var b [16]byte
		var a netip.Addr
		switch {
		case fam == 4 && bits <= 32:
			_, s.err = io.ReadFull(s.r, b[:(bits+7)/8])
			a = netip.AddrFrom4([4]byte(b[:4]))
		case fam == 6 && bits <= 128:
			_, s.err = io.ReadFull(s.r, b[:(bits+7)/8])
			a = netip.AddrFrom16(b)
		default:
			return fmt.Errorf("%w: prefix family %d length %d at uncompressed byte %d", errSnapshot, fam, bits, s.offset())
		}
		p, _ := a.Prefix(bits)
		np := s.count(1 << 20)
		paths = paths[:0]
		for range np {
			peer, pathID, idx := s.uvarint(), uint32(s.uvarint()), s.uvarint()
			if s.err != nil {
				return fail("prefixes")
			}
			if peer >= uint64(len(peers)) || idx >= uint64(nSets) {
				return fmt.Errorf("%w: path references peer %d or attribute set %d at uncompressed byte %d", errSnapshot, peer, idx, s.offset())
			}
			if tx != nil {
				paths = append(paths, NewPath{Peer: peers[peer], PathID: pathID, Set: ids[idx]})
			}
		}
		if s.err != nil {
			return fail("prefixes")
		}
		if len(paths) > 0 {
			tx.AddPaths(p, paths)
		}
	}
}

// attributes decodes one attribute set into a, reusing its slices.
func (s *snapReader) attributes(a *bgp.Attributes) {
	a.Origin = s.byte()
	flags := s.byte()
	a.HasLocalPref, a.HasMED = flags&1 != 0, flags&2 != 0
	a.LocalPref = uint32(s.uvarint())
	a.MED = uint32(s.uvarint())
	a.ASPathLength = uint16(s.uvarint())
	a.NextHop = s.addr()
	a.ASPath = resize(a.ASPath, s.count(1<<16))
	for i := range a.ASPath {
		a.ASPath[i] = uint32(s.uvarint())
	}
	a.Communities = resize(a.Communities, s.count(1<<16))
	for i := range a.Communities {
		a.Communities[i] = uint32(s.uvarint())
	}
	a.LargeCommunities = resize(a.LargeCommunities, s.count(1<<16))
	for i := range a.LargeCommunities {
		c := &a.LargeCommunities[i]
		c.GlobalAdmin, c.LocalData1, c.LocalData2 = uint32(s.uvarint()), uint32(s.uvarint()), uint32(s.uvarint())
	}
}

// resize returns s with length n, reusing its array when large enough; a new one has exactly
// n elements, since interned sets keep it.
func resize[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	return make([]T, n)
}

// SaveSnapshotFile writes the snapshot to path atomically: a crash or a failed write leaves
// the previous snapshot or the new one whole, never a partial file.
func (r *RIB) SaveSnapshotFile(path string) error {
	if err := atomicfile.Write(path, r.WriteSnapshot); err != nil {
		r.snapshotFailed("not saved", err)
		return err
	}
	r.stats.snapshotSaves.Add(1)
	r.health.Clear("snapshot")
	return nil
}

// LoadSnapshotFile reads a snapshot file into the table. A missing file is returned as such
// (fs.ErrNotExist) and is no failure: there is nothing to restore yet.
func (r *RIB) LoadSnapshotFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil {
		defer f.Close()
		if err = r.ReadSnapshot(f); err != nil {
			err = fmt.Errorf("%s: %w", path, err)
		}
	}
	if err != nil {
		r.snapshotFailed("not loaded", err)
		return err
	}
	r.health.Clear("snapshot")
	return nil
}

// snapshotFailed counts a failed load or save; the RIB is degraded until the next success.
func (r *RIB) snapshotFailed(what string, err error) {
	r.stats.snapshotErrors.Add(1)
	r.health.Set("snapshot", fmt.Sprintf("snapshot %s: %v", what, err))
}

// Name identifies the RIB in /healthz.
func (r *RIB) Name() string { return "rib" }

// Health implements health.Reporter: degraded while the last snapshot load or save failed
// (a RIB that started empty for a corrupt snapshot, a snapshot that no longer saves), until
// the next one succeeds.
func (r *RIB) Health() health.Report {
	rep := r.health.Report()
	st := r.Stats()
	rep.Counters = map[string]uint64{
		"prefixes":        uint64(st.Prefixes4 + st.Prefixes6),
		"routes":          uint64(st.Routes),
		"peers":           uint64(st.Peers),
		"snapshot-saves":  r.stats.snapshotSaves.Load(),
		"snapshot-errors": r.stats.snapshotErrors.Load(),
	}
	return rep
}
