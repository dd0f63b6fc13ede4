package snmp

import (
	"encoding/binary"
	"testing"
	"unicode/utf8"

	"github.com/gosnmp/gosnmp"
)

func TestDecodeAnswer(t *testing.T) {
	str := func(oid, s string) gosnmp.SnmpPDU {
		return gosnmp.SnmpPDU{Name: "." + oid, Type: gosnmp.OctetString, Value: []byte(s)}
	}
	none := func(oid string) gosnmp.SnmpPDU { return gosnmp.SnmpPDU{Name: "." + oid, Type: gosnmp.NoSuchInstance} }
	vars := []gosnmp.SnmpPDU{
		str(oidSysName, "edge1.par1"),
		// ifName, ifAlias and ifHighSpeed.
		str(oidIfDescr+".1", "Juniper Networks, Inc. et-0/0/1"), str(oidIfName+".1", "et-0/0/1"),
		str(oidIfAlias+".1", "Transit: Cogent"), {Name: "." + oidIfHighSpeed + ".1", Type: gosnmp.Gauge32, Value: uint(100000)},
		// No ifXTable: ifDescr is the name.
		str(oidIfDescr+".2", "GigabitEthernet0/2"), none(oidIfName + ".2"), none(oidIfAlias + ".2"), none(oidIfHighSpeed + ".2"),
		// ifAlias equal to the name: ifDescr describes it.
		str(oidIfDescr+".3", "Ethernet 3 uplink"), str(oidIfName+".3", "eth3"), str(oidIfAlias+".3", "eth3"),
		{Name: "." + oidIfHighSpeed + ".3", Type: gosnmp.Integer, Value: 0},
		// Unknown interface.
		none(oidIfDescr + ".4"), none(oidIfName + ".4"), none(oidIfAlias + ".4"), none(oidIfHighSpeed + ".4"),
		// Values of the wrong type: a bad answer, not an unknown interface.
		str(oidIfDescr+".6", "et-0/0/6"), {Name: "." + oidIfName + ".6", Type: gosnmp.Integer, Value: -1},
		str(oidIfDescr+".7", "et-0/0/7"), str(oidIfName+".7", "et-0/0/7"), {Name: "." + oidIfHighSpeed + ".7", Type: gosnmp.Counter64, Value: uint64(10)},
		str(oidIfName+".8", "et-0/0/8"), {Name: "." + oidIfAlias + ".8", Type: gosnmp.Null},
		{Name: "." + oidIfHighSpeed + ".9", Type: gosnmp.Integer, Value: -5}, str(oidIfName+".9", "et-0/0/9"),
		// ifName and ifDescr missing from the answer: incomplete, bad too.
		none(oidIfAlias + ".10"),
		// Not asked, and not an interface column: ignored.
		str(oidIfName+".5", "xe-0"), str("1.3.6.1.2.1.1.1.0", "Linux"),
	}
	got := decodeAnswer(vars, []uint32{1, 2, 3, 4, 6, 7, 8, 9, 10})
	want := pollResult{sysName: "edge1.par1", hasSysName: true, interfaces: map[uint32]polledInterface{
		1: {iface: Interface{Name: "et-0/0/1", Description: "Transit: Cogent", Speed: 100000}, found: true},
		2: {iface: Interface{Name: "GigabitEthernet0/2"}, found: true},
		3: {iface: Interface{Name: "eth3", Description: "Ethernet 3 uplink"}, found: true},
		4: {},
		6: {bad: true}, 7: {bad: true}, 8: {bad: true}, 9: {bad: true}, 10: {bad: true},
	}}
	if got.sysName != want.sysName || !got.hasSysName || len(got.interfaces) != len(want.interfaces) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want.interfaces {
		if got.interfaces[i] != w {
			t.Errorf("interface %d: %+v, want %+v", i, got.interfaces[i], w)
		}
	}
	// A sysName of the wrong type is bad; noSuchObject is no sysName.
	if r := decodeAnswer([]gosnmp.SnmpPDU{{Name: "." + oidSysName, Type: gosnmp.Integer, Value: 1}}, nil); r.hasSysName || !r.badSysName {
		t.Errorf("sysName INTEGER: %+v", r)
	}
	if r := decodeAnswer([]gosnmp.SnmpPDU{{Name: "." + oidSysName, Type: gosnmp.NoSuchObject}}, nil); r.hasSysName || r.badSysName {
		t.Errorf("sysName noSuchObject: %+v", r)
	}
}

// fuzzTypes are the value types an agent may send, and a few it should not.
var fuzzTypes = []gosnmp.Asn1BER{gosnmp.OctetString, gosnmp.Gauge32, gosnmp.Counter32, gosnmp.Integer, gosnmp.Counter64,
	gosnmp.NoSuchInstance, gosnmp.NoSuchObject, gosnmp.Null, gosnmp.IPAddress, gosnmp.ObjectIdentifier}

var fuzzColumns = []string{oidIfDescr, oidIfName, oidIfAlias, oidIfHighSpeed, "1.3.6.1.2.1.1", oidSysName}

// FuzzDecodeAnswer reads answers made of arbitrary variables (column, instance, type and
// value from the input): every interface asked gets a result, never one not asked, and a
// found interface has a name or came from an ifDescr.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add([]byte{5, 0, 0, 0, 0, 0, 'e', 'd', 'g', 'e', 0, 1, 0, 0, 0, 1, 0, 'e', 't', '-', '0'})
	f.Add([]byte{3, 0, 0, 0, 0, 2, 1, 0x40, 0x42, 0x0f, 0x00, 2, 2, 0, 0, 0, 2, 0, 'x', 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var vars []gosnmp.SnmpPDU
		// Records: column, instance (4 bytes), type, value length, value.
		for len(data) >= 7 {
			col := fuzzColumns[int(data[0])%len(fuzzColumns)]
			instance := binary.BigEndian.Uint32(data[1:5])
			typ := fuzzTypes[int(data[5])%len(fuzzTypes)]
			n := min(int(data[6]), len(data)-7)
			raw := data[7 : 7+n]
			data = data[7+n:]
			name := "." + col + "." + string(rune('0'+instance%10))
			if col == oidSysName {
				name = "." + col
			}
			var value any
			switch typ {
			case gosnmp.OctetString:
				value = raw
			case gosnmp.Gauge32, gosnmp.Counter32:
				value = uint(len(raw)) << 20
			case gosnmp.Integer:
				value = -len(raw)
			case gosnmp.Counter64:
				value = uint64(len(raw)) << 40
			case gosnmp.IPAddress:
				value = string(raw)
			}
			vars = append(vars, gosnmp.SnmpPDU{Name: name, Type: typ, Value: value})
		}
		asked := []uint32{1, 2, 3}
		res := decodeAnswer(vars, asked)
		if len(res.interfaces) != len(asked) {
			t.Fatalf("%d interfaces for %d asked", len(res.interfaces), len(asked))
		}
		for index, p := range res.interfaces {
			if index < 1 || index > 3 {
				t.Fatalf("interface %d not asked", index)
			}
			if p.bad && p.found {
				t.Fatalf("interface %d bad and found", index)
			}
			if !p.found && p.iface != (Interface{}) {
				t.Fatalf("interface %d not found but described: %+v", index, p.iface)
			}
			if c := clean(p.iface.Name); !utf8.ValidString(c) || len(c) > maxStringLen {
				t.Fatalf("clean(%q) = %q", p.iface.Name, c)
			}
		}
	})
}
