package kafka

import (
	"time"

	"flowzero/internal/config"
	"flowzero/internal/kafkaconn"
)

// Configuration of the Kafka sink.
type Configuration struct {
	// Brokers to bootstrap from.
	Brokers []string `yaml:"brokers"`
	// TopicPrefix names the topic: <prefix>-<schema hash>.
	TopicPrefix string `yaml:"topic-prefix"`
	// Partitions is the number of partitions of the topic when it has to be created.
	Partitions int32 `yaml:"partitions"`
	// ReplicationFactor of the topic when it has to be created.
	ReplicationFactor int16 `yaml:"replication-factor"`
	// Compression of record batches: zstd, lz4, snappy, gzip or none.
	Compression string `yaml:"compression"`
	// Key is "exporter" (records keyed by exporter address, so one exporter's flows stay
	// ordered in one partition) or "random".
	Key string `yaml:"key"`
	// MaxBufferedBytes bounds the memory held for records not yet acknowledged, while Kafka
	// is slow or down. Batches beyond it are dropped and counted.
	MaxBufferedBytes int `yaml:"max-buffered-bytes"`
	// Linger is how long the producer waits to fill a produce request.
	Linger time.Duration `yaml:"linger"`
	// FlushTimeout bounds how long Stop waits for the topic and for buffered records to be
	// delivered; the flows of records still buffered then are counted as dropped. Must be
	// positive.
	FlushTimeout time.Duration `yaml:"flush-timeout"`
	// TLS enables TLS to the brokers (system roots).
	TLS bool `yaml:"tls"`
	// SASL authentication (PLAIN or SCRAM-SHA-256/512). The password is never logged.
	SASL SASLConfiguration `yaml:"sasl"`
}

// SASLConfiguration holds SASL credentials, as for every Kafka client of flowzero.
type SASLConfiguration = kafkaconn.SASLConfiguration

// DefaultConfiguration returns the defaults.
func DefaultConfiguration() Configuration {
	return Configuration{
		Brokers:           []string{"127.0.0.1:9092"},
		TopicPrefix:       "flows",
		Partitions:        8,
		ReplicationFactor: 1,
		Compression:       "zstd",
		Key:               "exporter",
		MaxBufferedBytes:  256 << 20,
		Linger:            50 * time.Millisecond,
		FlushTimeout:      30 * time.Second,
	}
}

// Validate checks the configuration, naming the bad key.
func (c *Configuration) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return config.Errorf("brokers", "at least one broker is needed")
	case c.TopicPrefix == "":
		return config.Errorf("topic-prefix", "must not be empty")
	case c.Partitions <= 0:
		return config.Errorf("partitions", "must be positive")
	case c.ReplicationFactor <= 0:
		return config.Errorf("replication-factor", "must be positive")
	case c.MaxBufferedBytes < 1<<20:
		return config.Errorf("max-buffered-bytes", "must be at least 1 MiB")
	case c.Linger < 0:
		return config.Errorf("linger", "must not be negative")
	case c.FlushTimeout <= 0:
		return config.Errorf("flush-timeout", "must be positive, not %s", c.FlushTimeout)
	}
	switch c.Compression {
	case "zstd", "lz4", "snappy", "gzip", "none":
	default:
		return config.Errorf("compression", "must be zstd, lz4, snappy, gzip or none, not %q", c.Compression)
	}
	switch c.Key {
	case "exporter", "random":
	default:
		return config.Errorf("key", "must be exporter or random, not %q", c.Key)
	}
	return c.SASL.Validate(c.TLS)
}
