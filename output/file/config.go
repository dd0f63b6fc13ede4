package file

import (
	"time"

	"flowzero/internal/config"
)

// Configuration of the file sink.
type Configuration struct {
	// Directory receives the archive files. It is created if missing.
	Directory string `yaml:"directory"`
	// Prefix starts each file name: <prefix>-<UTC time>.pb[.zst|.gz].
	Prefix string `yaml:"prefix"`
	// RotateSize starts a new file when the current one reaches this many bytes (before
	// compression). 0 disables size rotation.
	RotateSize int64 `yaml:"rotate-size"`
	// RotateInterval starts a new file after this long. 0 disables time rotation.
	RotateInterval time.Duration `yaml:"rotate-interval"`
	// MaxFiles keeps at most this many archive files, removing the oldest. 0 keeps all.
	MaxFiles int `yaml:"max-files"`
	// Compression is none, zstd or gzip.
	Compression string `yaml:"compression"`
	// QueueSize is the number of batches waiting to be written; a batch arriving when it is
	// full is dropped and counted.
	QueueSize int `yaml:"queue-size"`
}

// DefaultConfiguration returns the defaults: 256 MiB or 1 hour per file, zstd.
func DefaultConfiguration() Configuration {
	return Configuration{
		Directory:      "var/flows",
		Prefix:         "flows",
		RotateSize:     256 << 20,
		RotateInterval: time.Hour,
		Compression:    "zstd",
		QueueSize:      1024,
	}
}

// Validate checks the configuration, naming the bad key.
func (c *Configuration) Validate() error {
	switch {
	case c.Directory == "":
		return config.Errorf("directory", "must not be empty")
	case c.RotateSize < 0:
		return config.Errorf("rotate-size", "must not be negative")
	case c.RotateInterval < 0:
		return config.Errorf("rotate-interval", "must not be negative")
	case c.MaxFiles < 0:
		return config.Errorf("max-files", "must not be negative")
	case c.QueueSize <= 0:
		return config.Errorf("queue-size", "must be positive")
	}
	switch c.Compression {
	case "none", "zstd", "gzip":
	default:
		return config.Errorf("compression", "must be none, zstd or gzip, not %q", c.Compression)
	}
	return nil
}
