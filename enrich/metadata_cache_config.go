package enrich

import (
	"time"

	"flowzero/enrich/classifier"
	"flowzero/enrich/snmp"
	"flowzero/internal/config"
)

// DynamicMetadataConfiguration configures what completes the static metadata of
// enrich.exporters: interface names, descriptions and speeds and the exporters' names polled
// with SNMP, and classifier rules. The order, per column: static metadata first, then
// the rules (SetName and SetDescription replace SNMP's name and description), then SNMP.
// Rules read the static values and SNMP's.
type DynamicMetadataConfiguration struct {
	classifier.Configuration `yaml:",inline"`
	// ClassifierCacheSize bounds the (exporter, interface) pairs whose columns are kept
	// ready (with rules or SNMP on). Past it, flows on new interfaces get only their
	// exporter's columns and its static default interface, and are counted, until unused
	// pairs are forgotten.
	ClassifierCacheSize int `yaml:"classifier-cache-size"`
	// ClassifierCacheDuration forgets the (exporter, interface) pairs no flow used for that
	// long; the next flow classifies the interface again.
	ClassifierCacheDuration time.Duration `yaml:"classifier-cache-duration"`
	// DropUnknownInterfaces drops flows whose input or output interface (when not 0) has no
	// name from static metadata or SNMP, including while its first poll is on its way (as
	// Akvorado does). Off, the default, such flows go on with what is known.
	DropUnknownInterfaces bool `yaml:"drop-unknown-interfaces"`
	// SNMP polls exporters for their interfaces' names, descriptions and speeds and their
	// sysName.
	SNMP SNMPSource `yaml:"snmp"`
}

// SNMPSource is the SNMP poller's configuration with its switch.
type SNMPSource struct {
	// Enabled polls exporters with SNMP. Flows never wait for it: a flow on an interface not
	// polled yet goes on without its name (see drop-unknown-interfaces).
	Enabled            bool `yaml:"enabled"`
	snmp.Configuration `yaml:",inline"`
}

// DefaultDynamicMetadataConfiguration has no rules and SNMP off.
func DefaultDynamicMetadataConfiguration() DynamicMetadataConfiguration {
	return DynamicMetadataConfiguration{
		Configuration:           classifier.DefaultConfiguration(),
		ClassifierCacheSize:     100000,
		ClassifierCacheDuration: time.Hour,
		SNMP:                    SNMPSource{Configuration: snmp.DefaultConfiguration()},
	}
}

// Enabled reports whether rules, SNMP or drop-unknown-interfaces are on: MetadataCache then
// replaces Metadata.
func (c *DynamicMetadataConfiguration) Enabled() bool {
	return c.Configuration.Enabled() || c.SNMP.Enabled || c.DropUnknownInterfaces
}

// Validate checks the configuration and names the bad key.
func (c *DynamicMetadataConfiguration) Validate() error {
	if err := c.Configuration.Validate(); err != nil {
		return err
	}
	if c.ClassifierCacheSize < 1 {
		return config.Errorf("classifier-cache-size", "must be at least 1")
	}
	if c.ClassifierCacheDuration <= 0 {
		return config.Errorf("classifier-cache-duration", "must be positive")
	}
	if c.SNMP.Enabled {
		if err := c.SNMP.Validate(); err != nil {
			return config.Prefix("snmp", err)
		}
	}
	return nil
}
