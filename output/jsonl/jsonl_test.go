package jsonl

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"flowzero/schema"
)

func TestFormatter(t *testing.T) {
	s, err := schema.New(schema.Configuration{Enabled: []string{"SrcMAC"}})
	if err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	fm.TimeReceived = 1700000000
	fm.SrcAddr = netip.MustParseAddr("192.0.2.1")
	fm.DstAddr = netip.MustParseAddr("2001:db8::1")
	fm.AppendUint(schema.ColumnDstPort, 443)
	fm.AppendUint(schema.ColumnFlowDirection, schema.DirectionIngress)
	fm.AppendUint(schema.ColumnSrcMAC, 0x001b213c9df8)
	msg := fm.Finalize()
	_, n := binary.Uvarint(msg)

	f, err := New(s, []string{"TimeReceived", "SrcAddr", "DstAddr", "DstPort", "FlowDirection", "SrcMAC"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Append(nil, msg[n:])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"TimeReceived":"2023-11-14T22:13:20Z","SrcAddr":"192.0.2.1","DstAddr":"2001:db8::1","DstPort":443,"FlowDirection":"ingress","SrcMAC":"00:1b:21:3c:9d:f8"}` + "\n"
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	f.TimesAsMillis = true
	got, _ = f.Append(nil, msg[n:])
	if want := `{"TimeReceived":1700000000000,`; string(got[:len(want)]) != want {
		t.Fatalf("millis: %s", got)
	}
	if _, err := New(s, []string{"NoSuchColumn"}); err == nil || err.Error() != `unknown column "NoSuchColumn"` {
		t.Fatalf("unknown column error: %v", err)
	}
	if _, err := f.Append(nil, []byte{0x0a, 0xff}); err == nil {
		t.Fatal("malformed message accepted")
	}
}
