package capture

import (
	"net/netip"
	"time"
)

// PacketConsumer receives the packets the server writes, for example the flow aggregator of
// package capture/flows. The server asks for one AgentConsumer per agent name when the agent
// first connects and keeps it, so that the per-packet path looks nothing up.
type PacketConsumer interface {
	ForAgent(name string) AgentConsumer
	// Flush is called after every output flush and at Stop, after Expire.
	Flush()
	// Forget is called when the server forgets an agent (output.idle-close), with the
	// agent's output lock and the server's lock held, so never during a call to the agent's
	// AgentConsumer, and it must not call back into the Server: the consumer hands on what it
	// still holds for the agent, then drops its state. An agent coming back later gets a new
	// AgentConsumer from ForAgent. Flush follows.
	Forget(name string)
}

// AgentConsumer receives one agent's packets. Calls for one agent never overlap.
type AgentConsumer interface {
	// Connected gives the address of the agent's current connection.
	Connected(remote netip.Addr)
	// Packet is called for every packet written; data is only valid during the call.
	Packet(iface uint32, linkType uint16, ts int64, length uint32, data []byte)
	// Tick is called after each frame and at every output flush with the wall clock, and
	// with stop set once at Stop.
	Tick(now time.Time, stop bool)
}
