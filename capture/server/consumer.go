package server

import (
	"net/netip"
	"time"
)

// PacketConsumer receives the packets the server writes, for example the flow aggregator of
// package capture/flows. The server asks for one AgentConsumer per agent name when the agent
// first connects and keeps it until it forgets the agent, so that the per-packet path looks
// nothing up.
type PacketConsumer interface {
	// ForAgent returns a new consumer of the agent's packets. A name asked for again after
	// its consumer was closed (an agent back after output.idle-close) gets a new one, even
	// while the old one's Close is running.
	ForAgent(name string) AgentConsumer
	// Flush is called after every output flush, at Stop after the last Tick, and after the
	// consumers of forgotten agents are closed.
	Flush()
}

// AgentConsumer receives one agent's packets. Calls for one agent never overlap.
type AgentConsumer interface {
	// Connected gives the address of the agent's current connection.
	Connected(remote netip.Addr)
	// Packet is called for every packet written; data is only valid during the call.
	Packet(iface uint32, linkType uint16, ts int64, length uint32, data []byte)
	// Tick is called after each frame and at every output flush with the server's clock,
	// and with stop set once at Stop.
	Tick(now time.Time, stop bool)
	// Close is called once when the server forgets the agent (output.idle-close), holding
	// none of its locks: the consumer hands on what it still holds for the agent, then
	// drops its state. The server never calls it again.
	Close()
}
