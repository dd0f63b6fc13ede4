package inlet

import (
	"time"

	"flowzero/internal/config"
	"flowzero/internal/kafkaconn"
)

// Configuration of the inlet (the `inlet:` section, used with mode: inlet): how datagrams
// are produced to the datagrams topic.
type Configuration struct {
	// Key is random (datagrams spread evenly over the partitions, one after the other: the
	// outlets share the decoder state, so any of them decodes any datagram) or exporter (an
	// exporter's datagrams all go to one partition, in order, keyed by its address: no
	// template race, but a busy exporter makes a hot partition).
	Key string `yaml:"key"`
	// Compression of record batches: snappy, lz4, zstd, gzip or none. snappy halves the
	// bytes of NetFlow datagrams for less of the inlet's CPU than lz4 (within a few percent
	// of its bytes); none spares more CPU and doubles the bytes in Kafka; zstd compresses
	// more for more CPU (docs/design/split.md).
	Compression string `yaml:"compression"`
	// MaxBufferedBytes bounds the memory held for datagrams not yet acknowledged, while
	// Kafka is slow or down. Datagrams beyond it are dropped and counted (reason
	// buffer-full), as a collector drops flows when its sinks cannot keep up.
	MaxBufferedBytes int `yaml:"max-buffered-bytes"`
	// Linger is how long the producer waits to fill a produce request.
	Linger time.Duration `yaml:"linger"`
	// FlushTimeout bounds how long a stop waits for buffered datagrams to be delivered;
	// those still buffered then are counted as dropped (delivery-failed).
	FlushTimeout time.Duration `yaml:"flush-timeout"`
}

// DefaultConfiguration returns the defaults.
func DefaultConfiguration() Configuration {
	return Configuration{
		Key:              "random",
		Compression:      "snappy",
		MaxBufferedBytes: 256 << 20,
		Linger:           5 * time.Millisecond,
		FlushTimeout:     30 * time.Second,
	}
}

// Validate checks the configuration, naming the bad key.
func (c Configuration) Validate() error {
	switch c.Key {
	case "random", "exporter":
	default:
		return config.Errorf("key", "must be random or exporter, not %q", c.Key)
	}
	if _, ok := kafkaconn.Compression(c.Compression); !ok {
		return config.Errorf("compression", "must be snappy, lz4, zstd, gzip or none, not %q", c.Compression)
	}
	if c.MaxBufferedBytes < 1<<20 {
		return config.Errorf("max-buffered-bytes", "must be at least 1 MiB, not %d", c.MaxBufferedBytes)
	}
	if c.Linger < 0 {
		return config.Errorf("linger", "must not be negative")
	}
	if c.FlushTimeout <= 0 {
		return config.Errorf("flush-timeout", "must be positive")
	}
	return nil
}
