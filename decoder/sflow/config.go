package sflow

import (
	"flowzero/decoder/packet"
	"flowzero/internal/config"
)

// Configuration of the sFlow decoder.
type Configuration struct {
	// Packet configures the parsing of sampled packet headers (decapsulation).
	Packet packet.Configuration `yaml:"packet"`
	// MaxAgents bounds the (exporter address, agent address) pairs that get their own
	// metrics; datagrams from more pairs are still decoded, counted under agent "other".
	MaxAgents int `yaml:"max-agents"`
}

// DefaultConfiguration returns the default configuration.
func DefaultConfiguration() Configuration {
	return Configuration{
		Packet:    packet.DefaultConfiguration(),
		MaxAgents: 4096,
	}
}

// Validate checks the configuration; errors name the bad key.
func (c Configuration) Validate() error {
	if err := c.Packet.Validate(); err != nil {
		return config.Prefix("packet", err)
	}
	if c.MaxAgents < 1 {
		return config.Errorf("max-agents", "must be at least 1, not %d", c.MaxAgents)
	}
	return nil
}
