package geoip

import (
	"fmt"
	"time"

	"flowzero/internal/config"
)

// Configuration lists the GeoIP databases.
type Configuration struct {
	// Databases are MaxMind DB files (.mmdb): MaxMind GeoLite2 and GeoIP2 (City, Country,
	// ASN), DB-IP, or IPinfo, the layout told by each file's metadata. For each attribute
	// (country, state, city, AS number) the first file that has a value wins. Empty: GeoIP is
	// off.
	Databases []string `yaml:"databases"`
	// Optional starts the collector when a database is missing or unreadable (it is loaded
	// once it appears); otherwise that is an error at start.
	Optional bool `yaml:"optional"`
	// CheckInterval is how often the files' size and modification time are checked; a
	// changed file is loaded again and replaces the old data without stopping flows.
	CheckInterval time.Duration `yaml:"check-interval"`
}

// DefaultConfiguration has no database and checks files every 30 seconds.
func DefaultConfiguration() Configuration {
	return Configuration{CheckInterval: 30 * time.Second}
}

// Validate checks the configuration and names the bad key.
func (c *Configuration) Validate() error {
	seen := map[string]bool{}
	for i, p := range c.Databases {
		if p == "" {
			return config.Errorf(fmt.Sprintf("databases[%d]", i), "empty path")
		}
		if seen[p] {
			return config.Errorf(fmt.Sprintf("databases[%d]", i), "%s listed twice", p)
		}
		seen[p] = true
	}
	if c.CheckInterval < time.Second {
		return config.Errorf("check-interval", "must be at least 1s, not %s", c.CheckInterval)
	}
	return nil
}
