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
	// BatchWait is how long the datagrams a socket's worker reads may wait to be packed into
	// one Kafka record (a batch record, flowzero/datagram) with the next ones. Meanwhile the
	// worker lets datagrams gather in the socket instead of waking up for each, then reads
	// them together. 0 packs only those of one read (up to 16). Each datagram keeps its own
	// receive time. With key exporter, a record holds one exporter's datagrams. The socket's
	// receive buffer must hold batch-wait of traffic.
	BatchWait time.Duration `yaml:"batch-wait"`
	// BatchBytes bounds a record's size: a datagram that would make it larger starts the next
	// one (a datagram larger than it goes alone). At most max-message-bytes less 1 KiB (for
	// the headers of the record and of its record batch).
	BatchBytes int `yaml:"batch-bytes"`
	// MaxMessageBytes bounds the record batches the producer sends (several records of one
	// partition, before compression). It must not exceed the topic's max.message.bytes (the
	// broker's message.max.bytes when the topic does not set it), which refuses a larger batch
	// whole: the inlet checks it at start and every minute, and reports a lower limit in
	// /healthz, naming this key; a refused batch's datagrams are dropped (reason too-large).
	MaxMessageBytes int `yaml:"max-message-bytes"`
	// FlushTimeout bounds how long a stop waits for buffered datagrams to be delivered;
	// those still buffered then are counted as dropped (delivery-failed).
	FlushTimeout time.Duration `yaml:"flush-timeout"`
}

// maxMessageBytes bounds max-message-bytes: a record batch is held whole in memory by the
// producer and the broker.
const maxMessageBytes = 64 << 20

// DefaultConfiguration returns the defaults.
func DefaultConfiguration() Configuration {
	return Configuration{
		Key:              "random",
		Compression:      "snappy",
		MaxBufferedBytes: 256 << 20,
		Linger:           5 * time.Millisecond,
		BatchWait:        time.Millisecond,
		BatchBytes:       64 << 10,
		MaxMessageBytes:  1 << 20,
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
	if c.BatchWait < 0 || c.BatchWait > time.Second {
		return config.Errorf("batch-wait", "must be between 0 and 1s, not %s", c.BatchWait)
	}
	if c.MaxMessageBytes < 3072 || c.MaxMessageBytes > maxMessageBytes {
		return config.Errorf("max-message-bytes", "must be between 3072 and %d, not %d", maxMessageBytes, c.MaxMessageBytes)
	}
	if c.BatchBytes < 2048 || c.BatchBytes > c.MaxMessageBytes-1024 {
		return config.Errorf("batch-bytes", "must be between 2048 and max-message-bytes less 1024 (%d), not %d",
			c.MaxMessageBytes-1024, c.BatchBytes)
	}
	if c.FlushTimeout <= 0 {
		return config.Errorf("flush-timeout", "must be positive")
	}
	return nil
}
