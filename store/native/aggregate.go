package native

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowzero/schema"
)

// Pre-aggregation. With the embedded engine, the finest resolution's table (flows_1m) is not
// fed by a materialized view grouping every inserted block of flows, whose GROUP BY over the
// ~48 dimensions costs the engine several times more per flow than grouping in Go
// (docs/design/store.md). The sink groups the batch itself, as pmacct aggregates in memory
// before writing to SQL: the Encoder hands each block it completes to an Aggregator, which
// folds the rows into a hash table keyed by the finest resolution's dimensions, and the
// groups become a second Native block, sorted by that table's key (aggsort.go), inserted
// straight into it. The coarser views (flows_5m from flows_1m...) stay: they read what is
// inserted into flows_1m.
//
// The key of a row is built from the encoder's columns, not from the messages: the bytes of
// fixed-width columns, the interned number of a LowCardinality value (stable for a whole
// batch, see column.names), TimeReceived rounded down to the interval, and the
// elements of an array a MATERIALIZED column takes (DstASPath[1] for Dst1stAS), for the
// dimensions set since the groups were reset only (activate). Keys are written column by
// column for a block of rows (one tight loop per column), then hashed (hash/maphash) into an
// open-addressing table of group numbers. Rows refused by the encoder
// never reach a completed block, so never reach the groups.

// aggKind is how a dimension's key bytes are made from the encoder's columns.
type aggKind uint8

const (
	aggFixed   aggKind = iota // the column's fixed-width bytes
	aggLowCard                // interned number+1 of a LowCardinality value (0: ""), 4 bytes
	aggTime                   // a DateTime rounded down to the interval, 4 bytes
	aggElem                   // element elem of an Array(UInt32/UInt64) column, 0 when absent
)

type aggDim struct {
	name, typ string
	kind      aggKind
	src       int // index in Encoder.cols
	width     int // bytes in the key and in the output column
	elem      int // aggElem: 0-based element
	// bytes: an aggFixed value ordered as bytes (IPv6, FixedString), not an integer.
	bytes bool
	// active: the dimension has been set in a block since the groups were reset, and has
	// the bytes from off in the keys (see activate); the others are the default in every
	// group and take no room.
	active bool
	off    int
}

// ErrNotAggregable is returned by NewAggregator for a dimension it cannot compute in Go:
// the finest resolution then keeps its materialized view.
var ErrNotAggregable = errors.New("dimension not computed by the pre-aggregation")

// arrayElemExpr matches the MATERIALIZED expressions the aggregation computes: Array[n].
var arrayElemExpr = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\[([1-9][0-9]?)\]$`)

// Aggregator sums the Bytes and Packets of an encoder's rows per finest-resolution key, and
// counts them (Flows).
// It is not safe for concurrent use and allocates nothing per flow once its table and
// buffers have grown to the batch's size; at most one group per row.
type Aggregator struct {
	enc      *Encoder // whose completed blocks are grouped
	dims     []aggDim
	bytes    int // encoder column of Bytes, Packets
	packets  int
	interval uint32 // seconds
	keyLen   int
	columns  string // "(a, b, ..., Bytes, Packets, Flows)"

	keys []byte // keys of the rows being added, keyLen per row
	// hs and hint are the keys' hashes and first slots; touched keeps the loads that bring
	// the groups' keys into the cache from being optimized away.
	hs      [aggChunkRows]uint64
	hint    [aggChunkRows]uint64
	touched byte

	// Groups: key, hash and sums (Bytes, Packets, Flows) of group g at gkeys[g*keyLen:],
	// hashes[g], sums[3g:3g+3].
	gkeys  []byte
	spare  []byte // the keys' previous memory, for activate
	hashes []uint64
	sums   []uint64
	n      int
	// slots holds the high 32 bits of a group's hash and its number+1 (low 32 bits, 0: empty
	// slot), so that a probe reads the group's key only when the hashes agree; its length is
	// a power of two, at least twice n.
	slots []uint64
	// tmin and tmax are the oldest and newest TimeReceived of the rows added since reset
	// (tmin > tmax: none).
	tmin, tmax uint32
	seed       maphash.Seed
	hash       func(maphash.Seed, []byte) uint64

	// sorter orders the groups for Block.
	sorter aggSorter

	// LowCardinality output: stamp[id] == gen when the interned value id has index
	// local[id] in the dictionary being written.
	stamp []uint32
	local []uint32
	gen   uint32
	idx   []uint32
	dict  []byte
	out   []byte
}

const aggMinSlots = 1 << 12

// NewAggregator returns the grouping of enc's rows by the dimensions dims (the aggregated
// tables' columns before Bytes and Packets, in the order of their sorting key, which Block's
// rows follow: see ddl.DDL.PreAggregatedKeyDims) with TimeReceived rounded down to interval,
// and makes enc hand it every block it completes. It fails with ErrNotAggregable when a
// dimension is neither a column of enc nor an element of one of its integer arrays.
func NewAggregator(enc *Encoder, dims []*schema.Column, interval time.Duration) (*Aggregator, error) {
	if interval < time.Second || interval%time.Second != 0 || interval/time.Second > 1<<31 {
		return nil, fmt.Errorf("interval %s: %w", interval, ErrNotAggregable)
	}
	a := &Aggregator{enc: enc, interval: uint32(interval / time.Second), seed: maphash.MakeSeed(), hash: maphash.Bytes,
		bytes: -1, packets: -1, slots: make([]uint64, aggMinSlots)}
	byName := map[string]int{}
	for i := range enc.cols {
		byName[enc.cols[i].name] = i
	}
	var names []string
	for _, c := range dims {
		d := aggDim{name: c.Name, typ: c.ClickHouseType, src: -1}
		if i, ok := byName[c.Name]; ok && c.OnWire() {
			ec := &enc.cols[i]
			d.src = i
			switch {
			case c.Key == schema.ColumnTimeReceived:
				if ec.op != opUint32 || c.ClickHouseType != "DateTime" {
					return nil, fmt.Errorf("%s as %s: %w", c.Name, c.ClickHouseType, ErrNotAggregable)
				}
				d.kind, d.width = aggTime, 4
			case ec.op == opLowCard:
				d.kind, d.width = aggLowCard, 4
			case ec.op == opArrayUint || ec.op == opArrayFixed:
				return nil, fmt.Errorf("%s as %s: %w", c.Name, c.ClickHouseType, ErrNotAggregable)
			default:
				d.kind, d.width = aggFixed, ec.width
				d.bytes = ec.op == opIPv6 || ec.op == opFixedString
			}
		} else if m := arrayElemExpr.FindStringSubmatch(c.ClickHouseExpr); m != nil && c.ClickHouseMaterialized {
			// Array[n] is the array's nth element, the type's default (0) past its end.
			i, ok := byName[m[1]]
			if !ok {
				return nil, fmt.Errorf("%s = %s: %w", c.Name, c.ClickHouseExpr, ErrNotAggregable)
			}
			ec := &enc.cols[i]
			if ec.op != opArrayUint || !(ec.width == 4 && c.ClickHouseType == "UInt32" || ec.width == 8 && c.ClickHouseType == "UInt64") {
				return nil, fmt.Errorf("%s = %s: %w", c.Name, c.ClickHouseExpr, ErrNotAggregable)
			}
			n, _ := strconv.Atoi(m[2])
			d.kind, d.src, d.width, d.elem = aggElem, i, ec.width, n-1
		} else {
			return nil, fmt.Errorf("%s: %w", c.Name, ErrNotAggregable)
		}
		a.dims = append(a.dims, d)
		names = append(names, c.Name)
	}
	for i := range enc.cols {
		c := &enc.cols[i]
		switch c.name {
		case "Bytes":
			a.bytes = i
		case "Packets":
			a.packets = i
		default:
			continue
		}
		if c.op != opUint64 {
			return nil, fmt.Errorf("%s as %s: %w", c.name, c.typ, ErrNotAggregable)
		}
	}
	if a.bytes < 0 || a.packets < 0 {
		return nil, fmt.Errorf("no Bytes or Packets column: %w", ErrNotAggregable)
	}
	a.columns = "(" + strings.Join(append(names, "Bytes", "Packets", "Flows"), ", ") + ")"
	a.reset()
	enc.agg = a
	return a, nil
}

// Aggregable reports whether an Aggregator can group the flows of schema s by dims at
// interval (nil), that is, whether the sink can fill that resolution's table itself; its
// error says why not (ErrNotAggregable or the encoder's).
func Aggregable(s *schema.Schema, dims []*schema.Column, interval time.Duration) error {
	enc, err := NewEncoder(s)
	if err != nil {
		return err
	}
	_, err = NewAggregator(enc, dims, interval)
	return err
}

// Columns returns the INSERT column list matching Block: "(a, b, ..., Bytes, Packets, Flows)".
func (a *Aggregator) Columns() string { return a.columns }

// Groups returns the number of groups since the last reset.
func (a *Aggregator) Groups() int { return a.n }

// Bytes returns the memory the groups take: their keys, hashes and sums, and the table.
func (a *Aggregator) Bytes() int {
	return a.n*(a.keyLen+4*8) + len(a.slots)*8
}

// Span returns how much time the TimeReceived of the rows added since the last reset span.
func (a *Aggregator) Span() time.Duration {
	if a.tmin > a.tmax {
		return 0
	}
	return time.Duration(a.tmax-a.tmin) * time.Second
}

// reset forgets the groups, keeping the memory.
func (a *Aggregator) reset() {
	if a.n > 0 {
		clear(a.slots)
	}
	a.n = 0
	a.keyLen = 0
	for i := range a.dims {
		a.dims[i].active = false
	}
	a.tmin, a.tmax = ^uint32(0), 0
	a.gkeys = a.gkeys[:0]
	a.hashes = a.hashes[:0]
	a.sums = a.sums[:0]
}

// aggChunkRows is how many rows' keys are written before they are grouped: few enough for
// the keys to stay in the CPU's cache between the two passes.
const aggChunkRows = 256

// addBlock folds the encoder's rows 0..rows-1 (a completed block, its array offsets closed)
// into the groups.
func (a *Aggregator) addBlock(e *Encoder, rows int) {
	a.activate(e)
	for first := 0; first < rows; first += aggChunkRows {
		a.addChunk(e, first, min(rows, first+aggChunkRows))
	}
}

// activate gives the dimensions set in the block being added (their encoder column not left
// out) room in the keys. Keys hold only the dimensions set since the groups were reset (few,
// in an installation without the metadata the others carry), because a shorter key is
// cheaper to hash, compare and keep in the cache. A dimension seen for the first time goes at the end of the keys: the groups'
// keys are copied to the new length (the new bytes zero, the dimension's default) and
// placed again in the table, once per dimension and reset.
func (a *Aggregator) activate(e *Encoder) {
	old := a.keyLen
	for i := range a.dims {
		d := &a.dims[i]
		if !d.active && !e.cols[d.src].omit {
			d.active, d.off = true, a.keyLen
			a.keyLen += d.width
		}
	}
	if a.keyLen == old || a.n == 0 {
		return
	}
	kl := a.keyLen
	keys := slices.Grow(a.spare[:0], a.n*kl)[:a.n*kl]
	for g := range a.n {
		k := keys[g*kl : (g+1)*kl]
		clear(k[copy(k, a.gkeys[g*old:(g+1)*old]):])
		a.hashes[g] = a.hash(a.seed, k)
	}
	a.gkeys, a.spare = keys, a.gkeys
	clear(a.slots)
	a.place()
}

// addChunk folds the rows first..end-1.
func (a *Aggregator) addChunk(e *Encoder, first, end int) {
	kl := a.keyLen
	rows := end - first
	if cap(a.keys) < aggChunkRows*kl {
		a.keys = make([]byte, aggChunkRows*kl)
	}
	keys := a.keys[:rows*kl]
	clear(keys)
	for i := range a.dims {
		d := &a.dims[i]
		c := &e.cols[d.src]
		if c.omit { // so is every dimension not active (see activate)
			continue // every row holds the default: the key's zeros (a zero time rounds to 0)
		}
		switch d.kind {
		case aggFixed:
			data := c.data[first*d.width:]
			switch d.width {
			case 1:
				for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
					keys[k] = data[r]
				}
			case 2:
				for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
					keys[k], keys[k+1] = data[2*r], data[2*r+1]
				}
			case 4:
				for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
					*(*[4]byte)(keys[k:]) = *(*[4]byte)(data[4*r:])
				}
			case 8:
				for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
					*(*[8]byte)(keys[k:]) = *(*[8]byte)(data[8*r:])
				}
			case 16:
				for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
					*(*[16]byte)(keys[k:]) = *(*[16]byte)(data[16*r:])
				}
			default:
				w := d.width
				for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
					copy(keys[k:k+w], data[w*r:])
				}
			}
		case aggLowCard:
			data, globals := c.data[4*first:], c.globals
			for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
				binary.LittleEndian.PutUint32(keys[k:], globals[binary.LittleEndian.Uint32(data[4*r:])])
			}
		case aggTime:
			data, iv := c.data[4*first:], a.interval
			tmin, tmax := a.tmin, a.tmax
			for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
				t := binary.LittleEndian.Uint32(data[4*r:])
				tmin, tmax = min(tmin, t), max(tmax, t)
				binary.LittleEndian.PutUint32(keys[k:], aggRoundTime(t, iv))
			}
			a.tmin, a.tmax = tmin, tmax
		case aggElem:
			offsets, data, w := c.offsets[first:end], c.data, d.width
			start := uint64(0)
			if first > 0 {
				start = c.offsets[first-1]
			}
			for r, k := 0, d.off; r < rows; r, k = r+1, k+kl {
				stop := offsets[r]
				if stop-start > uint64(d.elem) {
					j := int(start) + d.elem
					copy(keys[k:k+w], data[j*w:(j+1)*w]) // the rest of the key is zero
				}
				start = stop
			}
		}
	}
	// Hash every key, then load each one's first slot and the key and sums of the group it
	// holds, before any row is grouped: the loads do not depend on each other, so their
	// cache misses (the slots and the keys of ~50k groups span megabytes) overlap instead of
	// coming one after the other. The slot read here is only a hint; group probes again.
	hs := a.hs[:rows]
	for r := range hs {
		hs[r] = a.hash(a.seed, keys[r*kl:(r+1)*kl])
	}
	mask := uint64(len(a.slots) - 1)
	hint := a.hint[:rows]
	for r, h := range hs {
		hint[r] = a.slots[h&mask]
	}
	var touch byte
	for _, s := range hint {
		if g := int(uint32(s)); g != 0 && g <= a.n {
			p := a.gkeys[(g-1)*kl : g*kl]
			for o := 0; o < len(p); o += 64 {
				touch += p[o]
			}
			touch += byte(a.sums[3*(g-1)])
		}
	}
	a.touched += touch
	bytes, packets := e.cols[a.bytes].data[8*first:], e.cols[a.packets].data[8*first:]
	for r := 0; r < rows; r++ {
		k := keys[r*kl : (r+1)*kl]
		g := a.group(k, hs[r])
		sum := a.sums[3*g : 3*g+3 : 3*g+3]
		sum[0] += binary.LittleEndian.Uint64(bytes[8*r:])
		sum[1] += binary.LittleEndian.Uint64(packets[8*r:])
		sum[2]++
	}
}

// aggRoundTime is the views' toStartOfInterval(t, toIntervalSecond(iv)) for a DateTime:
// rounded down on the epoch, whatever the time zone (TestPreAggregationTimeRounding).
func aggRoundTime(t, iv uint32) uint32 { return t - t%iv }

// group returns the number of the group of key k with hash h, adding it if new.
func (a *Aggregator) group(k []byte, h uint64) int {
	mask := uint64(len(a.slots) - 1)
	kl := a.keyLen
	tag := h &^ (1<<32 - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := a.slots[i]
		if s == 0 {
			g := a.n
			a.slots[i] = tag | uint64(g+1)
			a.n++
			a.gkeys = append(a.gkeys, k...)
			a.hashes = append(a.hashes, h)
			a.sums = append(a.sums, 0, 0, 0)
			if 2*a.n > len(a.slots) {
				a.grow()
			}
			return g
		}
		if s&^(1<<32-1) != tag {
			continue
		}
		g := int(uint32(s) - 1)
		if string(a.gkeys[g*kl:(g+1)*kl]) == string(k) {
			return g
		}
	}
}

// grow doubles the slots and places the groups again by their hashes.
func (a *Aggregator) grow() {
	a.slots = make([]uint64, 2*len(a.slots))
	a.place()
}

// place puts every group in the (empty) slots by its hash.
func (a *Aggregator) place() {
	mask := uint64(len(a.slots) - 1)
	for g, h := range a.hashes[:a.n] {
		i := h & mask
		for a.slots[i] != 0 {
			i = (i + 1) & mask
		}
		a.slots[i] = h&^(1<<32-1) | uint64(g+1)
	}
}

// Block returns the groups as one Native block for `INSERT INTO <table> Columns() FORMAT
// Native`, sorted by the table's key (sortGroups), valid until the next call. The encoder's
// Block must have been called first (it completes the last block of rows).
func (a *Aggregator) Block() []byte {
	e := a.enc
	n, kl := a.n, a.keyLen
	perm := a.sortGroups(e)
	// The keys in that order, so that each column is then written from consecutive memory
	// (spare is free between activates; its contents are not the groups' state).
	keys := slices.Grow(a.spare[:0], n*kl)[:n*kl]
	for i, g := range perm {
		copy(keys[i*kl:(i+1)*kl], a.gkeys[int(g)*kl:])
	}
	a.spare = keys
	out := a.out[:0]
	ncols := 3
	for i := range a.dims {
		if a.dims[i].active {
			ncols++
		}
	}
	// The dimensions not set in any group are left out, as the encoder leaves out its
	// columns empty in a whole block: the INSERT names them and the engine gives them their
	// default.
	out = binary.AppendUvarint(out, uint64(ncols))
	out = binary.AppendUvarint(out, uint64(n))
	for i := range a.dims {
		d := &a.dims[i]
		if !d.active {
			continue
		}
		out = appendString(out, d.name)
		out = appendString(out, d.typ)
		if d.kind == aggLowCard {
			out = a.appendLowCard(out, d, keys, e.cols[d.src].names)
			continue
		}
		for g := 0; g < n; g++ {
			out = append(out, keys[g*kl+d.off:g*kl+d.off+d.width]...)
		}
	}
	for j, name := range []string{"Bytes", "Packets", "Flows"} {
		out = appendString(out, name)
		out = appendString(out, "UInt64")
		for _, g := range perm {
			out = binary.LittleEndian.AppendUint64(out, a.sums[3*int(g)+j])
		}
	}
	a.out = out
	return out
}

// appendLowCard writes a LowCardinality(String) column of the groups (see the Native block
// layout in native.go), from their keys, with a dictionary of the values they use.
func (a *Aggregator) appendLowCard(out []byte, d *aggDim, keys []byte, names []string) []byte {
	n, kl := a.n, a.keyLen
	if len(a.stamp) < len(names)+1 {
		a.stamp = make([]uint32, len(names)+1)
		a.local = make([]uint32, len(names)+1)
		a.gen = 0
	}
	a.gen++
	if a.gen == 0 {
		clear(a.stamp)
		a.gen = 1
	}
	if cap(a.idx) < n {
		a.idx = make([]uint32, n)
	}
	idx := a.idx[:n]
	dict := append(a.dict[:0], 0) // "" first: the default
	nkeys := uint32(1)
	for g := range idx {
		id := binary.LittleEndian.Uint32(keys[g*kl+d.off:])
		switch {
		case id == 0:
			idx[g] = 0
		case a.stamp[id] == a.gen:
			idx[g] = a.local[id]
		default:
			a.stamp[id], a.local[id] = a.gen, nkeys
			idx[g] = nkeys
			nkeys++
			dict = appendString(dict, names[id-1])
		}
	}
	a.dict = dict
	var code uint64
	switch {
	case nkeys <= 1<<8:
		code = 0
	case nkeys <= 1<<16:
		code = 1
	default:
		code = 2
	}
	out = binary.LittleEndian.AppendUint64(out, 1) // SharedDictionariesWithAdditionalKeys
	out = binary.LittleEndian.AppendUint64(out, 1<<9|1<<10|code)
	out = binary.LittleEndian.AppendUint64(out, uint64(nkeys))
	out = append(out, dict...)
	out = binary.LittleEndian.AppendUint64(out, uint64(n))
	for _, i := range idx {
		switch code {
		case 0:
			out = append(out, byte(i))
		case 1:
			out = binary.LittleEndian.AppendUint16(out, uint16(i))
		default:
			out = binary.LittleEndian.AppendUint32(out, i)
		}
	}
	return out
}
