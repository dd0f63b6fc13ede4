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

// ExporterDetails implements DetailsSource: the templates, sampling rates and pending data
// of the exporter's NetFlow/IPFIX sessions.
func (n NetFlowDecoder) ExporterDetails(addr netip.Addr) any { return n.D.ExporterDetails(addr) }

// ExporterDetails implements DetailsSource: the agents, sub-agents, data sources and
// sampling rates seen from the exporter.
func (s SFlowDecoder) ExporterDetails(addr netip.Addr) any { return s.D.ExporterDetails(addr) }

// DetailsSource is a decoder that describes the state it keeps for an exporter.
type DetailsSource interface {
	// ExporterDetails returns a JSON-friendly value, or nil when it knows nothing of addr.
	ExporterDetails(addr netip.Addr) any
}

// MergeExporterDetails returns, for Dependencies.ExporterDetails, the details of addr from
// each source that knows it, keyed by the source's name (for example {"netflow": ...,
// "sflow": ...}), or nil when none does.
func MergeExporterDetails(addr netip.Addr, sources map[string]DetailsSource) any {
	var out map[string]any
	for name, s := range sources {
		if s == nil {
			continue
		}
		if v := s.ExporterDetails(addr); v != nil {
			if out == nil {
				out = map[string]any{}
			}
			out[name] = v
		}
	}
	if out == nil {
		return nil
	}
	return out
}
