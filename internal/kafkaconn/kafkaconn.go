// Package kafkaconn is the connection part of a Kafka client's configuration (brokers, TLS,
// SASL), shared by the components of a split collector (inlet, outlet, the decoder state
// topic), and the franz-go options it gives.
package kafkaconn

import (
	"crypto/tls"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"flowzero/internal/config"
)

// Configuration is how to reach the brokers.
type Configuration struct {
	// Brokers to bootstrap from (host:port).
	Brokers []string `yaml:"brokers"`
	// TLS enables TLS to the brokers (system roots).
	TLS bool `yaml:"tls"`
	// SASL authentication (PLAIN or SCRAM-SHA-256/512). The password is never logged.
	SASL SASLConfiguration `yaml:"sasl"`
}

// SASLConfiguration holds SASL credentials.
type SASLConfiguration struct {
	// Mechanism is empty (no SASL), plain (only with tls: it sends the password as is),
	// scram-sha-256 or scram-sha-512.
	Mechanism string `yaml:"mechanism"`
	// Username to authenticate as.
	Username string `yaml:"username"`
	// Password of the user; it is never logged.
	Password string `yaml:"password"`
}

// DefaultConfiguration is a broker on the local machine.
func DefaultConfiguration() Configuration {
	return Configuration{Brokers: []string{"127.0.0.1:9092"}}
}

// Validate checks the configuration, naming the bad key.
func (c *Configuration) Validate() error {
	if len(c.Brokers) == 0 {
		return config.Errorf("brokers", "at least one broker is needed")
	}
	for _, b := range c.Brokers {
		if i := strings.LastIndexByte(b, ':'); i <= 0 || i == len(b)-1 {
			return config.Errorf("brokers", "%q is not host:port", b)
		}
	}
	return c.SASL.Validate(c.TLS)
}

// Validate checks the credentials of a connection with or without TLS, naming the bad key.
func (s SASLConfiguration) Validate(useTLS bool) error {
	switch s.Mechanism {
	case "":
	case "plain", "scram-sha-256", "scram-sha-512":
		if s.Username == "" {
			return config.Errorf("sasl.username", "required with mechanism %s", s.Mechanism)
		}
		if s.Mechanism == "plain" && !useTLS {
			return config.Errorf("sasl.mechanism", "plain sends the password in clear: set tls: true, or use scram-sha-256 or scram-sha-512")
		}
	default:
		return config.Errorf("sasl.mechanism", "must be plain, scram-sha-256 or scram-sha-512, not %q", s.Mechanism)
	}
	return nil
}

// Options returns the franz-go options of the connection: brokers, TLS, SASL, and retries
// that never give up while a broker is away (callers bound what they buffer meanwhile).
func (c *Configuration) Options() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			return min(time.Duration(tries)*100*time.Millisecond, 2*time.Second)
		}),
	}
	return append(opts, SecurityOptions(c.TLS, c.SASL)...)
}

// SecurityOptions returns the franz-go options of TLS (system roots) and SASL.
func SecurityOptions(useTLS bool, s SASLConfiguration) []kgo.Opt {
	var opts []kgo.Opt
	if useTLS {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	switch s.Mechanism {
	case "plain":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
	}
	return opts
}

// Compression returns the producer option of a compression name (zstd, lz4, snappy, gzip,
// none), or false for an unknown name.
func Compression(name string) (kgo.Opt, bool) {
	switch name {
	case "zstd":
		return kgo.ProducerBatchCompression(kgo.ZstdCompression()), true
	case "lz4":
		return kgo.ProducerBatchCompression(kgo.Lz4Compression()), true
	case "snappy":
		return kgo.ProducerBatchCompression(kgo.SnappyCompression()), true
	case "gzip":
		return kgo.ProducerBatchCompression(kgo.GzipCompression()), true
	case "none":
		return kgo.ProducerBatchCompression(kgo.NoCompression()), true
	}
	return nil, false
}
