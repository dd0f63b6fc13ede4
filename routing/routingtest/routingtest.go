// Package routingtest holds what tests of the routing component and its users share: the
// real BMP captures replayed into a running component's listener.
package routingtest

import (
	"net"
	"net/netip"
	"testing"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/rib"
)

// BMPCaptures are the Juniper vMX BMP captures, in the order a router sends them.
var BMPCaptures = []string{"bmp-init.pcap", "bmp-peers-up.pcap", "bmp-eor.pcap", "bmp-reach.pcap", "bmp-reach-addpath.pcap"}

// ReplayBMP connects to the BMP listener at addr, sends BMPCaptures over one TCP connection
// and returns once lookup finds the captures' last route (the Add-Path one, 192.0.2.4/31).
// The connection stays open until the test ends, as a router's would.
func ReplayBMP(t testing.TB, addr net.Addr, lookup func(netip.Addr) (rib.Route, bool)) {
	t.Helper()
	conn, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, f := range BMPCaptures {
		dgs, err := pcapfile.ReadTCP(testdata.Path(t, "bmp", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dgs {
			if _, err := conn.Write(d.Payload); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.WaitUntil(t, "the BMP routes", func() bool {
		_, ok := lookup(netip.MustParseAddr("192.0.2.4"))
		return ok
	})
}
