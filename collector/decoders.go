package collector

import (
	"net/netip"
	"time"

	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/schema"
)

// NetFlowDecoder adapts the NetFlow/IPFIX decoder to the collector.
type NetFlowDecoder struct{ D *netflow.Decoder }

// Decode implements Decoder.
func (n NetFlowDecoder) Decode(payload []byte, exporter netip.AddrPort, received time.Time, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	return n.D.Decode(netflow.Packet{Payload: payload, Exporter: exporter, TimeReceived: received}, fm, emit)
}

// SFlowDecoder adapts the sFlow decoder to the collector.
type SFlowDecoder struct{ D *sflow.Decoder }

// Decode implements Decoder.
func (s SFlowDecoder) Decode(payload []byte, exporter netip.AddrPort, received time.Time, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	return s.D.Decode(sflow.Packet{Payload: payload, Exporter: exporter, TimeReceived: received}, fm, emit)
}
