package ddl

import (
	"fmt"
	"regexp"
	"time"

	"flowzero/internal/config"
	"flowzero/store/engine"
)

// Configuration describes the tables: where they are, for how long they keep flows, and
// the Kafka table and dictionaries around them. It is inlined in outputs.store
// (store.Configuration).
type Configuration struct {
	// Database holds every table, view and dictionary flowzero creates.
	Database string `yaml:"database"`
	// TTL is the retention of the raw flows table; 0 keeps flows forever.
	TTL time.Duration `yaml:"ttl"`
	// Resolutions lists the aggregated tables (flows_1m, flows_5m, ...), fed from the flows
	// table by materialized views. They keep the columns that make sense summed over time.
	Resolutions []Resolution `yaml:"resolutions"`
	// Cluster is the name of a ClickHouse cluster (remote_servers): tables become
	// Replicated*MergeTree on each node with Distributed tables in front, DDL runs ON CLUSTER.
	Cluster string `yaml:"cluster"`
	// DropRemovedColumns makes migrations drop columns of the flows and aggregated tables
	// that the schema no longer has. Off by default: a column switched off keeps its data.
	DropRemovedColumns bool `yaml:"drop-removed-columns"`
	// FormatSchemaPath is the directory where ClickHouse reads .proto files (its
	// format_schema_path). For the embedded engine it defaults to <embedded.path>/format_schemas
	// and the file is written there; for a server the file must be copied there (migrate says
	// so) and only its name is used in the Kafka table.
	FormatSchemaPath string `yaml:"format-schema-path"`
	// Kafka configures the Kafka engine table that makes ClickHouse consume flows-<hash>.
	Kafka KafkaConfiguration `yaml:"kafka"`
	// ASNames is an optional source of AS names for the asns dictionary.
	ASNames ASNamesConfiguration `yaml:"as-names"`
	// Deduplicate makes the non-replicated flows and aggregated tables remember the
	// deduplication tokens of their last DeduplicationWindow inserts. Set by the collector in
	// mode outlet, whose inserts carry tokens; not a configuration key.
	Deduplicate bool `yaml:"-"`
}

// Resolution is one aggregated table.
type Resolution struct {
	// Interval is the time bucket (a whole number of seconds, at least 1s).
	Interval time.Duration `yaml:"interval"`
	// TTL is the table's retention; 0 keeps rows forever.
	TTL time.Duration `yaml:"ttl"`
}

// KafkaConfiguration configures ClickHouse's consumption of the flows topic.
type KafkaConfiguration struct {
	// Enabled creates the Kafka engine table and its two materialized views: one into the
	// flows table, one into flows_kafka_errors, which keeps the records it cannot parse for a
	// day.
	Enabled bool `yaml:"enabled"`
	// Brokers is the broker list as ClickHouse reaches it.
	Brokers []string `yaml:"brokers"`
	// TopicPrefix names the topic <prefix>-<schema hash>, as the collector's Kafka sink does.
	TopicPrefix string `yaml:"topic-prefix"`
	// GroupName is the consumer group of ClickHouse.
	GroupName string `yaml:"group-name"`
	// Consumers is the number of consumers (one thread each) per ClickHouse node.
	Consumers int `yaml:"consumers"`
	// MaxBlockSize is the number of messages ClickHouse polls before writing a block.
	MaxBlockSize int `yaml:"max-block-size"`
}

// ASNamesConfiguration is a CSV with a header line and the columns asn and name, served
// over HTTP(S), that the asns dictionary loads and refreshes.
type ASNamesConfiguration struct {
	// URL of the CSV; empty disables the AS names dictionary. It is written into the
	// dictionary's CREATE statement: it must not hold credentials (user:password@, or user
	// and password query parameters).
	URL string `yaml:"url"`
	// Refresh is how often the dictionary reloads the CSV.
	Refresh time.Duration `yaml:"refresh"`
}

// DefaultConfiguration returns the defaults: 15 days of flows, aggregated tables at 1m (7
// days), 5m (90 days) and 1h (1 year), no cluster, no Kafka table.
func DefaultConfiguration() Configuration {
	return Configuration{
		Database: "flowzero",
		TTL:      15 * 24 * time.Hour,
		Resolutions: []Resolution{
			{Interval: time.Minute, TTL: 7 * 24 * time.Hour},
			{Interval: 5 * time.Minute, TTL: 90 * 24 * time.Hour},
			{Interval: time.Hour, TTL: 365 * 24 * time.Hour},
		},
		Kafka: KafkaConfiguration{
			Brokers:      []string{"127.0.0.1:9092"},
			TopicPrefix:  "flows",
			GroupName:    "clickhouse",
			Consumers:    1,
			MaxBlockSize: 1 << 20,
		},
		ASNames: ASNamesConfiguration{Refresh: 24 * time.Hour},
	}
}

var (
	identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	topicRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)
)

// Validate checks the configuration; errors name the bad key.
func (c Configuration) Validate() error {
	if !identRe.MatchString(c.Database) {
		return config.Errorf("database", "%q is not a plain identifier", c.Database)
	}
	if c.Cluster != "" && !identRe.MatchString(c.Cluster) {
		return config.Errorf("cluster", "%q is not a plain identifier", c.Cluster)
	}
	if c.TTL < 0 || c.TTL%time.Second != 0 {
		return config.Errorf("ttl", "must be a whole, non-negative number of seconds, not %s", c.TTL)
	}
	seen := map[string]bool{}
	for i, r := range c.Resolutions {
		key := fmt.Sprintf("resolutions[%d]", i)
		if r.Interval < time.Second || r.Interval%time.Second != 0 {
			return config.Errorf(key+".interval", "must be a whole number of seconds, at least 1s, not %s", r.Interval)
		}
		if r.TTL < 0 || r.TTL%time.Second != 0 {
			return config.Errorf(key+".ttl", "must be a whole, non-negative number of seconds, not %s", r.TTL)
		}
		if n := r.suffix(); seen[n] {
			return config.Errorf(key+".interval", "%s given twice", r.Interval)
		} else {
			seen[n] = true
		}
	}
	if c.Kafka.Enabled {
		if len(c.Kafka.Brokers) == 0 {
			return config.Errorf("kafka.brokers", "at least one broker is needed when kafka.enabled is true")
		}
		if !topicRe.MatchString(c.Kafka.TopicPrefix) {
			return config.Errorf("kafka.topic-prefix", "%q is not a plain name", c.Kafka.TopicPrefix)
		}
		if c.Kafka.GroupName == "" {
			return config.Errorf("kafka.group-name", "must not be empty")
		}
		if c.Kafka.Consumers < 1 {
			return config.Errorf("kafka.consumers", "must be at least 1")
		}
		if c.Kafka.MaxBlockSize < 1 {
			return config.Errorf("kafka.max-block-size", "must be at least 1")
		}
	}
	if c.ASNames.URL != "" {
		u, err := engine.ParseHTTPURL(c.ASNames.URL)
		if err == nil {
			// ClickHouse's HTTP dictionary source takes credentials(user, password), but
			// they too would be in the statement.
			what := ""
			if u.User != nil {
				what = "user:password@"
			} else if key := engine.CredentialParam(u); key != "" {
				what = fmt.Sprintf("a %q query parameter", key)
			}
			if what != "" {
				err = fmt.Errorf("must not hold credentials (%s): the URL is written into the asns "+
					"dictionary's CREATE statement, which migrate prints, errors quote and ClickHouse keeps in "+
					"system.tables; serve the CSV from a URL that needs none", what)
			}
		}
		if err != nil {
			return config.Prefix("as-names.url", err)
		}
		if c.ASNames.Refresh < time.Minute {
			return config.Errorf("as-names.refresh", "must be at least 1m")
		}
	}
	return nil
}

// suffix names a resolution's table: flows_1m, flows_5m, flows_1h, flows_1d, flows_30s.
func (r Resolution) suffix() string {
	s := int64(r.Interval / time.Second)
	switch {
	case s%86400 == 0:
		return fmt.Sprintf("%dd", s/86400)
	case s%3600 == 0:
		return fmt.Sprintf("%dh", s/3600)
	case s%60 == 0:
		return fmt.Sprintf("%dm", s/60)
	}
	return fmt.Sprintf("%ds", s)
}
