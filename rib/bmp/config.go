package bmp

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"flowzero/internal/config"
)

// Configuration of the BMP listener.
type Configuration struct {
	// Listen is the TCP address routers connect to. The default is loopback: BMP has no
	// authentication, so exposing it is an explicit choice (set "[::]:10179" and
	// allowed-routers).
	Listen string `yaml:"listen"`
	// AllowedRouters restricts which source addresses may connect; empty allows all.
	AllowedRouters []netip.Prefix `yaml:"allowed-routers"`
	// RDs lists the route distinguishers to keep. Empty keeps every route. 0:0 matches
	// routes without an RD (global instance peers, unicast families). An RD instance peer
	// (an L3VPN VRF) is filtered by its peer distinguisher; VPN NLRI by their own RD.
	RDs []RD `yaml:"rds"`
	// AdjRIBIn selects which Adj-RIB-In views are kept when routers send both: "any",
	// "pre-policy" or "post-policy" (L flag of the per-peer header, RFC 7854 §4.2). Loc-RIB
	// peers (RFC 9069) are always kept; Adj-RIB-Out views (RFC 8671) are ignored.
	AdjRIBIn string `yaml:"adj-rib-in"`
	// Keep is how long the routes of a router whose connection dropped are kept, so that a
	// BMP session flap does not empty the table (Akvorado's behaviour). A peer-down
	// notification removes the peer's routes at once.
	Keep time.Duration `yaml:"keep"`
	// CollectASPaths keeps full AS paths; when false only the origin AS is kept.
	CollectASPaths bool `yaml:"collect-as-paths"`
	// CollectCommunities keeps standard and large communities.
	CollectCommunities bool `yaml:"collect-communities"`
	// ReceiveBuffer is the kernel receive buffer requested per connection (0: default).
	ReceiveBuffer int `yaml:"receive-buffer"`
	// MaxSessions caps the connections served at once (0: no cap). At the cap, a new
	// connection takes the place of the oldest one still waiting for its initiation message
	// (so hosts that connect and say nothing cannot keep routers out); when every connection
	// is an initiated session, it is refused. Both are counted. Each holds a 64 KiB read buffer, a goroutine and up to 1 MiB while a
	// large message arrives, so 64 bounds a connection flood to about 70 MiB. A collector
	// feeding more routers than that into one RIB is sized for it (their routes, not their
	// sessions, take the memory) and raises it.
	MaxSessions int `yaml:"max-sessions"`
	// InitiationTimeout is how long a new connection has to deliver its initiation message,
	// which a router sends first (RFC 7854 §4.3); a connection that does not is closed, so a
	// peer that connects and sends nothing (or trickles bytes) does not hold a session.
	InitiationTimeout time.Duration `yaml:"initiation-timeout"`
	// IdleTimeout closes a session that sent nothing for that long (0: never). Routers stay
	// silent while their routes do not change, so it is long: dead peers are found sooner by
	// TCP keepalives; this catches a router whose TCP stack answers but whose BMP process hung.
	// Routers sending statistics reports (Junos does every hour by default) never reach it.
	IdleTimeout time.Duration `yaml:"idle-timeout"`
}

// DefaultConfiguration returns the default BMP configuration.
func DefaultConfiguration() Configuration {
	return Configuration{
		Listen:             "127.0.0.1:10179",
		AdjRIBIn:           "any",
		Keep:               5 * time.Minute,
		CollectASPaths:     true,
		CollectCommunities: true,
		MaxSessions:        64,
		InitiationTimeout:  30 * time.Second,
		IdleTimeout:        24 * time.Hour,
	}
}

// Validate checks the configuration and names the bad key.
func (c *Configuration) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return config.Errorf("listen", "%v", err)
	}
	switch c.AdjRIBIn {
	case "any", "pre-policy", "post-policy":
	default:
		return config.Errorf("adj-rib-in", "%q is not one of any, pre-policy, post-policy", c.AdjRIBIn)
	}
	if c.Keep < time.Second {
		return config.Errorf("keep", "%s is below 1s", c.Keep)
	}
	if c.ReceiveBuffer < 0 {
		return config.Errorf("receive-buffer", "negative size %d", c.ReceiveBuffer)
	}
	if c.MaxSessions < 0 {
		return config.Errorf("max-sessions", "negative count %d", c.MaxSessions)
	}
	if c.InitiationTimeout < time.Second {
		return config.Errorf("initiation-timeout", "%s is below 1s", c.InitiationTimeout)
	}
	if c.IdleTimeout != 0 && c.IdleTimeout < time.Minute {
		return config.Errorf("idle-timeout", "%s is below 1m: routers stay silent while nothing changes (0 disables it)", c.IdleTimeout)
	}
	for i, p := range c.AllowedRouters {
		key := fmt.Sprintf("allowed-routers[%d]", i)
		if !p.IsValid() {
			return config.Errorf(key, "a prefix is required")
		}
		if err := config.CheckHostBits(p); err != nil {
			return config.Errorf(key, "%v", err)
		}
	}
	return nil
}
