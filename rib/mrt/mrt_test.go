package mrt_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/testdata"
	"flowzero/rib"
	"flowzero/rib/mrt"
)

var a = netip.MustParseAddr

// Record bodies copied from synth-rib-fulltable-1peer.mrt.gz: its PEER_INDEX_TABLE (one peer,
// 193.203.0.1 AS1853), its first RIB_IPV4_UNICAST record (1.0.0.0/24) and its first
// RIB_IPV6_UNICAST record (2001:4:112::/48 with the abbreviated MP_REACH_NLRI next hop).
var v2Records = []struct {
	subtype uint16
	body    string
}{
	{mrt.SubtypePeerIndexTable, "0a0000fe000573796e74680001020a000001c1cb00010000073d"},
	{mrt.SubtypeRIBIPv4Unicast, "0000000018010000000100006553f10000204001010040021202040000073d0000073d000004d7000010e3400304c1cb0001"},
	{mrt.SubtypeRIBIPv6Unicast, "000dc30b30200100040112000100006553f10000314001010040021602050000073d0000073d000004d7000002bd00001b86800e111020010db8000000000000000000000001"},
}

// The same three records, bzip2-compressed with bzip2(1).
const v2Bzip2 = "425a68393141592653597c95f18200004affcffe9b7158400070024100080002410c204100004228080080080020012000920d43501a000034680c9a0d353d2a7e94034d1a0193419311c7dc9105e168c3a04469cd3c9a205e84838cf462f57949c9890fc580b4b32040ea40ad0b4254724dafbce61c9a8f3224598d79268386c853d08232f746e7141855c1071fb304ace418de58df9abb12a27040b5c613fe2ee48a70a120f92be304"

func v2Stream(t testing.TB) []byte {
	var out []byte
	for _, r := range v2Records {
		body, err := hex.DecodeString(r.body)
		if err != nil {
			t.Fatal(err)
		}
		out = binary.BigEndian.AppendUint32(out, 0x6553f100)
		out = binary.BigEndian.AppendUint16(out, mrt.TypeTableDumpV2)
		out = binary.BigEndian.AppendUint16(out, r.subtype)
		out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out
}

func checkV2(t *testing.T, r *rib.RIB, st mrt.Stats) {
	t.Helper()
	if st.Records != 3 || st.RIBEntries != 2 || st.Corrupt != 0 {
		t.Fatalf("stats %+v", st)
	}
	peers := r.Peers()
	if len(peers) != 1 || peers[0].Address != a("193.203.0.1") || peers[0].AS != 1853 || peers[0].BGPID != a("10.0.0.1") {
		t.Fatalf("peers %+v", peers)
	}
	rt, ok := r.Lookup(a("1.0.0.200"))
	if !ok || rt.Bits != 24 || !slices.Equal(rt.Attrs.ASPath, []uint32{1853, 1853, 1239, 4323}) ||
		rt.Attrs.NextHop != a("193.203.0.1") {
		t.Errorf("1.0.0.200: %v %+v", ok, rt)
	}
	rt, ok = r.Lookup(a("2001:4:112:1::1"))
	if !ok || rt.Bits != 48 || rt.Attrs.OriginAS() != 7046 || rt.Attrs.NextHop != a("2001:db8::1") {
		t.Errorf("2001:4:112:1::1: %v %+v", ok, rt)
	}
}

func TestTableDumpV2Compressions(t *testing.T) {
	plain := v2Stream(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	bz, _ := hex.DecodeString(v2Bzip2)
	for name, in := range map[string][]byte{"plain": plain, "gzip": gz.Bytes(), "bzip2": bz} {
		t.Run(name, func(t *testing.T) {
			r := rib.NewTable(rib.DefaultConfiguration())
			l := mrt.NewLoader(r, mrt.Options{})
			if err := l.Load(bytes.NewReader(in)); err != nil {
				t.Fatal(err)
			}
			checkV2(t, r, l.Stats)
		})
	}
}

// TestTruncatedCompressedFile checks that a compressed file cut off (a dump still being
// written, a copy interrupted) ends the load with an error, as a plain file cut at the same
// place does, even when the cut falls after a flush point (a record boundary of the
// uncompressed data) or in the trailer, where only the decompressor sees it.
func TestTruncatedCompressedFile(t *testing.T) {
	plain := v2Stream(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	// PEER_INDEX_TABLE and the IPv4 record, flushed as a streaming writer does; then the
	// IPv6 record, the last one.
	first := len(plain) - (12 + len(v2Records[2].body)/2)
	zw.Write(plain[:first])
	zw.Flush()
	flushed := gz.Len()
	zw.Write(plain[first:])
	zw.Close()
	bz, _ := hex.DecodeString(v2Bzip2)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"gzip cut after a flush (IPv6 record missing)", gz.Bytes()[:flushed]},
		{"gzip cut in the trailer (CRC unchecked)", gz.Bytes()[:gz.Len()-4]},
		{"bzip2 cut in the block", bz[:len(bz)/2]},
		{"bzip2 cut in the trailer", bz[:len(bz)-4]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rib.NewTable(rib.DefaultConfiguration())
			l := mrt.NewLoader(r, mrt.Options{})
			err := l.Load(bytes.NewReader(tc.data))
			if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "uncompressed bytes") {
				t.Errorf("truncated file loaded with error %v (stats %+v), want io.ErrUnexpectedEOF and the offset", err, l.Stats)
			}
		})
	}
}

// TestRIBAddPath turns the real IPv4 RIB record into its RFC 8050 Add-Path form with two
// entries of the same peer (path IDs 1 and 2, different AS paths).
func TestRIBAddPath(t *testing.T) {
	peerIndex, _ := hex.DecodeString(v2Records[0].body)
	v4, _ := hex.DecodeString(v2Records[1].body)
	// v4: sequence (4), length 24, 1.0.0 (3), entry count (2), then one entry: peer index (2),
	// originated time (4), attribute length (2), attributes.
	head, entry := v4[:8], v4[10:]
	attrs := entry[8:]
	other := bytes.Clone(attrs)
	other[len(other)-7-1] = 0x01 // last AS of the path: 4323 (0x10e3) -> 4097 (0x1001)
	other[len(other)-7-2] = 0x10
	rec := append(bytes.Clone(head), 0, 2)
	for i, a := range [][]byte{attrs, other} {
		rec = append(rec, entry[:6]...)
		rec = binary.BigEndian.AppendUint32(rec, uint32(i+1))
		rec = binary.BigEndian.AppendUint16(rec, uint16(len(a)))
		rec = append(rec, a...)
	}
	var in []byte
	for _, r := range []struct {
		st   uint16
		body []byte
	}{{mrt.SubtypePeerIndexTable, peerIndex}, {mrt.SubtypeRIBIPv4UnicastAddPath, rec}} {
		in = binary.BigEndian.AppendUint32(in, 0)
		in = binary.BigEndian.AppendUint16(in, mrt.TypeTableDumpV2)
		in = binary.BigEndian.AppendUint16(in, r.st)
		in = binary.BigEndian.AppendUint32(in, uint32(len(r.body)))
		in = append(in, r.body...)
	}
	r := rib.NewTable(rib.DefaultConfiguration())
	l := mrt.NewLoader(r, mrt.Options{})
	if err := l.Load(bytes.NewReader(in)); err != nil || l.Stats.Corrupt != 0 {
		t.Fatalf("%v, %d corrupt (%v)", err, l.Stats.Corrupt, l.LastError)
	}
	paths := r.Paths(a("1.0.0.1"))
	if len(paths) != 2 || paths[0].PathID != 1 || paths[1].PathID != 2 ||
		paths[0].Attrs.OriginAS() != 4323 || paths[1].Attrs.OriginAS() != 4097 || !paths[0].Selected {
		t.Errorf("paths %+v", paths)
	}
}

func TestCorruptRecordsSkipped(t *testing.T) {
	plain := v2Stream(t)
	// Make the IPv4 record's attribute length overflow its record: the record is counted
	// as corrupt, the other two are applied.
	i := bytes.Index(plain, []byte{0x00, 0x20, 0x40, 0x01, 0x01, 0x00})
	plain[i+1] = 0xff
	r := rib.NewTable(rib.DefaultConfiguration())
	l := mrt.NewLoader(r, mrt.Options{})
	if err := l.Load(bytes.NewReader(plain)); err != nil {
		t.Fatal(err)
	}
	if l.Stats.Corrupt != 1 || !errors.Is(l.LastError, mrt.ErrCorrupt) {
		t.Errorf("corrupt %d, last error %v", l.Stats.Corrupt, l.LastError)
	}
	if _, ok := r.Lookup(a("2001:4:112::1")); !ok {
		t.Error("IPv6 record after the corrupt one not applied")
	}
	// A truncated file ends the load with an error after the complete records.
	r = rib.NewTable(rib.DefaultConfiguration())
	l = mrt.NewLoader(r, mrt.Options{})
	err := l.Load(bytes.NewReader(v2Stream(t)[:len(plain)-10]))
	if !errors.Is(err, io.ErrUnexpectedEOF) || l.Stats.RIBEntries != 1 {
		t.Errorf("truncated: %v, %d entries", err, l.Stats.RIBEntries)
	}
}

func loadFile(t *testing.T, name string, opts mrt.Options) (*rib.RIB, mrt.Stats) {
	t.Helper()
	r := rib.NewTable(rib.DefaultConfiguration())
	st, err := mrt.LoadFile(r, testdata.Path(t, "rib", name), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r, st
}

func TestTableDumpV1(t *testing.T) {
	var progress strings.Builder
	r, st := loadFile(t, "ripe-bgpdump-bview.20020722.2337.gz", mrt.Options{Progress: &progress})
	if st.Records != 115521 || st.RIBEntries != 115521 || st.Corrupt != 0 || st.Unsupported != 0 {
		t.Errorf("stats %+v", st)
	}
	s := r.Stats()
	if s.Peers != 36 || s.Routes != 115521 || s.Prefixes4 != 112988 || s.Prefixes6 != 0 {
		t.Errorf("RIB %+v", s)
	}
	if !strings.Contains(progress.String(), "115521 records") {
		t.Errorf("progress line %q", progress.String())
	}
	rt, ok := r.Lookup(a("193.0.0.1"))
	if !ok || rt.Prefix(a("193.0.0.1")) != netip.MustParsePrefix("193.0.0.0/21") ||
		!slices.Equal(rt.Attrs.ASPath, []uint32{1853, 20965, 1103, 3333}) || rt.Attrs.NextHop != a("193.203.0.1") {
		t.Errorf("193.0.0.1: %+v", rt)
	}
	// 62.10.0.0/15 has two paths; the one of AS3257 carries a MED and communities.
	paths := r.Paths(a("62.10.0.1"))
	if len(paths) != 2 {
		t.Fatalf("62.10.0.1: %d paths", len(paths))
	}
	for _, p := range paths {
		if p.Attrs.ASPath[0] != 3257 {
			continue
		}
		if p.Attrs.MED != 320 || !slices.Equal(p.Attrs.Communities, []uint32{3257<<16 | 4000, 3257<<16 | 5039}) {
			t.Errorf("AS3257 path %+v", *p.Attrs)
		}
	}
	if v, ok := r.Lookup(a("8.8.8.8")); ok {
		t.Errorf("8.8.8.8 routed in 2002: %+v", v)
	}
}

func TestBGP4MPUpdates(t *testing.T) {
	r, st := loadFile(t, "ripe-bgpdump-updates.20160811.1600.gz", mrt.Options{})
	want := mrt.Stats{Records: 17406, Updates: 17216, OtherMessages: 168, Announcements: 39256,
		Withdrawals: 1956, StateChanges: 22, PeersDown: 22}
	st.Bytes, st.Duration = 0, 0
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	s := r.Stats()
	if s.Peers != 40 || s.Prefixes4 != 1595 || s.Prefixes6 != 91 || s.Routes != 15539 || s.AttributeSets != 4011 {
		t.Errorf("RIB %+v", s)
	}
	// 91.67.0.0/17 has 5 paths; "first" selects the peer registered first (37.49.236.228).
	paths := r.Paths(a("91.67.0.1"))
	if len(paths) != 5 {
		t.Fatalf("91.67.0.1: %d paths", len(paths))
	}
	rt, _ := r.Lookup(a("91.67.0.1"))
	if rt.Attrs.NextHop != a("37.49.236.228") || !rt.Attrs.HasMED || rt.Attrs.MED != 1 ||
		!slices.Equal(rt.Attrs.ASPath, []uint32{24482, 18403, 131127, 131127, 45896, 3491, 31334}) ||
		!slices.Contains(rt.Attrs.Communities, 24482<<16|65202) {
		t.Errorf("91.67.0.1: %+v", *rt.Attrs)
	}
	// IPv6 from MP_REACH_NLRI.
	rt, ok := r.Lookup(a("2001:7fb:fe03::1"))
	if !ok || rt.Bits != 48 || rt.Attrs.OriginAS() != 12654 || rt.Attrs.NextHop != a("2001:7f8:54::10") {
		t.Errorf("2001:7fb:fe03::1: %+v", rt)
	}
	// Peers whose session went down have no routes left.
	for _, p := range r.Peers() {
		if p.Address == a("37.49.232.25") && p.Routes != 0 {
			t.Errorf("peer %s still has %d routes", p.Address, p.Routes)
		}
	}
}

func TestTableDumpV2FullTableHead(t *testing.T) {
	// The first records of the 4-peer synthetic full table (the whole file is for
	// BenchmarkLoadMRT).
	r, st := loadFile(t, "synth-rib-fulltable-4peers.mrt.gz", mrt.Options{MaxRecords: 20001})
	if st.Records != 20001 || st.RIBEntries != 80000 || st.Corrupt != 0 {
		t.Errorf("stats %+v", st)
	}
	s := r.Stats()
	if s.Peers != 4 || s.Prefixes4 != 20000 || s.Routes != 80000 {
		t.Errorf("RIB %+v", s)
	}
	if got := len(r.Paths(a("1.0.0.1"))); got != 4 {
		t.Errorf("1.0.0.1: %d paths", got)
	}
}

// firstRecords returns the first n records of a test file, re-framed, for fuzz seeds.
func firstRecords(tb testing.TB, name string, n int) []byte {
	f, err := os.Open(testdata.Path(tb, "rib", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rd, err := mrt.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	defer rd.Close()
	var out []byte
	for range n {
		rec, err := rd.Next()
		if err != nil {
			tb.Fatal(err)
		}
		body := rec.Body
		if rec.Type == mrt.TypeBGP4MPET {
			body = binary.BigEndian.AppendUint32(nil, rec.Microseconds)
			body = append(body, rec.Body...)
		}
		out = binary.BigEndian.AppendUint32(out, rec.Timestamp)
		out = binary.BigEndian.AppendUint16(out, rec.Type)
		out = binary.BigEndian.AppendUint16(out, rec.Subtype)
		out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out
}

func FuzzMRTRead(f *testing.F) {
	f.Add(v2Stream(f))
	f.Add(firstRecords(f, "ripe-bgpdump-bview.20020722.2337.gz", 4))
	f.Add(firstRecords(f, "ripe-bgpdump-updates.20160811.1600.gz", 6))
	f.Add(firstRecords(f, "synth-rib-fulltable-4peers.mrt.gz", 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := rib.NewTable(rib.Configuration{Selection: "best"})
		l := mrt.NewLoader(r, mrt.Options{})
		_ = l.Load(bytes.NewReader(data))
		st := r.Stats()
		n := 0
		for _, rt := range r.All() {
			if rt.Attrs == nil {
				t.Fatal("route without attributes")
			}
			n++
		}
		if n != st.Prefixes4+st.Prefixes6 {
			t.Fatalf("%d routes for %d prefixes", n, st.Prefixes4+st.Prefixes6)
		}
	})
}

// recordOffsets returns where each record of an uncompressed MRT stream starts.
func recordOffsets(tb testing.TB, stream []byte) []int {
	tb.Helper()
	var offs []int
	for i := 0; i < len(stream); i += 12 + int(binary.BigEndian.Uint32(stream[i+8:])) {
		if len(stream)-i < 12 {
			tb.Fatalf("stream cut at %d", i)
		}
		offs = append(offs, i)
	}
	return offs
}

// TestCorruptRecordsCounted damages copies of real dumps the three ways the loader meets
// corruption: a BGP4MP record it applies alone, a TABLE_DUMP_V2 RIB record decoded ahead, and
// framing that breaks (the load ends). Each is counted in Prometheus as in Stats.
func TestCorruptRecordsCounted(t *testing.T) {
	// 30 records of the RIPE updates: the first BGP4MP_MESSAGE_AS4 gets AFI 9.
	updates := firstRecords(t, "ripe-bgpdump-updates.20160811.1600.gz", 30)
	badUpdate := -1
	for _, o := range recordOffsets(t, updates) {
		if binary.BigEndian.Uint16(updates[o+4:]) == mrt.TypeBGP4MP &&
			binary.BigEndian.Uint16(updates[o+6:]) == mrt.SubtypeBGP4MPMessageAS4 {
			// Body: peer AS (4), local AS (4), interface index (2), AFI (2).
			binary.BigEndian.PutUint16(updates[o+12+10:], 9)
			badUpdate = o
			break
		}
	}
	// The synthetic full table's peer index and 4 RIB records: the second RIB record
	// announces 2 entries but holds 1.
	table := firstRecords(t, "synth-rib-fulltable-1peer.mrt.gz", 5)
	offs := recordOffsets(t, table)
	o := offs[2] + 12
	bits := int(table[o+4])
	binary.BigEndian.PutUint16(table[o+5+(bits+7)/8:], 2)
	if badUpdate < 0 || binary.BigEndian.Uint16(table[offs[2]+6:]) != mrt.SubtypeRIBIPv4Unicast {
		t.Fatal("test files changed: records to corrupt not found")
	}
	// Then a record header announcing more than any record may hold.
	framing := []byte{0, 0, 0, 0, 0, 13, 0, 2, 0xff, 0xff, 0xff, 0xff}
	stream := append(append(updates, table...), framing...)

	reg := prometheus.NewRegistry()
	m, err := mrt.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := rib.NewTable(rib.DefaultConfiguration())
	l := mrt.NewLoader(r, mrt.Options{Metrics: m})
	if err := l.Load(bytes.NewReader(stream)); !errors.Is(err, mrt.ErrCorrupt) {
		t.Fatalf("Load: %v, want the framing error", err)
	}
	if l.Stats.Corrupt != 3 || l.Stats.RIBEntries != 4 {
		t.Errorf("stats %+v, want 3 corrupt and the 4 entries present", l.Stats)
	}
	want := `# HELP flowzero_mrt_corrupt_records_total MRT records skipped because they are malformed, and files whose framing broke (the rest of the file is not read).
# TYPE flowzero_mrt_corrupt_records_total counter
flowzero_mrt_corrupt_records_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "flowzero_mrt_corrupt_records_total"); err != nil {
		t.Error(err)
	}
}
