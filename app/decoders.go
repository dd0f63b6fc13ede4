package app

import (
	"net/netip"
	"time"

	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/schema"
)

// netflowDecoder adapts the NetFlow/IPFIX decoder to the collector's Decoder.
type netflowDecoder struct{ d *netflow.Decoder }

func (n netflowDecoder) Decode(payload []byte, exporter netip.AddrPort, received time.Time, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	return n.d.Decode(netflow.Packet{Payload: payload, Exporter: exporter, TimeReceived: received}, fm, emit)
}

// sflowDecoder adapts the sFlow decoder to the collector's Decoder.
type sflowDecoder struct{ d *sflow.Decoder }

func (s sflowDecoder) Decode(payload []byte, exporter netip.AddrPort, received time.Time, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	return s.d.Decode(sflow.Packet{Payload: payload, Exporter: exporter, TimeReceived: received}, fm, emit)
}

// detailsSource is a decoder that describes the state it keeps for an exporter: the
// templates, sampling rates and pending data of NetFlow/IPFIX sessions; the agents,
// sub-agents, data sources and sampling rates of sFlow.
type detailsSource interface {
	// ExporterDetails returns a JSON-friendly value, or nil when it knows nothing of addr.
	ExporterDetails(addr netip.Addr) any
}

// exporterDetails returns, for the collector's /api/v0/exporters, the details of addr from
// each source that knows it, keyed by the source's name (for example {"netflow": ...,
// "sflow": ...}), or nil when none does.
func exporterDetails(addr netip.Addr, sources map[string]detailsSource) any {
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
