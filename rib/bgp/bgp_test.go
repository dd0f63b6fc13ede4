package bgp_test

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"slices"
	"testing"

	"flowzero/internal/testdata"
	"flowzero/rib/bgp"
	"flowzero/rib/mrt"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Attributes of the first IPv6 RIB entry of synth-rib-fulltable-1peer.mrt.gz (2001:4:112::/48):
// ORIGIN IGP, AS_PATH 1853 1853 1239 701 7046 (4-octet), abbreviated MP_REACH_NLRI 2001:db8::1.
const ribEntryV6Attrs = "40010100" + "4002160205" + "0000073d0000073d000004d7000002bd00001b86" +
	"800e1110" + "20010db8000000000000000000000001"

func TestRIBEntryAbbreviatedMPReach(t *testing.T) {
	var p bgp.AttributeParser
	var a bgp.Attributes
	var mp bgp.MPReach
	err := p.Parse(unhex(t, ribEntryV6Attrs), bgp.Options{ASN: bgp.ASN4, RIBEntry: true, RIBEntryAFI: bgp.AFIIPv6}, &a, &mp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.ASPath, []uint32{1853, 1853, 1239, 701, 7046}) || a.OriginAS() != 7046 || a.ASPathLength != 5 {
		t.Errorf("AS path %v length %d", a.ASPath, a.ASPathLength)
	}
	if a.Origin != bgp.OriginIGP || a.HasMED || a.HasLocalPref {
		t.Errorf("origin %d MED %v local pref %v", a.Origin, a.HasMED, a.HasLocalPref)
	}
	if !mp.Present || mp.NextHop != netip.MustParseAddr("2001:db8::1") || mp.AFI != bgp.AFIIPv6 {
		t.Errorf("MP_REACH %+v", mp)
	}
	// Every truncation is an error, never a panic.
	full := unhex(t, ribEntryV6Attrs)
	for n := 1; n < len(full); n++ {
		if err := p.Parse(full[:n], bgp.Options{ASN: bgp.ASN4, RIBEntry: true, RIBEntryAFI: bgp.AFIIPv6}, &a, &mp, nil); err == nil {
			// A cut that falls between attributes is valid.
			continue
		} else if !errors.Is(err, bgp.ErrMalformed) {
			t.Errorf("cut at %d: %v is not ErrMalformed", n, err)
		}
	}
}

// The first RIB entry of the 2002 RIPE dump (62.10.0.0/15 from AS3257): 2-octet AS_PATH,
// NEXT_HOP, MED 320, COMMUNITIES 3257:4000 3257:5039.
const tableDumpAttrs = "40010100" + "40020602020cb921a4" + "400304c1cb0013" + "80040400000140" +
	"c008080cb90fa00cb913af"

func TestTableDumpAttributes(t *testing.T) {
	var p bgp.AttributeParser
	var a bgp.Attributes
	if err := p.Parse(unhex(t, tableDumpAttrs), bgp.Options{ASN: bgp.ASN2}, &a, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.ASPath, []uint32{3257, 8612}) || a.NextHop != netip.MustParseAddr("193.203.0.19") {
		t.Errorf("AS path %v next hop %s", a.ASPath, a.NextHop)
	}
	if !a.HasMED || a.MED != 320 || !slices.Equal(a.Communities, []uint32{3257<<16 | 4000, 3257<<16 | 5039}) {
		t.Errorf("MED %d communities %v", a.MED, a.Communities)
	}
	// ASNAuto recognizes the 2-octet encoding.
	var b bgp.Attributes
	if err := p.Parse(unhex(t, tableDumpAttrs), bgp.Options{}, &b, nil, nil); err != nil || !b.Equal(&a) {
		t.Errorf("auto: %v %+v", err, b)
	}
}

func TestUpdateMessage(t *testing.T) {
	// An UPDATE with an IPv4 withdrawal, a 2-octet AS_PATH with AS_TRANS completed by
	// AS4_PATH, LOCAL_PREF, LARGE_COMMUNITY and two IPv4 NLRI.
	body := unhex(t, ""+
		"0004"+"18c00002"+ // withdrawn 192.0.2.0/24
		"0037"+ // path attributes length 55
		"40010101"+ // ORIGIN EGP
		"4002060202fde85ba0"+ // AS_PATH 65000 23456
		"400304c0000201"+ // NEXT_HOP 192.0.2.1
		"40050400000064"+ // LOCAL_PREF 100
		"c0110a0202"+"0000fde8"+"00010000"+ // AS4_PATH 65000 65536
		"e0200c"+"0000fde8"+"00000001"+"00000002"+ // LARGE_COMMUNITY 65000:1:2
		"10"+"0a00"+ // NLRI 10.0.0.0/16
		"20"+"c6336401") // NLRI 198.51.100.1/32
	var u bgp.Update
	if err := u.Parse(body, bgp.Options{ASN: bgp.ASN2}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(u.Attrs.ASPath, []uint32{65000, 65536}) {
		t.Errorf("merged AS path %v", u.Attrs.ASPath)
	}
	if !u.Attrs.HasLocalPref || u.Attrs.LocalPref != 100 || u.Attrs.Origin != bgp.OriginEGP {
		t.Errorf("attributes %+v", u.Attrs)
	}
	if !slices.Equal(u.Attrs.LargeCommunities, []bgp.LargeCommunity{{65000, 1, 2}}) {
		t.Errorf("large communities %v", u.Attrs.LargeCommunities)
	}
	var got []string
	r := u.WithdrawnReader()
	for p, ok := r.Next(); ok; p, ok = r.Next() {
		got = append(got, "-"+p.Prefix.String())
	}
	r = u.NLRIReader()
	for p, ok := r.Next(); ok; p, ok = r.Next() {
		got = append(got, "+"+p.Prefix.String())
	}
	if r.Err() != nil || !slices.Equal(got, []string{"-192.0.2.0/24", "+10.0.0.0/16", "+198.51.100.1/32"}) {
		t.Errorf("prefixes %v, %v", got, r.Err())
	}
	if u.IsEndOfRIB() {
		t.Error("not an End-of-RIB")
	}
	if err := u.Parse([]byte{0, 0, 0, 0}, bgp.Options{}); err != nil || !u.IsEndOfRIB() {
		t.Errorf("empty UPDATE: %v, End-of-RIB %v", err, u.IsEndOfRIB())
	}
}

func TestNLRIAddPathAndVPN(t *testing.T) {
	// Add-Path (RFC 7911): path ID 7, 2001:db8::/32.
	r := bgp.NewNLRIReader(unhex(t, "00000007"+"20"+"20010db8"), bgp.FamilyIPv6Unicast, true)
	p, ok := r.Next()
	if !ok || p.PathID != 7 || p.Prefix != netip.MustParsePrefix("2001:db8::/32") {
		t.Errorf("add-path NLRI %+v %v %v", p, ok, r.Err())
	}
	// VPNv4 (RFC 4364): label 16, RD 65000:100, 10.1.0.0/16.
	r = bgp.NewNLRIReader(unhex(t, "68"+"000101"+"0000fde800000064"+"0a01"), bgp.FamilyIPv4VPN, false)
	p, ok = r.Next()
	if !ok || p.Label != 16 || p.RD != 0xfde800000064 || p.Prefix != netip.MustParsePrefix("10.1.0.0/16") {
		t.Errorf("VPN NLRI %+v %v %v", p, ok, r.Err())
	}
	// A prefix longer than the address is an error.
	r = bgp.NewNLRIReader([]byte{33, 1, 2, 3, 4, 5}, bgp.FamilyIPv4Unicast, false)
	if _, ok := r.Next(); ok || !errors.Is(r.Err(), bgp.ErrMalformed) {
		t.Errorf("/33 accepted: %v", r.Err())
	}
}

// realAttributes returns raw path attributes from the real dumps: TABLE_DUMP entries of the
// 2002 RIB and UPDATE bodies of the 2016 updates.
func realAttributes(tb testing.TB, n int) (attrs [][]byte, updates [][]byte) {
	f, err := os.Open(testdata.Path(tb, "rib", "ripe-bgpdump-bview.20020722.2337.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rd, err := mrt.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	defer rd.Close()
	for len(attrs) < n {
		rec, err := rd.Next()
		if err != nil {
			tb.Fatal(err)
		}
		// TABLE_DUMP IPv4: attributes after 22 bytes of header.
		attrs = append(attrs, slices.Clone(rec.Body[22:]))
	}
	g, err := os.Open(testdata.Path(tb, "rib", "ripe-bgpdump-updates.20160811.1600.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer g.Close()
	rd2, err := mrt.NewReader(g)
	if err != nil {
		tb.Fatal(err)
	}
	defer rd2.Close()
	for len(updates) < n {
		rec, err := rd2.Next()
		if err != nil {
			tb.Fatal(err)
		}
		if rec.Subtype != mrt.SubtypeBGP4MPMessageAS4 {
			continue
		}
		// Peer AS, local AS (4 each), ifindex, AFI, then two addresses.
		off := 12 + 8
		if rec.Body[11] == 2 {
			off = 12 + 32
		}
		typ, body, err := bgp.ParseHeader(rec.Body[off:])
		if err != nil {
			tb.Fatal(err)
		}
		if typ == bgp.MessageUpdate {
			updates = append(updates, slices.Clone(body))
		}
	}
	return attrs, updates
}

func TestRealUpdates(t *testing.T) {
	attrs, updates := realAttributes(t, 200)
	var p bgp.AttributeParser
	var a bgp.Attributes
	for i, b := range attrs {
		if err := p.Parse(b, bgp.Options{ASN: bgp.ASN2}, &a, nil, nil); err != nil {
			t.Errorf("RIB entry %d: %v", i, err)
		}
		if len(a.ASPath) == 0 || !a.NextHop.Is4() {
			t.Errorf("RIB entry %d: %+v", i, a)
		}
	}
	var u bgp.Update
	var prefixes int
	for i, b := range updates {
		if err := u.Parse(b, bgp.Options{ASN: bgp.ASN4}); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		r := u.NLRIReader()
		for _, ok := r.Next(); ok; _, ok = r.Next() {
			prefixes++
		}
		if mr, _, ok := u.MPReachReader(); ok {
			for _, ok := mr.Next(); ok; _, ok = mr.Next() {
				prefixes++
			}
			if !u.MPReach.NextHop.Is6() {
				t.Errorf("update %d: MP next hop %s", i, u.MPReach.NextHop)
			}
		}
	}
	if prefixes == 0 {
		t.Error("no prefix in 200 real updates")
	}
}

func BenchmarkParseUpdate(b *testing.B) {
	_, updates := realAttributes(b, 200)
	var u bgp.Update
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := u.Parse(updates[i%len(updates)], bgp.Options{ASN: bgp.ASN4}); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzBGPAttributes(f *testing.F) {
	attrs, updates := realAttributes(f, 20)
	for _, a := range attrs {
		f.Add(a, false)
	}
	for _, u := range updates {
		f.Add(u, true)
	}
	f.Add(unhex(f, ribEntryV6Attrs), false)
	f.Fuzz(func(t *testing.T, data []byte, update bool) {
		if update {
			var u bgp.Update
			if err := u.Parse(data, bgp.Options{AddPath: bgp.FamilySet(len(data) & 0xff)}); err != nil {
				return
			}
			for _, r := range []bgp.NLRIReader{u.WithdrawnReader(), u.NLRIReader()} {
				for p, ok := r.Next(); ok; p, ok = r.Next() {
					if !p.Prefix.IsValid() {
						t.Fatal("invalid prefix without error")
					}
				}
			}
			if r, _, ok := u.MPReachReader(); ok {
				for _, ok := r.Next(); ok; _, ok = r.Next() {
				}
			}
			if r, _, ok := u.MPUnreachReader(); ok {
				for _, ok := r.Next(); ok; _, ok = r.Next() {
				}
			}
			return
		}
		var p bgp.AttributeParser
		var a bgp.Attributes
		var mp bgp.MPReach
		_ = p.Parse(data, bgp.Options{RIBEntry: len(data)%2 == 0, RIBEntryAFI: bgp.AFIIPv6}, &a, &mp, nil)
		c := a.Clone()
		if !c.Equal(&a) {
			t.Fatal("clone differs")
		}
	})
}
