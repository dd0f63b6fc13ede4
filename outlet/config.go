package outlet

import (
	"time"

	"flowzero/decoder/state"
	"flowzero/internal/config"
)

// Configuration of the outlet (the `outlet:` section, used with mode: outlet): how datagram
// records are consumed, and when their offsets are committed.
type Configuration struct {
	// Group is the Kafka consumer group of the outlets: the partitions of the datagrams
	// topic are shared among the outlets of one group.
	Group string `yaml:"group"`
	// CommitInterval is how often the outlet waits for its sinks to acknowledge the flows
	// sent so far and then commits the offsets of their datagrams. A crash replays at most
	// this much traffic (at least once); shorter costs more sink flushes.
	CommitInterval time.Duration `yaml:"commit-interval"`
	// SessionTimeout is how long the group waits for a silent outlet (killed, or cut from
	// the brokers) before its partitions go to the others; the brokers accept 6s to 5m by
	// default (group.min/max.session.timeout.ms).
	SessionTimeout time.Duration `yaml:"session-timeout"`
	// MaxPollRecords bounds the datagram records handled between two checks of the commit
	// interval.
	MaxPollRecords int `yaml:"max-poll-records"`
	// MaxFetchBytes bounds the bytes of one fetch response (per broker), from 64 KiB to 100 MiB.
	MaxFetchBytes int32 `yaml:"max-fetch-bytes"`
	// MaxUnitBytes bounds the encoded flows the outlet holds for a store output (its units,
	// each one INSERT): past it, the outlet inserts and commits without waiting for the
	// commit interval, so that catching up on a backlog makes INSERT bodies of about this
	// size rather than of a commit interval's traffic.
	MaxUnitBytes int `yaml:"max-unit-bytes"`
	// TemplateWait bounds how long a partition waits at a NetFlow/IPFIX datagram whose data
	// sets have no template yet and do not fit in the decoder's pending buffer
	// (netflow.pending-sets, netflow.pending-bytes). Meanwhile the outlet reads its other
	// partitions and the state topic, which may bring the template; past this, the datagram is
	// decoded as in mode all (the sets that do not fit are dropped and counted), and the
	// exporter's next datagrams do not wait until some state of it is learned again.
	TemplateWait time.Duration `yaml:"template-wait"`
	// State is the compacted topic through which the outlets share the NetFlow/IPFIX
	// templates, sampling rates and withdrawals they learn.
	State state.Configuration `yaml:"state"`
}

// DefaultConfiguration returns the defaults.
func DefaultConfiguration() Configuration {
	return Configuration{
		Group:          "flowzero-outlets",
		CommitInterval: time.Second,
		SessionTimeout: 45 * time.Second,
		MaxPollRecords: 4096,
		MaxFetchBytes:  16 << 20,
		MaxUnitBytes:   64 << 20,
		TemplateWait:   time.Minute,
		State:          state.DefaultConfiguration(),
	}
}

// maxFetchBytes is franz-go's default bound on the bytes of one broker response.
const maxFetchBytes = 100 << 20

// Validate checks the configuration, naming the bad key.
func (c Configuration) Validate() error {
	switch {
	case c.Group == "":
		return config.Errorf("group", "must not be empty")
	case c.CommitInterval < 10*time.Millisecond:
		return config.Errorf("commit-interval", "must be at least 10ms, not %s", c.CommitInterval)
	case c.SessionTimeout < time.Second:
		return config.Errorf("session-timeout", "must be at least 1s, not %s", c.SessionTimeout)
	case c.MaxPollRecords < 1:
		return config.Errorf("max-poll-records", "must be at least 1, not %d", c.MaxPollRecords)
	case c.MaxFetchBytes < 1<<16:
		return config.Errorf("max-fetch-bytes", "must be at least 64 KiB, not %d", c.MaxFetchBytes)
	case c.MaxFetchBytes > maxFetchBytes:
		return config.Errorf("max-fetch-bytes", "must be at most 100 MiB (%d), the most the Kafka client reads of one response, not %d", maxFetchBytes, c.MaxFetchBytes)
	case c.MaxUnitBytes < 1<<16:
		return config.Errorf("max-unit-bytes", "must be at least 64 KiB, not %d", c.MaxUnitBytes)
	case c.TemplateWait < 100*time.Millisecond:
		return config.Errorf("template-wait", "must be at least 100ms, not %s", c.TemplateWait)
	}
	if err := c.State.Validate(); err != nil {
		return config.Prefix("state", err)
	}
	return nil
}
