package netflow

import (
	"errors"

	"flowzero/decoder/packet"
	"flowzero/schema"
)

// dataLinkParser decodes the sampled frame of an RFC 7133 dataLinkFrameSection (IE 315)
// with the shared packet parser (L2/L3/L4 headers and the configured decapsulation).
type dataLinkParser struct {
	p *packet.Parser
}

func (d *Decoder) initDataLink() error {
	p, err := packet.New(d.cfg.Packet)
	if err != nil {
		return err
	}
	d.link = dataLinkParser{p: p}
	return nil
}

// parse decodes frame into fm. It returns the L3 length of the sampled packet, and drop
// when the flow must not be emitted (decapsulation configured, frame not encapsulated).
func (l dataLinkParser) parse(frame []byte, fm *schema.FlowMessage) (l3Length int, drop bool, err error) {
	n, err := l.p.ParseEthernet(frame, fm)
	if err != nil {
		return n, errors.Is(err, packet.ErrNotEncapsulated), err
	}
	return n, false, nil
}
