package store

import (
	"path/filepath"
	"time"

	"flowzero/internal/config"
	"flowzero/store/ddl"
	"flowzero/store/engine"
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
//
// The outlets of a split collector (mode: outlet) insert into a server themselves, each
// unit once whichever outlet inserts it (ServerSink; the tables from `flowzero store migrate`
// with the outlets' file):
//
//	mode: outlet
//	outputs:
//	  store:
//	    enabled: true
//	    clickhouse: {url: http://127.0.0.1:8123}
type Configuration struct {
	// The tables, their retention, the Kafka table and the dictionaries.
	ddl.Configuration `yaml:",inline"`
	// ClickHouse is the HTTP interface of a ClickHouse server, where `flowzero store migrate`
	// creates the tables and the query API reads. With the store output enabled in mode
	// outlet, the outlets insert their units there, each once whichever outlet inserts it
	// (docs/scaling.md); in mode all the store output writes to the embedded engine only, and
	// a server gets its flows from outputs.kafka through the Kafka table.
	ClickHouse engine.HTTPConfiguration `yaml:"clickhouse"`
	// Server configures the store output's inserts into the server of clickhouse.url.
	Server ServerConfiguration `yaml:"server"`
	// Embedded configures the in-process ClickHouse engine (chDB) and its sink.
	Embedded EmbeddedConfiguration `yaml:"embedded"`
}

// ServerConfiguration configures the inserts of an outlet's units into a ClickHouse server.
type ServerConfiguration struct {
	// InsertTimeout bounds one INSERT attempt (and the check of the tables at start).
	InsertTimeout time.Duration `yaml:"insert-timeout"`
	// Retries is how many times a failed INSERT is tried again, with the same deduplication
	// token, before the outlet is told (it then commits nothing and consumes the unit's
	// datagrams again). A refused statement (HTTP 4xx) is not tried again.
	Retries int `yaml:"retries"`
	// RetryDelay is the wait before the first retry; it doubles at each next one.
	RetryDelay time.Duration `yaml:"retry-delay"`
}

// EmbeddedConfiguration configures the embedded engine and the store sink.
type EmbeddedConfiguration struct {
	// Path is the persistent data directory.
	Path string `yaml:"path"`
	// BatchBytes is the size of encoded flows that triggers an INSERT. Each INSERT writes a
	// part into the flows table and into each aggregated table, and the aggregated views (or
	// the sink's pre-aggregation) only sum the flows of one INSERT: larger batches cost less
	// CPU per flow; 64 MiB is about 700k flows. Memory: each
	// queued batch, the batch's columns and the Native block written from them in the
	// sorting key's order (each about as large as the batch, plus 36 bytes per flow for
	// the sort), and with pre-aggregation its groups (a few bytes per flow with real
	// traffic; about twice the batch if no two flows of it share their dimensions).
	BatchBytes int `yaml:"batch-bytes"`
	// FlushInterval is the longest time a flow waits before its INSERT. Each INSERT makes
	// parts in every table, to be merged later, so a collector receiving fewer flows than a
	// batch holds stores more flows per CPU-second with a longer interval. ClickHouse's Kafka
	// engine, which feeds Akvorado's tables, flushes every 7.5 s by default; 5 s keeps the
	// flows table a little fresher for live troubleshooting.
	FlushInterval time.Duration `yaml:"flush-interval"`
	// QueueLength is the number of full batches waiting for the engine; past it the sink
	// drops flows (and counts them) rather than stall the collector.
	QueueLength int `yaml:"queue-length"`
	// MaxThreads limits the engine's threads per query (0: the engine's default).
	MaxThreads int `yaml:"max-threads"`
	// QueryConnections is how many read-only queries from other components (the query API)
	// the engine runs at once, each on a connection of its own beside the sink's, which
	// they never wait for; more queries wait for a connection.
	QueryConnections int `yaml:"query-connections"`
	// MaxResultBytes bounds the answer of one read-only query: a larger one is an error.
	MaxResultBytes int64 `yaml:"max-result-bytes"`
	// PreAggregate makes the sink group each batch by the finest resolution's dimensions
	// itself and insert the sums into that table (flows_1m), instead of a materialized view
	// grouping the flows in the engine, which costs several times more CPU per flow. Off,
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

// DefaultConfiguration returns the defaults: 15 days of flows, aggregated tables at 1m (7
// days), 5m (90 days) and 1h (1 year), no cluster, no Kafka table, the embedded engine in
// var/chdb.
func DefaultConfiguration() Configuration {
	return Configuration{
		Configuration: ddl.DefaultConfiguration(),
		ClickHouse:    engine.DefaultHTTPConfiguration(),
		Server:        ServerConfiguration{InsertTimeout: time.Minute, Retries: 3, RetryDelay: time.Second},
		Embedded: EmbeddedConfiguration{
			Path:             "var/chdb",
			BatchBytes:       64 << 20,
			FlushInterval:    5 * time.Second,
			QueueLength:      2,
			QueryConnections: 4,
			MaxResultBytes:   64 << 20,
			PreAggregate:     true,
			// A minute's groups recur in every batch: summing them for 30 s cuts the
			// aggregated rows several times and still fills each minute at least twice.
			// pmacct's SQL plugins commonly write every 60 s.
			PreAggregateInterval: 30 * time.Second,
		},
	}
}

// Validate checks the configuration; errors name the bad key.
func (c Configuration) Validate() error {
	if err := c.Configuration.Validate(); err != nil {
		return err
	}
	if err := c.ClickHouse.Validate(); err != nil {
		return config.Prefix("clickhouse", err)
	}
	if c.Server.InsertTimeout < time.Second {
		return config.Errorf("server.insert-timeout", "must be at least 1s, not %s", c.Server.InsertTimeout)
	}
	if c.Server.Retries < 0 {
		return config.Errorf("server.retries", "must not be negative")
	}
	if c.Server.RetryDelay < 0 {
		return config.Errorf("server.retry-delay", "must not be negative")
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
	if c.Embedded.QueryConnections < 1 {
		return config.Errorf("embedded.query-connections", "must be at least 1")
	}
	if c.Embedded.MaxResultBytes < 1024 {
		return config.Errorf("embedded.max-result-bytes", "must be at least 1024, not %d", c.Embedded.MaxResultBytes)
	}
	return nil
}

// ValidateSink checks the configuration of the store output: Validate. With clickhouse.url
// the output inserts into that server (ServerSink, units of mode outlet only: the collector's
// configuration refuses it in mode all), else into the embedded engine (Sink).
func (c Configuration) ValidateSink() error {
	return c.Validate()
}

// ProtoDir returns where ClickHouse reads the schema's .proto: format-schema-path, or for
// the embedded engine <embedded.path>/format_schemas, made absolute.
func (c Configuration) ProtoDir() (string, error) {
	dir := c.FormatSchemaPath
	if dir == "" {
		dir = filepath.Join(c.Embedded.Path, "format_schemas")
	}
	return filepath.Abs(dir)
}
