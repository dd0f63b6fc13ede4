package schema

import (
	"net/netip"

	"flowzero/pbwire"
)

//go:generate go test . -run ^TestHotCode$ -update

// HotFields are the hot columns of a FlowMessage: values a later stage still reads or
// overwrites (the exporter classifier reads ExporterAddress and the interfaces, the RIB reads
// the addresses and sets the AS numbers, masks, next hop, AS path and communities). They stay
// plain fields until Finalize encodes those of enabled columns that are not zero.
//
// This declaration is the hot columns' table: each field is the column of the same name, and
// its type says how Finalize encodes it (an unsigned integer as a varint, a netip.Addr as 16
// bytes with IPv4 mapped into IPv6, []uint32 as a packed array, []LargeCommunity as 12-byte
// elements). hot_gen.go, which Finalize, IsSet and the Append methods call, is generated from
// it: after changing a field, run go generate ./schema (TestHotCode fails until then).
//
// The slice fields are read-only views: they are assigned, for example to the RIB's interned
// attributes, never appended to, and must stay valid until Finalize. Reset sets them to nil.
type HotFields struct {
	DatagramFields

	// Set by the decoder; read by the exporter classifier.
	InIf, OutIf uint32 // SNMP indexes; the interface classifier looks them up

	// Set by the decoder; the RIB looks the addresses up and overwrites the routing fields
	// when it knows better (AS numbers, masks, next hop).
	SrcAddr, DstAddr, NextHop netip.Addr
	SrcAS, DstAS              uint32
	SrcNetMask, DstNetMask    uint8
	SrcVlan, DstVlan          uint16
	// Set by the decoder; network attributes given per VRF are looked up in the flow's VRFs.
	IngressVRFID, EgressVRFID uint32

	// Set by the RIB (or by a decoder that carries them, such as sFlow's extended gateway).
	DstASPath           []uint32
	SrcCommunities      []uint32 // standard communities, ASN<<16 | value
	DstCommunities      []uint32
	SrcLargeCommunities []LargeCommunity
	DstLargeCommunities []LargeCommunity
}

// DatagramFields are the hot columns every flow of a datagram usually shares (integers and
// addresses only). Finalize keeps their encoding and copies it for the next flow when they did
// not change.
type DatagramFields struct {
	// Set by the decoder; read by the exporter classifier and the sinks (Kafka key).
	TimeReceived    uint64 // unix seconds
	SamplingRate    uint64
	ExporterAddress netip.Addr
}

// hotRoom is the room Finalize asks for the hot integers and addresses (each at most
// pbwire.MaxRoomFieldLen bytes) and the copy of the DatagramFields' encoding.
const hotRoom = hotRoomFields*pbwire.MaxRoomFieldLen + datagramRoom + pbwire.RawPad

// datagramRoom holds the encoding of the DatagramFields.
const datagramRoom = datagramRoomFields * pbwire.MaxRoomFieldLen

// ipv4Mapped is the last 8 bytes of ::ffff:0.0.0.0 (IPv4 mapped into IPv6) as a little-endian
// word: the address takes its top 4 bytes.
const ipv4Mapped = 0xffff << 16
