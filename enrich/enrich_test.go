package enrich

import (
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/config"
	"flowzero/internal/testdata"
	"flowzero/rib"
	"flowzero/rib/bgp"
	"flowzero/rib/bmp"
	"flowzero/routing"
	"flowzero/routing/routingtest"
	"flowzero/schema"
)

// routingSchema enables every routing column.
func routingSchema(tb testing.TB, disabled ...string) *schema.Schema {
	tb.Helper()
	var enabled []string
	for _, c := range []string{"SrcCommunities", "DstCommunities", "SrcLargeCommunities", "DstLargeCommunities", "NextHop", "SrcNetMask", "DstNetMask", "DstASPath"} {
		if !slices.Contains(disabled, c) {
			enabled = append(enabled, c)
		}
	}
	s, err := schema.New(schema.Configuration{Enabled: enabled, Disabled: disabled})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// startRouting loads the real RIPE BGP4MP updates (MRT) and replays the Juniper vMX BMP
// captures over TCP: the combined sources the collector runs.
func startRouting(t *testing.T) *routing.Component {
	t.Helper()
	cfg := routing.DefaultConfiguration()
	cfg.RIB.Selection = "best"
	cfg.MRT = []string{testdata.Path(t, "rib", "ripe-bgpdump-updates.20160811.1600.gz")}
	cfg.BMP.Enabled = true
	cfg.BMP.Listen = "127.0.0.1:0"
	cfg.BMP.RDs = []bmp.RD{0} // the global table only: VPN routes stay out
	c, err := routing.New(prometheus.NewRegistry(), cfg, routing.Dependencies{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	routingtest.ReplayBMP(t, c.BMPAddr(), c.Lookup)
	return c
}

type flowIn struct {
	src, dst, nh     string
	srcAS, dstAS     uint32
	srcMask, dstMask uint8
	dstPath          []uint32
}

type flowOut struct {
	SrcAS, DstAS           uint32
	SrcNetMask, DstNetMask uint8
	NextHop                netip.Addr
	DstASPath              []uint32
	SrcCommunities         []uint32
	DstCommunities         []uint32
	DstLargeCommunities    []schema.LargeCommunity
}

func run(e *Enricher, fm *schema.FlowMessage, in flowIn) flowOut {
	fm.Reset()
	fm.SrcAddr = netip.MustParseAddr(in.src)
	fm.DstAddr = netip.MustParseAddr(in.dst)
	if in.nh != "" {
		fm.NextHop = netip.MustParseAddr(in.nh)
	}
	fm.SrcAS, fm.DstAS = in.srcAS, in.dstAS
	fm.SrcNetMask, fm.DstNetMask = in.srcMask, in.dstMask
	fm.DstASPath = in.dstPath
	e.Enrich(fm)
	return flowOut{fm.SrcAS, fm.DstAS, fm.SrcNetMask, fm.DstNetMask, fm.NextHop, fm.DstASPath,
		fm.SrcCommunities, fm.DstCommunities, fm.DstLargeCommunities}
}

func equal(a, b flowOut) bool {
	return a.SrcAS == b.SrcAS && a.DstAS == b.DstAS && a.SrcNetMask == b.SrcNetMask && a.DstNetMask == b.DstNetMask &&
		a.NextHop == b.NextHop && slices.Equal(a.DstASPath, b.DstASPath) && slices.Equal(a.SrcCommunities, b.SrcCommunities) &&
		slices.Equal(a.DstCommunities, b.DstCommunities) && slices.Equal(a.DstLargeCommunities, b.DstLargeCommunities)
}

func TestEnrich(t *testing.T) {
	c := startRouting(t)
	table := c.RIB()
	// A default route, to exercise the *-except-default-route providers: the only route
	// here that is not from the captures.
	tx := table.Begin()
	id := tx.Peer(rib.PeerKey{Address: netip.MustParseAddr("203.0.113.1"), AS: 64999}, netip.Addr{})
	tx.Add(id, netip.MustParsePrefix("0.0.0.0/0"), 0, &bgp.Attributes{ASPath: []uint32{64999, 3356}, NextHop: netip.MustParseAddr("203.0.113.1"), Communities: []uint32{1}})
	tx.Commit()

	sch := routingSchema(t)
	fm := sch.NewFlowMessage()
	// From the RIPE updates (MRT): 12.231.178.0/24 has 10 paths; the best (shortest AS path,
	// then IGP origin, lowest MED, lowest peer address) is via 37.49.236.61, without
	// communities.
	mrtSrc := "12.231.178.10"
	var mrtComms []uint32
	// From the BMP captures: 198.51.100.128/25 via 192.0.2.1 (peer AS 65011).
	bmpDst := "198.51.100.200"
	bmpPath := []uint32{65011, 65011, 174, 29447, 396919}
	bmpNH := netip.MustParseAddr("192.0.2.1")

	cases := []struct {
		name string
		cfg  func(*Configuration)
		in   flowIn
		want flowOut
	}{
		{
			name: "rib-fills-empty-flow-mrt-and-bmp",
			in:   flowIn{src: "198.51.100.10", dst: mrtSrc},
			want: flowOut{SrcAS: 64476, DstAS: 6318, SrcNetMask: 25, DstNetMask: 24, NextHop: netip.MustParseAddr("37.49.236.61"),
				DstASPath: []uint32{8426, 6453, 701, 6318}, SrcCommunities: []uint32{4260560906, 4260560916}},
		},
		{
			name: "rib-fills-empty-flow",
			in:   flowIn{src: mrtSrc, dst: bmpDst},
			want: flowOut{SrcAS: 6318, DstAS: 396919, SrcNetMask: 24, DstNetMask: 25, NextHop: bmpNH,
				DstASPath: bmpPath, SrcCommunities: mrtComms, DstCommunities: []uint32{4260560908}},
		},
		{
			name: "flow-wins-by-default",
			in:   flowIn{src: mrtSrc, dst: bmpDst, srcAS: 64512, dstAS: 13335, srcMask: 16, dstMask: 20, nh: "198.18.0.1", dstPath: []uint32{13335}},
			want: flowOut{SrcAS: 64512, DstAS: 13335, SrcNetMask: 16, DstNetMask: 20, NextHop: netip.MustParseAddr("198.18.0.1"),
				DstASPath: []uint32{13335}, SrcCommunities: mrtComms, DstCommunities: []uint32{4260560908}},
		},
		{
			name: "flow-except-private",
			cfg:  func(c *Configuration) { c.ASNProviders = []ASNProvider{ASNFlowExceptPrivate, ASNRouting} },
			in:   flowIn{src: mrtSrc, dst: bmpDst, srcAS: 64512, dstAS: 13335},
			want: flowOut{SrcAS: 6318, DstAS: 13335, SrcNetMask: 24, DstNetMask: 25, NextHop: bmpNH,
				DstASPath: bmpPath, SrcCommunities: mrtComms, DstCommunities: []uint32{4260560908}},
		},
		{
			name: "flow-except-default-route",
			cfg:  func(c *Configuration) { c.ASNProviders = []ASNProvider{ASNFlowExceptDefaultRoute, ASNRouting} },
			in:   flowIn{src: mrtSrc, dst: bmpDst, srcAS: 3356, dstAS: 3356, srcMask: 0, dstMask: 25},
			want: flowOut{SrcAS: 6318, DstAS: 3356, SrcNetMask: 24, DstNetMask: 25, NextHop: bmpNH,
				DstASPath: bmpPath, SrcCommunities: mrtComms, DstCommunities: []uint32{4260560908}},
		},
		{
			name: "routing-first",
			cfg: func(c *Configuration) {
				c.ASNProviders = []ASNProvider{ASNRouting, ASNFlow}
				c.NetProviders = []NetProvider{NetRouting, NetFlow}
			},
			in: flowIn{src: mrtSrc, dst: bmpDst, srcAS: 1, dstAS: 2, srcMask: 8, dstMask: 8, nh: "198.18.0.1"},
			want: flowOut{SrcAS: 6318, DstAS: 396919, SrcNetMask: 24, DstNetMask: 25, NextHop: bmpNH,
				DstASPath: bmpPath, SrcCommunities: mrtComms, DstCommunities: []uint32{4260560908}},
		},
		{
			name: "routing-only-no-route",
			cfg:  func(c *Configuration) { c.ASNProviders = []ASNProvider{ASNRouting} },
			in:   flowIn{src: "2001:db8:ffff::1", dst: "2001:db8:fffe::1", srcAS: 1, dstAS: 2},
			want: flowOut{},
		},
		{
			name: "ipv6-bmp-large-communities",
			in:   flowIn{src: "2001:db8:ffff::1", dst: "2001:db8:2::1"},
			// 2001:db8:2::/64: 2001:db8::3 and 2001:db8::7 have equal AS path lengths; the
			// best path is the lowest peer address.
			want: flowOut{DstAS: 12322, DstNetMask: 64, NextHop: netip.MustParseAddr("2001:db8::3"),
				DstASPath: []uint32{65013, 65013, 1299, 1299, 1299, 12322}, DstCommunities: []uint32{4260691998}},
		},
		{
			name: "ipv4-mapped",
			in:   flowIn{src: "::ffff:12.231.178.10", dst: "::ffff:198.51.100.200"},
			want: flowOut{SrcAS: 6318, DstAS: 396919, SrcNetMask: 24, DstNetMask: 25, NextHop: bmpNH,
				DstASPath: bmpPath, SrcCommunities: mrtComms, DstCommunities: []uint32{4260560908}},
		},
		{
			name: "default-route-routing",
			in:   flowIn{src: "192.0.2.200", dst: "192.0.2.201"},
			// The default route gives an AS and a next hop but no attributes.
			want: flowOut{SrcAS: 3356, DstAS: 3356, NextHop: netip.MustParseAddr("203.0.113.1")},
		},
		{
			name: "default-route-excluded",
			cfg: func(c *Configuration) {
				c.ASNProviders = []ASNProvider{ASNRoutingExceptDefaultRoute}
				c.NetProviders = []NetProvider{NetFlow, NetRoutingExceptDefaultRoute}
			},
			in:   flowIn{src: "192.0.2.200", dst: "192.0.2.201"},
			want: flowOut{},
		},
		{
			name: "empty-as-path-is-peer-as",
			// 192.0.2.4/31 (Add-Path capture) has an empty AS path: originated in the
			// peer's AS, 65500 (iBGP).
			in:   flowIn{src: mrtSrc, dst: "192.0.2.5"},
			want: flowOut{SrcAS: 6318, DstAS: 65500, SrcNetMask: 24, DstNetMask: 31, NextHop: netip.MustParseAddr("192.0.2.5"), DstASPath: []uint32{}},
		},
		{
			name: "routing-except-private",
			cfg:  func(c *Configuration) { c.ASNProviders = []ASNProvider{ASNRoutingExceptPrivate, ASNFlow} },
			// 192.0.2.0/31 is originated by private AS 65011 (its AS path is [65011]).
			in:   flowIn{src: "192.0.2.0", dst: bmpDst, srcAS: 7, dstAS: 8},
			want: flowOut{SrcAS: 7, DstAS: 396919, SrcNetMask: 31, DstNetMask: 25, NextHop: bmpNH, DstASPath: bmpPath, DstCommunities: []uint32{4260560908}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfiguration()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			e, err := New(cfg, c, sch)
			if err != nil {
				t.Fatal(err)
			}
			if got := run(e, fm, tc.in); !equal(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}

	t.Run("large-communities", func(t *testing.T) {
		// 2001:db8:1::/64 from 2001:db8::7 carries a large community; make it the only path.
		paths := table.Paths(netip.MustParseAddr("2001:db8:1::1")) // before Begin: it locks too
		tx := table.Begin()
		for _, p := range paths {
			if p.Attrs.NextHop != netip.MustParseAddr("2001:db8::7") {
				tx.Withdraw(p.Peer, p.Prefix, p.PathID)
			}
		}
		tx.Commit()
		e, _ := New(DefaultConfiguration(), c, sch)
		got := run(e, fm, flowIn{src: "2001:db8:1::2", dst: "2001:db8:1::1"})
		want := []schema.LargeCommunity{{ASN: 65017, LocalData1: 300, LocalData2: 4}}
		if !slices.Equal(got.DstLargeCommunities, want) || got.DstAS != 174 || got.SrcAS != 174 {
			t.Errorf("got %+v, want DstAS 174 and large communities %v", got, want)
		}
		// Finalize encodes the views into the message.
		if len(fm.Finalize()) == 0 {
			t.Error("empty message")
		}
	})

	t.Run("disabled-columns-skip-lookups", func(t *testing.T) {
		sch := routingSchema(t, "SrcAS", "DstAS", "SrcNetMask", "DstNetMask", "NextHop", "DstASPath",
			"SrcCommunities", "DstCommunities", "SrcLargeCommunities", "DstLargeCommunities", "Dst1stAS", "Dst2ndAS", "Dst3rdAS",
			"SrcNetPrefix", "DstNetPrefix")
		e, err := New(DefaultConfiguration(), c, sch)
		if err != nil {
			t.Fatal(err)
		}
		if e.lookSrc || e.lookDst {
			t.Fatal("lookups enabled without any routing column")
		}
		if got := run(e, sch.NewFlowMessage(), flowIn{src: mrtSrc, dst: bmpDst}); !equal(got, flowOut{}) {
			t.Errorf("got %+v", got)
		}
	})
}

func TestConfiguration(t *testing.T) {
	cfg := DefaultConfiguration()
	err := config.Decode([]byte("asn-providers: [flow-except-private, bmp]\nnet-providers: [routing, flow]\n"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.ASNProviders, []ASNProvider{ASNFlowExceptPrivate, ASNRouting}) ||
		!slices.Equal(cfg.NetProviders, []NetProvider{NetRouting, NetFlow}) {
		t.Errorf("decoded %+v", cfg)
	}
	for _, bad := range []string{"asn-providers: [asn]\n", "asn-providers: [geoip, flow]\n", "net-providers: [flow, flow]\n", "asn-providers: [flow, flow]\n"} {
		cfg := DefaultConfiguration()
		if err := config.Decode([]byte(bad), &cfg); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	cfg = DefaultConfiguration()
	if !cfg.GeoIPASN() {
		t.Error("the default AS number providers do not end with geoip")
	}
	if err := config.Decode([]byte("asn-providers: [flow, geoip]\n"), &cfg); err != nil || !cfg.GeoIPASN() {
		t.Errorf("asn-providers: [flow, geoip]: %v", err)
	}
	// An SNMP map the user writes replaces the default one: ::/0 is no longer polled with
	// the community public.
	cfg = DefaultConfiguration()
	if err := config.Decode([]byte(`
snmp:
  enabled: true
  credentials:
    10.0.0.0/8:
      user-name: monitor
      authentication-protocol: SHA
      authentication-passphrase: longenough
`), &cfg); err != nil {
		t.Fatal(err)
	}
	if creds := cfg.Dynamic.SNMP.Credentials; len(creds) != 1 || creds["10.0.0.0/8"].UserName != "monitor" {
		t.Errorf("snmp.credentials merged with the default: %v", slices.Collect(maps.Keys(creds)))
	}
	if ports := cfg.Dynamic.SNMP.Ports; len(ports) != 1 || ports["::/0"] != 161 {
		t.Errorf("snmp.ports, not written, lost its default: %v", ports)
	}
}

func TestPrivateAS(t *testing.T) {
	for as, want := range map[uint32]bool{0: true, 174: false, 23456: true, 64496: true, 64512: true, 65535: true, 65551: true,
		65552: false, 396919: false, 4200000000: true, 4294967295: true} {
		if PrivateAS(as) != want {
			t.Errorf("PrivateAS(%d) = %v", as, !want)
		}
	}
}
