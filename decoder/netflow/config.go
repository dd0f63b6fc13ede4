package netflow

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"flowzero/decoder/packet"
	"flowzero/internal/config"
)

// TimestampSource says which time becomes a flow's TimeReceived.
type TimestampSource string

const (
	// TimestampReceive uses the time the collector received the datagram (the default: it
	// does not trust exporters' clocks).
	TimestampReceive TimestampSource = "receive"
	// TimestampPacket uses the export time of the NetFlow/IPFIX header.
	TimestampPacket TimestampSource = "packet"
	// TimestampFlowStart uses the flow's start time (absolute IEs 150/152/154/156, or
	// relative IE 22 with IE 160 or the header's sysUptime), falling back to the export time.
	TimestampFlowStart TimestampSource = "flow-start"
	// TimestampFlowEnd uses the flow's end time, falling back to the export time.
	TimestampFlowEnd TimestampSource = "flow-end"
)

// SamplingRateRule sets the sampling rate of the exporters in a prefix.
type SamplingRateRule struct {
	// Exporter is the prefix of exporter addresses the rule applies to.
	Exporter netip.Prefix `yaml:"exporter"`
	// Default is used when neither the flow record, nor an options record, nor the NetFlow v5
	// header gives a rate (without it, such flows get 1: each counts once).
	Default uint64 `yaml:"default"`
	// Override replaces whatever the exporter says.
	Override uint64 `yaml:"override"`
}

// UnmarshalYAML implements yaml.Unmarshaler so that a prefix that does not parse is reported
// with its line and key rather than in netip's words; unknown keys are refused as
// elsewhere.
func (r *SamplingRateRule) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a sampling-rates item is a mapping with exporter, default and override", n.Line)}}
	}
	var errs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "exporter":
			p, perr := netip.ParsePrefix(v.Value)
			if perr != nil {
				// netip's error reads `netip.ParsePrefix("x"): reason`: keep the reason.
				reason := perr.Error()
				if i := strings.LastIndex(reason, "): "); i >= 0 {
					reason = reason[i+3:]
				}
				errs = append(errs, fmt.Sprintf("line %d: exporter: %q is not a prefix (address/length): %s", v.Line, v.Value, reason))
				continue
			}
			r.Exporter = p
		case "default":
			err = v.Decode(&r.Default)
		case "override":
			err = v.Decode(&r.Override)
		default:
			errs = append(errs, fmt.Sprintf("line %d: unknown key %q", k.Line, k.Value))
		}
		if te, ok := err.(*yaml.TypeError); ok {
			errs = append(errs, te.Errors...)
		} else if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

// Configuration of the NetFlow v5/v9 and IPFIX decoder.
type Configuration struct {
	// TimestampSource chooses the time stored in TimeReceived.
	TimestampSource TimestampSource `yaml:"timestamp-source"`
	// SamplingRates are checked in order; the first rule whose prefix holds the exporter
	// applies (the rule is resolved once, when the exporter is first seen).
	SamplingRates []SamplingRateRule `yaml:"sampling-rates"`
	// MaxExporters bounds the number of exporter transport sessions (address and source
	// port) kept in memory. When it is reached, a new session takes the place of one idle
	// for session-idle-timeout, else of the least recently active one not established yet
	// (fewer than two datagrams, or no valid template or flow: what spoofed sources leave);
	// failing both, its datagrams are dropped and counted. Spoofed sources that send valid
	// datagrams cannot be told from exporters: allow-list the exporters
	// (collector.exporters.allow) where that matters.
	MaxExporters int `yaml:"max-exporters"`
	// SessionIdleTimeout is how long a session must have been idle before it can be
	// evicted to make room for a new one when max-exporters is reached (established
	// sessions are not evicted earlier).
	SessionIdleTimeout time.Duration `yaml:"session-idle-timeout"`
	// MaxTemplatesPerExporter bounds the templates (data and options) of one session.
	MaxTemplatesPerExporter int `yaml:"max-templates-per-exporter"`
	// MaxFieldsPerTemplate bounds the number of fields of one template.
	MaxFieldsPerTemplate int `yaml:"max-fields-per-template"`
	// MaxSamplersPerExporter bounds, per session, the sampling rates (per domain and
	// sampler) and the system init times (per domain) learned from options records; the
	// ones beyond are dropped and counted (errors_total, reason too-many-samplers).
	MaxSamplersPerExporter int `yaml:"max-samplers-per-exporter"`
	// PendingSets is how many data sets received before their template are kept per
	// session, to be decoded when the template arrives; 0 disables the feature.
	PendingSets int `yaml:"pending-sets"`
	// PendingBytes bounds the memory held by pending data sets per session.
	PendingBytes int `yaml:"pending-bytes"`
	// PendingMaxAge drops pending data sets older than this when their template arrives.
	PendingMaxAge time.Duration `yaml:"pending-max-age"`
	// TemplatesFile, when set, is where templates and sampling rates are saved (on Stop
	// and every TemplatesSaveInterval when they changed; a failed save is counted, logged
	// and retried) and loaded from at Start.
	TemplatesFile string `yaml:"templates-file"`
	// TemplatesSaveInterval is how often changed templates are saved.
	TemplatesSaveInterval time.Duration `yaml:"templates-save-interval"`
	// Packet configures the parser of sampled frames carried in RFC 7133 data-link
	// sections (IE 315), including decapsulation: when one is set, flows whose frame does
	// not carry the tunnel are dropped and counted, and templates that repeat the header
	// elements of an outer and an inner packet (Cisco SRv6) give the inner one, the outer
	// one in the tunnel columns.
	Packet packet.Configuration `yaml:"packet"`
}

// DefaultConfiguration returns the default configuration.
func DefaultConfiguration() Configuration {
	return Configuration{
		TimestampSource:         TimestampReceive,
		MaxExporters:            4096,
		SessionIdleTimeout:      time.Hour,
		MaxTemplatesPerExporter: 128,
		MaxFieldsPerTemplate:    256,
		MaxSamplersPerExporter:  256,
		PendingSets:             32,
		PendingBytes:            64 << 10,
		PendingMaxAge:           5 * time.Minute,
		TemplatesSaveInterval:   time.Minute,
		Packet:                  packet.DefaultConfiguration(),
	}
}

// Validate checks the configuration and names the bad key.
func (c Configuration) Validate() error {
	switch c.TimestampSource {
	case TimestampReceive, TimestampPacket, TimestampFlowStart, TimestampFlowEnd:
	default:
		return config.Errorf("timestamp-source", "%q is not one of receive, packet, flow-start, flow-end", c.TimestampSource)
	}
	for i, r := range c.SamplingRates {
		if !r.Exporter.IsValid() {
			return config.Errorf(fmt.Sprintf("sampling-rates[%d].exporter", i), "a prefix is required")
		}
		if m := r.Exporter.Masked(); m != r.Exporter {
			// A typo more often than a wish to match the whole prefix: say both readings.
			return config.Errorf(fmt.Sprintf("sampling-rates[%d].exporter", i), "%s has host bits set (%s or %s/%d?)",
				r.Exporter, m, r.Exporter.Addr(), r.Exporter.Addr().BitLen())
		}
		if r.Default == 0 && r.Override == 0 {
			return config.Errorf(fmt.Sprintf("sampling-rates[%d]", i), "set default or override")
		}
	}
	checks := []struct {
		key string
		v   int
		min int
	}{
		{"max-exporters", c.MaxExporters, 1},
		{"max-templates-per-exporter", c.MaxTemplatesPerExporter, 1},
		{"max-fields-per-template", c.MaxFieldsPerTemplate, 1},
		{"max-samplers-per-exporter", c.MaxSamplersPerExporter, 1},
		{"pending-sets", c.PendingSets, 0},
		{"pending-bytes", c.PendingBytes, 0},
	}
	for _, ch := range checks {
		if ch.v < ch.min {
			return config.Errorf(ch.key, "must be at least %d, not %d", ch.min, ch.v)
		}
	}
	if c.MaxFieldsPerTemplate > 65535 {
		return config.Errorf("max-fields-per-template", "must be at most 65535")
	}
	if c.SessionIdleTimeout < 0 {
		return config.Errorf("session-idle-timeout", "must not be negative")
	}
	if c.PendingMaxAge < 0 {
		return config.Errorf("pending-max-age", "must not be negative")
	}
	if c.TemplatesFile != "" && c.TemplatesSaveInterval <= 0 {
		return config.Errorf("templates-save-interval", "must be positive when templates-file is set")
	}
	if err := c.Packet.Validate(); err != nil {
		return config.Prefix("packet", err)
	}
	return nil
}

// samplingRates returns the default and override rates for an exporter address.
func (c *Configuration) samplingRates(a netip.Addr) (def, override uint64) {
	a = a.Unmap()
	for _, r := range c.SamplingRates {
		p := r.Exporter
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		if p.Contains(a) {
			return r.Default, r.Override
		}
	}
	return 0, 0
}
