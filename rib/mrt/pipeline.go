package mrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/netip"

	"flowzero/rib"
	"flowzero/rib/bgp"
)

// Load runs in two stages so that a full table uses both cores: a producer goroutine frames
// records (behind the decompressing goroutine), decodes TABLE_DUMP_V2 RIB records, and
// recognizes their attribute sets by the 128-bit hash of their raw bytes, decoding each
// distinct set once; the loading goroutine interns the new sets and applies the paths to the
// RIB. Other records are copied and applied in order by Apply. Batches carry a few thousand
// records and are recycled.

// pathRef is one RIB entry decoded by the producer.
type pathRef struct {
	pathID  uint32
	local   uint32 // producer's attribute set number
	peerIdx uint16
}

// ribItem is one RIB record: its prefix and its entries refs[first:first+n].
type ribItem struct {
	prefix netip.Prefix
	first  int32
	n      int32
	bad    error // an entry could not be decoded (the others are in refs)
}

// batchOp is an item of a batch in file order: a RIB record or a raw record.
type batchOp struct {
	raw bool
	i   int32
}

type rawRecord struct {
	rec        Record
	start, end int // body in batch.rawBuf
}

type batch struct {
	ops     []batchOp
	items   []ribItem
	refs    []pathRef
	raws    []rawRecord
	rawBuf  []byte
	newSets []bgp.Attributes // numbered from the previous batches' total, in order
	records uint64
	bytes   int64
	err     error // the reader's last error (nil for a clean end)
}

func (b *batch) reset() {
	b.ops, b.items, b.refs, b.raws, b.rawBuf = b.ops[:0], b.items[:0], b.refs[:0], b.raws[:0], b.rawBuf[:0]
	clear(b.newSets)
	b.newSets = b.newSets[:0]
	b.records, b.bytes, b.err = 0, 0, nil
}

const batchRecords = 2048

// producer is the first stage.
type producer struct {
	rd     *Reader
	max    uint64
	seeds  [2]maphash.Seed
	local  map[cacheKey]uint32
	next   uint32
	parser bgp.AttributeParser
	attrs  bgp.Attributes
	mp     bgp.MPReach
	nrec   uint64
}

func (p *producer) run(out chan<- *batch, free <-chan *batch, done <-chan struct{}) {
	defer close(out)
	var b *batch
	get := func() bool {
		select {
		case b = <-free:
			b.reset()
			return true
		case <-done:
			return false
		}
	}
	send := func() bool {
		b.bytes = p.rd.Bytes
		select {
		case out <- b:
			return true
		case <-done:
			return false
		}
	}
	if !get() {
		return
	}
	for {
		if p.max > 0 && p.nrec >= p.max {
			send()
			return
		}
		rec, err := p.rd.Next()
		if err != nil {
			if err != io.EOF {
				b.err = err
			}
			send()
			return
		}
		p.nrec++
		b.records++
		switch {
		case rec.Type == TypeTableDumpV2 && rec.Subtype == SubtypeRIBIPv4Unicast:
			p.ribRecord(b, rec.Body, bgp.AFIIPv4, false)
		case rec.Type == TypeTableDumpV2 && rec.Subtype == SubtypeRIBIPv6Unicast:
			p.ribRecord(b, rec.Body, bgp.AFIIPv6, false)
		case rec.Type == TypeTableDumpV2 && rec.Subtype == SubtypeRIBIPv4UnicastAddPath:
			p.ribRecord(b, rec.Body, bgp.AFIIPv4, true)
		case rec.Type == TypeTableDumpV2 && rec.Subtype == SubtypeRIBIPv6UnicastAddPath:
			p.ribRecord(b, rec.Body, bgp.AFIIPv6, true)
		default:
			start := len(b.rawBuf)
			b.rawBuf = append(b.rawBuf, rec.Body...)
			b.ops = append(b.ops, batchOp{raw: true, i: int32(len(b.raws))})
			b.raws = append(b.raws, rawRecord{rec: rec, start: start, end: len(b.rawBuf)})
		}
		if len(b.ops) >= batchRecords || len(b.rawBuf) >= 1<<20 {
			if !send() || !get() {
				return
			}
		}
	}
}

// ribRecord decodes a RIB record like Loader.ribEntries, without touching the RIB.
func (p *producer) ribRecord(b *batch, body []byte, afi uint16, addPath bool) {
	item := ribItem{first: int32(len(b.refs))}
	defer func() {
		item.n = int32(len(b.refs)) - item.first
		b.ops = append(b.ops, batchOp{i: int32(len(b.items))})
		b.items = append(b.items, item)
	}()
	if len(body) < 4 {
		item.bad = corrupt("RIB record of %d bytes", len(body))
		return
	}
	pfx, rest, ok := readPrefix(body[4:], afi)
	if !ok || len(rest) < 2 {
		item.bad = corrupt("RIB record prefix")
		return
	}
	item.prefix = pfx
	count := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	opts := bgp.Options{ASN: bgp.ASN4, RIBEntry: true, RIBEntryAFI: afi}
	ctx := uint64(afi)<<56 ^ uint64(opts.ASN)<<60
	hdr := 8
	if addPath {
		hdr = 12
	}
	for i := 0; i < count; i++ {
		if len(rest) < hdr {
			item.bad = corrupt("RIB entry %d truncated", i)
			return
		}
		ref := pathRef{peerIdx: binary.BigEndian.Uint16(rest)}
		if addPath {
			ref.pathID = binary.BigEndian.Uint32(rest[6:])
		}
		n := int(binary.BigEndian.Uint16(rest[hdr-2:]))
		if len(rest) < hdr+n {
			item.bad = corrupt("RIB entry %d attributes length %d", i, n)
			return
		}
		raw := rest[hdr : hdr+n]
		rest = rest[hdr+n:]
		k := cacheKey{maphash.Bytes(p.seeds[0], raw) ^ ctx, maphash.Bytes(p.seeds[1], raw)}
		local, ok := p.local[k]
		if !ok {
			if err := p.parser.Parse(raw, opts, &p.attrs, &p.mp, nil); err != nil {
				item.bad = fmt.Errorf("RIB entry %s: %w", pfx, err)
				continue
			}
			if p.mp.Present {
				p.attrs.NextHop = p.mp.NextHop
			}
			local = p.next
			p.next++
			p.local[k] = local
			b.newSets = append(b.newSets, *p.attrs.Clone())
		}
		ref.local = local
		b.refs = append(b.refs, ref)
	}
}

// loadPipelined is Load's loop; the caller holds the transaction.
func (l *Loader) loadPipelined(rd *Reader, progress func()) error {
	p := &producer{
		rd: rd, max: uint64(max(l.opts.MaxRecords, 0)),
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		local: make(map[cacheKey]uint32),
	}
	out := make(chan *batch, 2)
	free := make(chan *batch, 4)
	for range cap(free) {
		free <- new(batch)
	}
	done := make(chan struct{})
	go p.run(out, free, done)
	defer func() {
		// Stop the producer and wait for it: it must not use the Reader after we return.
		close(done)
		for range out {
		}
	}()

	// By producer number: the interned sets, each holding one reference, and their numbers
	// (read per route without touching the sets).
	var sets []*rib.AttrSet
	var ids []rib.SetID
	defer func() {
		for _, s := range sets {
			l.tx.Release(s)
		}
	}()
	for b := range out {
		for i := range b.newSets {
			s := l.tx.InternOwned(&b.newSets[i])
			sets = append(sets, s)
			ids = append(ids, s.ID())
		}
		for _, op := range b.ops {
			if op.raw {
				r := b.raws[op.i]
				r.rec.Body = b.rawBuf[r.start:r.end]
				if err := l.Apply(r.rec); err != nil {
					l.skipCorrupt(err)
				}
				continue
			}
			it := &b.items[op.i]
			bad := it.bad
			l.paths = l.paths[:0]
			for _, ref := range b.refs[it.first : it.first+it.n] {
				if int(ref.peerIdx) >= len(l.peerIndex) {
					bad = corrupt("RIB entry peer index %d of %d", ref.peerIdx, len(l.peerIndex))
					continue
				}
				l.paths = append(l.paths, rib.NewPath{Peer: l.peerIndex[ref.peerIdx], PathID: ref.pathID, Set: ids[ref.local]})
			}
			if it.prefix.IsValid() && len(l.paths) > 0 {
				l.tx.AddPaths(it.prefix, l.paths)
				l.Stats.RIBEntries += uint64(len(l.paths))
			}
			if bad != nil {
				l.skipCorrupt(bad)
			}
		}
		l.Stats.Records += b.records
		l.Stats.Bytes = b.bytes
		err := b.err
		free <- b
		progress()
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				// The framing itself is broken: nothing after it can be trusted.
				l.skipCorrupt(err)
			}
			return err
		}
	}
	return nil
}
