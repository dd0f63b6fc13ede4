package rib_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"runtime"
	"sync"
	"testing"

	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	gobmp "github.com/osrg/gobgp/v4/pkg/packet/bmp"
	gomrt "github.com/osrg/gobgp/v4/pkg/packet/mrt"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/rib/bgp"
	"flowzero/rib/bmp"
	"flowzero/rib/mrt"
)

// The parsing benchmarks compare flowzero's BGP, MRT and BMP decoding (rib/bgp, rib/mrt,
// rib/bmp) with gobgp's (pkg/packet/bgp, mrt, bmp) on the same bytes, decoding the same
// things: every RIB entry's path attributes of a full-table dump, every route of the BMP
// route monitoring capture. Neither side touches a RIB: what the loader and the BMP server
// add to it is in BenchmarkLoadMRT and rib/bmp's BenchmarkRouteMonitoring.

var (
	mrtOnce sync.Once
	mrtRaw  []byte // synth-rib-fulltable-1peer.mrt.gz, uncompressed
)

// fullTable returns the uncompressed bytes of the 1-peer full table (1,062,046 RIB entries):
// both parsers read them from memory, so that neither pays for gzip.
func fullTable(b *testing.B) []byte {
	path := testdata.Path(b, "rib", "synth-rib-fulltable-1peer.mrt.gz")
	mrtOnce.Do(func() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			b.Fatal(err)
		}
		if mrtRaw, err = io.ReadAll(zr); err != nil {
			b.Fatal(err)
		}
	})
	return mrtRaw
}

// TABLE_DUMP_V2 (RFC 6396 §4.3).
const (
	mrtTableDumpV2 = 13
	mrtRIBIPv4     = 2
	mrtRIBIPv6     = 4
)

// BenchmarkParseMRT decodes every RIB entry's path attributes of the full table, one full
// pass per iteration, and reports the time, allocations and bytes per entry.
func BenchmarkParseMRT(b *testing.B) {
	raw := fullTable(b)
	b.Run("flowzero", func(b *testing.B) {
		var p bgp.AttributeParser
		var attrs bgp.Attributes
		var mp bgp.MPReach
		perEntry(b, func() (entries int) {
			r, err := mrt.NewReader(bytes.NewReader(raw))
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			for {
				rec, err := r.Next()
				if err == io.EOF {
					return entries
				}
				if err != nil {
					b.Fatal(err)
				}
				if rec.Type != mrtTableDumpV2 || (rec.Subtype != mrtRIBIPv4 && rec.Subtype != mrtRIBIPv6) {
					continue
				}
				afi := bgp.AFIIPv4
				if rec.Subtype == mrtRIBIPv6 {
					afi = bgp.AFIIPv6
				}
				opts := bgp.Options{ASN: bgp.ASN4, RIBEntry: true, RIBEntryAFI: afi}
				// sequence (4), prefix length (1), prefix, entry count (2), entries.
				body := rec.Body[4:]
				body = body[1+(int(body[0])+7)/8:]
				n := int(binary.BigEndian.Uint16(body))
				body = body[2:]
				for range n {
					// peer index (2), originated time (4), attribute length (2), attributes.
					l := int(binary.BigEndian.Uint16(body[6:]))
					if err := p.Parse(body[8:8+l], opts, &attrs, &mp, nil); err != nil {
						b.Fatal(err)
					}
					body = body[8+l:]
					entries++
				}
			}
		})
	})
	b.Run("gobgp", func(b *testing.B) {
		perEntry(b, func() (entries int) {
			data := raw
			for len(data) > 0 {
				h, err := gomrt.ParseHeader(data)
				if err != nil {
					b.Fatal(err)
				}
				end := gomrt.MRT_COMMON_HEADER_LEN + int(h.Len)
				msg, err := gomrt.ParseBody(data[gomrt.MRT_COMMON_HEADER_LEN:end], h)
				if err != nil {
					b.Fatal(err)
				}
				data = data[end:]
				if r, ok := msg.Body.(*gomrt.Rib); ok {
					entries += len(r.Entries)
				}
			}
			return entries
		})
	})
}

// perEntry runs pass once per iteration and reports the wall and thread CPU time, the
// allocations and the bytes per entry it returned.
func perEntry(b *testing.B, pass func() int) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := testutil.ThreadCPUTime()
	entries := 0
	for b.Loop() {
		entries += pass()
	}
	cpu := testutil.ThreadCPUTime() - cpu0
	runtime.ReadMemStats(&after)
	if entries == 0 {
		b.Fatal("no RIB entry")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(entries), "ns/entry")
	b.ReportMetric(float64(cpu)/float64(entries), "cpu-ns/entry")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(entries), "allocs/entry")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(entries), "B/entry")
}

// BenchmarkParseBMP decodes the 17 route monitoring messages of the Juniper vMX capture
// (IPv4 and IPv6 unicast, VPN and EVPN routes): per-peer header, BGP UPDATE, attributes and
// every NLRI (flowzero's NLRI reader covers the unicast, labelled and VPN families; the
// EVPN route's NLRI is left to rib/bmp, as the server does).
func BenchmarkParseBMP(b *testing.B) {
	var msgs [][]byte
	for _, f := range []string{"bmp-reach.pcap"} {
		segs, err := pcapfile.ReadTCP(testdata.Path(b, "bmp", f))
		if err != nil {
			b.Fatal(err)
		}
		var stream []byte
		for _, s := range segs {
			stream = append(stream, s.Payload...)
		}
		r := bmp.NewReader(bytes.NewReader(stream))
		for {
			h, m, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if h.Type == bmp.MsgRouteMonitoring {
				msgs = append(msgs, bytes.Clone(m))
			}
		}
	}
	if len(msgs) != 17 {
		b.Fatalf("%d route monitoring messages, want 17", len(msgs))
	}
	b.Run("flowzero", func(b *testing.B) {
		var u bgp.Update
		cpu := testutil.StartCPU(b)
		routes := 0
		for b.Loop() {
			for _, m := range msgs {
				ph, err := bmp.ParsePeerHeader(m[bmp.CommonHeaderLen:])
				if err != nil {
					b.Fatal(err)
				}
				body, err := bmp.BGPUpdateBody(m[bmp.CommonHeaderLen+bmp.PeerHeaderLen:])
				if err != nil {
					b.Fatal(err)
				}
				opts := bgp.Options{ASN: bgp.ASN4}
				if ph.AS2() {
					opts.ASN = bgp.ASN2
				}
				if err := u.Parse(body, opts); err != nil {
					b.Fatal(err)
				}
				nr := u.NLRIReader()
				for _, ok := nr.Next(); ok; _, ok = nr.Next() {
					routes++
				}
				if mr, _, ok := u.MPReachReader(); ok {
					for _, ok := mr.Next(); ok; _, ok = mr.Next() {
						routes++
					}
				}
			}
		}
		cpu.Stop(b)
		if routes == 0 {
			b.Fatal("no route decoded")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
	})
	b.Run("gobgp", func(b *testing.B) {
		cpu := testutil.StartCPU(b)
		routes := 0
		for b.Loop() {
			for _, m := range msgs {
				msg, err := gobmp.ParseBMPMessage(m)
				if err != nil {
					b.Fatal(err)
				}
				rm, ok := msg.Body.(*gobmp.BMPRouteMonitoring)
				if !ok {
					b.Fatalf("%T, want route monitoring", msg.Body)
				}
				u := rm.BGPUpdate.Body.(*gobgp.BGPUpdate)
				routes += len(u.NLRI)
				for _, a := range u.PathAttributes {
					if mp, ok := a.(*gobgp.PathAttributeMpReachNLRI); ok {
						routes += len(mp.Value)
					}
				}
			}
		}
		cpu.Stop(b)
		if routes == 0 {
			b.Fatal("no route decoded")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
	})
}
