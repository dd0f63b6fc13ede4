package store

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"flowzero/internal/config"
)

// Configuration describes where flows are stored and for how long. It is the outputs.store
// section of the collector's configuration file, which `flowzero store` reads too:
//
//	outputs:
//	  store:
//	    enabled: true                # the sink into the embedded engine (chdb build tag)
//	    database: flowzero
//	    ttl: 360h                    # raw flows, 15 days
//	    resolutions:                 # aggregated tables, each with its own retention
//	      - {interval: 1m, ttl: 168h}
//	      - {interval: 5m, ttl: 2160h}
//	      - {interval: 1h, ttl: 8760h}
//	    embedded: {path: var/chdb}
//
// A ClickHouse server gets its flows from outputs.kafka through a Kafka engine table: the
// store output stays off and `flowzero store migrate` creates the tables from this section:
//
//	outputs:
//	  kafka: {enabled: true, brokers: [127.0.0.1:9092]}
//	  store:
//	    cluster: ""                  # a ClickHouse cluster name: Replicated*MergeTree + Distributed
//	    clickhouse: {url: http://127.0.0.1:8123}
//	    kafka: {enabled: true, brokers: [127.0.0.1:9092]}  # the Kafka table ClickHouse reads
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
	// ClickHouse is the HTTP interface of a ClickHouse server, where `flowzero store migrate`
	// creates the tables. The store output writes to the embedded engine only and refuses a
	// server: a server gets its flows from outputs.kafka through the Kafka table.
	ClickHouse ClickHouseConfiguration `yaml:"clickhouse"`
	// Embedded configures the in-process ClickHouse engine (chDB) and its sink.
	Embedded EmbeddedConfiguration `yaml:"embedded"`
	// ASNames is an optional source of AS names for the asns dictionary.
	ASNames ASNamesConfiguration `yaml:"as-names"`
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

// ClickHouseConfiguration is a ClickHouse server reached over HTTP.
type ClickHouseConfiguration struct {
	// URL of the server's HTTP interface (for example http://127.0.0.1:8123); empty,
	// `flowzero store migrate` works on the embedded engine's data directory. It must not
	// hold credentials (user:password@, or user and password query parameters): user and
	// password go in headers, which errors and logs do not quote.
	URL string `yaml:"url"`
	// User to authenticate as.
	User string `yaml:"user"`
	// Password of the user; it is never logged.
	Password string `yaml:"password"`
	// Timeout of one HTTP request.
	Timeout time.Duration `yaml:"timeout"`
}

// EmbeddedConfiguration configures the embedded engine and the store sink.
type EmbeddedConfiguration struct {
	// Path is the persistent data directory.
	Path string `yaml:"path"`
	// BatchBytes is the size of encoded flows that triggers an INSERT. Each INSERT writes a
	// part into the flows table and into each aggregated table, and the aggregated views (or
	// the sink's pre-aggregation) only sum the flows of one INSERT: 64 MiB (about 700k flows)
	// costs half the CPU per flow of 16 MiB with the default resolutions. Memory: each
	// queued batch, the batch's columns and the Native block written from them in the
	// sorting key's order (each about as large as the batch, plus 36 bytes per flow for
	// the sort), and with pre-aggregation its groups (a few bytes per flow with real
	// traffic; about twice the batch if no two flows of it share their dimensions).
	BatchBytes int `yaml:"batch-bytes"`
	// FlushInterval is the longest time a flow waits before its INSERT. Each INSERT makes
	// parts in every table, to be merged later: at the demo's 20k flows/s, batches of 5 s
	// store ~17% more flows per CPU-second than batches of 2 s (~366k against ~314k,
	// BenchmarkStoreInsert, sink-5s and sink-2s), and batches of 10 s ~30% more than 5 s
	// (measured once, sink-5s against the same with 10 s batches, 4 runs each; no benchmark
	// variant keeps it). ClickHouse's Kafka engine, which feeds Akvorado's tables, flushes
	// every 7.5 s by default; 5 s keeps the flows table a little fresher for live
	// troubleshooting.
	FlushInterval time.Duration `yaml:"flush-interval"`
	// QueueLength is the number of full batches waiting for the engine; past it the sink
	// drops flows (and counts them) rather than stall the collector.
	QueueLength int `yaml:"queue-length"`
	// MaxThreads limits the engine's threads per query (0: the engine's default).
	MaxThreads int `yaml:"max-threads"`
	// PreAggregate makes the sink group each batch by the finest resolution's dimensions
	// itself and insert the sums into that table (flows_1m), instead of a materialized view
	// grouping the flows in the engine: ~0.2 µs of CPU per flow instead of ~1.2 µs. Off,
	// the view is created again (at the next start or migrate). It applies to the embedded
	// engine without kafka.enabled (flows arriving through Kafka need the view) and when
	// every dimension can be computed from the flows as sent (the columns' MATERIALIZED
	// expressions); a ClickHouse server or cluster keeps the view.
	PreAggregate bool `yaml:"pre-aggregate"`
	// PreAggregateInterval is how much traffic the sink sums into the same groups before it
	// inserts them (with pre-aggregation): it inserts them once this long has passed since
	// their first batch, or once their flows' times span this much. Flows of the same minute
	// and dimensions then make one row per interval instead of one per batch: fewer rows to
	// insert, sort and merge in every aggregated table. The aggregated tables lag the flows
	// table by up to this much, and a crash loses that window from them (the flows table
	// keeps every flow; INSERT ... SELECT ... GROUP BY rebuilds them). Groups taking as much
	// memory as a default batch (64 MiB, ~250k groups) go in before the interval is over. 0
	// inserts the groups with each batch.
	PreAggregateInterval time.Duration `yaml:"pre-aggregate-interval"`
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
// days), 5m (90 days) and 1h (1 year), no cluster, no Kafka table, the embedded engine in
// var/chdb.
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
		ClickHouse: ClickHouseConfiguration{Timeout: 5 * time.Minute},
		Embedded: EmbeddedConfiguration{
			Path:          "var/chdb",
			BatchBytes:    64 << 20,
			FlushInterval: 5 * time.Second,
			QueueLength:   2,
			PreAggregate:  true,
			// A minute's groups recur in every batch; summing them for 30 s cuts the
			// aggregated rows several times (at 20k flows/s, +33% flows per CPU-second over
			// 10 s with 5 s batches, +46% with 2 s batches: BenchmarkStoreInsert, sink-5s and
			// sink-2s, see doc.go) and still fills each minute at least twice. pmacct's SQL
			// plugins commonly write every 60 s.
			PreAggregateInterval: 30 * time.Second,
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
	if c.ClickHouse.URL != "" {
		if _, err := parseClickHouseURL(c.ClickHouse.URL); err != nil {
			return config.Prefix("clickhouse.url", err)
		}
	}
	if c.ClickHouse.Timeout <= 0 {
		return config.Errorf("clickhouse.timeout", "must be positive")
	}
	if c.Embedded.Path == "" {
		return config.Errorf("embedded.path", "must not be empty")
	}
	if c.Embedded.BatchBytes < 1024 {
		return config.Errorf("embedded.batch-bytes", "must be at least 1024, not %d", c.Embedded.BatchBytes)
	}
	if c.Embedded.FlushInterval < 10*time.Millisecond {
		return config.Errorf("embedded.flush-interval", "must be at least 10ms, not %s", c.Embedded.FlushInterval)
	}
	if c.Embedded.PreAggregateInterval < 0 {
		return config.Errorf("embedded.pre-aggregate-interval", "must not be negative")
	}
	if c.Embedded.QueueLength < 1 {
		return config.Errorf("embedded.queue-length", "must be at least 1")
	}
	if c.Embedded.MaxThreads < 0 {
		return config.Errorf("embedded.max-threads", "must not be negative")
	}
	if c.ASNames.URL != "" {
		u, err := parseHTTPURL(c.ASNames.URL)
		if err == nil {
			// ClickHouse's HTTP dictionary source takes credentials(user, password), but
			// they too would be in the statement.
			what := ""
			if u.User != nil {
				what = "user:password@"
			} else if key := credentialParam(u); key != "" {
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

// parseHTTPURL parses the URL of an HTTP(S) server. Its errors never quote a password: they
// show the URL redacted, or not at all when it does not parse (url.Parse's error quotes it
// whole).
func parseHTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("cannot be parsed as a URL (not quoted: it may hold a password)")
	}
	if u.Host == "" {
		// Without a host, user:password@ is left in the opaque part or the path, where
		// Redacted does not hide it.
		return nil, errors.New("not an http(s) URL with a host (not quoted: it may hold a password)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		// Scheme and host only: the path and query may hold a secret too.
		return nil, fmt.Errorf("%q is not an http(s) URL", (&url.URL{Scheme: u.Scheme, Host: u.Host}).String())
	}
	return u, nil
}

// credentialParam returns the first query parameter of u that carries credentials to a
// ClickHouse server (user, password), or "".
func credentialParam(u *url.URL) string {
	q := u.Query()
	for _, key := range []string{"user", "password"} {
		if q.Has(key) {
			return key
		}
	}
	return ""
}

// parseClickHouseURL parses clickhouse.url, which must not hold credentials, as user:password@
// or as the user and password query parameters the HTTP interface also takes: the HTTP client
// sends them in headers, never in the URL, so that they stay out of logs and errors.
func parseClickHouseURL(raw string) (*url.URL, error) {
	u, err := parseHTTPURL(raw)
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, errors.New("put credentials in clickhouse.user and clickhouse.password, not in the URL")
	}
	if key := credentialParam(u); key != "" {
		return nil, fmt.Errorf("%q query parameter: put credentials in clickhouse.user and clickhouse.password, not in the URL", key)
	}
	return u, nil
}

// ValidateSink checks the configuration of the store output (the Sink): Validate, and no
// ClickHouse server, since the sink only writes to the embedded engine.
func (c Configuration) ValidateSink() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.ClickHouse.URL != "" {
		return config.Errorf("clickhouse.url", "the store output writes to the embedded engine only, not to a server: "+
			"for a ClickHouse server, turn the store output off, send the flows with outputs.kafka and create the "+
			"tables with `flowzero store migrate` (with kafka.enabled, the Kafka table that reads them)")
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
