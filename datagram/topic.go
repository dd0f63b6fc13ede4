package datagram

import (
	"flowzero/internal/config"
	"flowzero/internal/kafkaconn"
)

// TopicConfiguration is the Kafka topic of datagram records between the inlets and the
// outlets of a split collector, and how to reach its brokers.
type TopicConfiguration struct {
	kafkaconn.Configuration `yaml:",inline"`
	// Topic is the topic of datagram records.
	Topic string `yaml:"topic"`
	// Partitions of the topic when it has to be created: at least the number of outlets,
	// since a partition is consumed by one outlet at a time (docs/scaling.md); at most 65,535.
	Partitions int32 `yaml:"partitions"`
	// ReplicationFactor of the topic (and of the outlets' decoder state topic) when it has
	// to be created.
	ReplicationFactor int16 `yaml:"replication-factor"`
}

// MaxPartitions is the most partitions the datagrams topic may have: an outlet numbers each
// flow by its record's partition in 16 bits (with the offset and the index in the record).
const MaxPartitions = 1<<16 - 1

// DefaultTopicConfiguration returns the defaults.
func DefaultTopicConfiguration() TopicConfiguration {
	return TopicConfiguration{
		Configuration:     kafkaconn.DefaultConfiguration(),
		Topic:             "flowzero-datagrams",
		Partitions:        16,
		ReplicationFactor: 1,
	}
}

// Validate checks the configuration, naming the bad key.
func (c *TopicConfiguration) Validate() error {
	if err := c.Configuration.Validate(); err != nil {
		return err
	}
	switch {
	case c.Topic == "":
		return config.Errorf("topic", "must not be empty")
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return config.Errorf("partitions", "must be from 1 to %d, not %d", MaxPartitions, c.Partitions)
	case c.ReplicationFactor < 1:
		return config.Errorf("replication-factor", "must be at least 1, not %d", c.ReplicationFactor)
	}
	return nil
}
