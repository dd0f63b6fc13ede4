package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"testing"
	"time"

	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

func decoders() Decoders {
	return Decoders{Schema: schema.DefaultConfiguration(), NetFlow: netflow.DefaultConfiguration(), SFlow: sflow.DefaultConfiguration()}
}

// TestDecode decodes the NetFlow v5 capture (29 flows) and an sFlow one (5 flow samples):
// one JSON object per flow, with the capture's addresses.
func TestDecode(t *testing.T) {
	var out bytes.Buffer
	files := []string{testdata.Path(t, "netflow", "nfv5.pcap"), testdata.Path(t, "sflow", "data-1140.pcap")}
	sum, err := Decode(decoders(), files, DecodeOptions{Columns: []string{"SrcAddr", "TimeReceived"}, TimesAsMillis: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Datagrams != 2 || sum.Flows != 29+5 || sum.Skipped != 0 || len(sum.Errors) != 0 {
		t.Fatalf("summary %+v, want 2 datagrams and 34 flows", sum)
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != 34 {
		t.Fatalf("%d lines, want 34", len(lines))
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if _, err := netip.ParseAddr(m["SrcAddr"].(string)); err != nil || len(m) != 2 {
			t.Fatalf("line %q: want SrcAddr and TimeReceived only", l)
		}
	}
}

func TestProtocol(t *testing.T) {
	for _, tc := range []struct {
		payload []byte
		want    string
	}{
		{[]byte{0, 0, 0, 5, 0, 0, 0, 1}, "sflow"},
		{[]byte{0, 5, 0, 1}, "netflow"},
		{[]byte{0, 9, 0, 1}, "netflow"},
		{[]byte{0, 10, 0, 1}, "netflow"},
		{[]byte{0, 7, 0, 1}, ""},
		{[]byte{0, 9}, ""},
		{nil, ""},
	} {
		if got := Protocol(tc.payload); got != tc.want {
			t.Errorf("Protocol(% x) = %q, want %q", tc.payload, got, tc.want)
		}
	}
}

// TestSend sends a NetFlow v9 capture group to a UDP socket: every datagram arrives, in
// order, from one local socket per original exporter.
func TestSend(t *testing.T) {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var files []string
	var want [][]byte
	for _, name := range []string{"options-template", "options-data", "template", "data"} {
		f := testdata.Path(t, "netflow", name+".pcap")
		dgs, err := pcapfile.ReadUDP(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dgs {
			want = append(want, d.Payload)
		}
		files = append(files, f)
	}
	st, err := Send(context.Background(), files, SendOptions{To: conn.LocalAddr().(*net.UDPAddr).AddrPort()})
	if err != nil {
		t.Fatal(err)
	}
	if st.Datagrams != len(want) || st.Exporters != 1 {
		t.Fatalf("stats %+v, want %d datagrams from 1 exporter", st, len(want))
	}
	buf := make([]byte, 65536)
	var from netip.AddrPort
	for i, w := range want {
		conn.SetReadDeadline(time.Now().Add(testutil.WaitTimeout))
		n, src, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && src != from {
			t.Errorf("datagram %d from %s, the first from %s: want one socket", i, src, from)
		}
		from = src
		if !bytes.Equal(buf[:n], w) {
			t.Errorf("datagram %d differs from the capture's", i)
		}
	}
}
