// Package app assembles `flowzero collect` from one configuration file: the schema, the
// decoders, enrichment, the collector and its sinks. Every key of the file is documented in
// docs/configuration.md with its default; `flowzero collect --check` validates a file.
package app

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"flowzero/capture/flows"
	"flowzero/capture/server"
	"flowzero/collector"
	"flowzero/console"
	"flowzero/datagram"
	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/enrich"
	"flowzero/inlet"
	"flowzero/internal/config"
	"flowzero/outlet"
	"flowzero/output/file"
	"flowzero/output/kafka"
	"flowzero/query"
	"flowzero/routing"
	"flowzero/schema"
	"flowzero/store"
)

// Configuration is the whole configuration file.
type Configuration struct {
	// Mode is all (one process receives, decodes, enriches and stores), inlet (receive the
	// datagrams and write them undecoded to the datagrams topic in Kafka) or outlet (consume
	// that topic, decode, enrich and store): several inlets and outlets scale a collector
	// out (docs/scaling.md). Each role reads the sections it uses from the same file.
	Mode string `yaml:"mode"`
	// Datagrams is the Kafka topic between inlets and outlets, and its brokers (mode
	// inlet or outlet).
	Datagrams datagram.TopicConfiguration `yaml:"datagrams"`
	// Inlet configures how an inlet produces datagrams (mode inlet).
	Inlet inlet.Configuration `yaml:"inlet"`
	// Outlet configures how an outlet consumes datagrams and commits their offsets, and the
	// decoder state topic the outlets share (mode outlet).
	Outlet outlet.Configuration `yaml:"outlet"`
	// Log configures logging.
	Log LogConfiguration `yaml:"log"`
	// Collector configures the UDP listeners, the HTTP server and exporter policies.
	Collector collector.Configuration `yaml:"collector"`
	// Schema switches columns on and off.
	Schema schema.Configuration `yaml:"schema"`
	// NetFlow configures the NetFlow v5/v9 and IPFIX decoder.
	NetFlow netflow.Configuration `yaml:"netflow"`
	// SFlow configures the sFlow v5 decoder.
	SFlow sflow.Configuration `yaml:"sflow"`
	// Routing feeds the in-process RIB: snapshot, MRT dumps, BMP.
	Routing routing.Configuration `yaml:"routing"`
	// Enrich chooses between what exporters send and what the RIB says, and gives exporters
	// and their interfaces names and classification.
	Enrich enrich.Configuration `yaml:"enrich"`
	// Capture runs the capture server inside the collector: agents' packets are written to
	// pcapng and, with capture.flows.enable, turned into flows that take the same path as
	// exported flows (enrichment, sinks).
	Capture CaptureSection `yaml:"capture"`
	// Outputs selects and configures the sinks.
	Outputs OutputsConfiguration `yaml:"outputs"`
	// Query bounds and tunes the query API (/api/v0/query/..., `flowzero query`), served on
	// the embedded engine with outputs.store.enabled, else on the ClickHouse server of
	// outputs.store.clickhouse.url.
	Query query.Configuration `yaml:"query"`
	// Console serves the web console on the collector's HTTP listener (collector.http.listen,
	// loopback by default), beside the API it reads.
	Console console.Configuration `yaml:"console"`
}

// CaptureSection is the embedded capture server with its switch.
type CaptureSection struct {
	// Enabled starts the capture server with the collector.
	Enabled bool `yaml:"enabled"`
	// Server configures the listener, authentication, TLS and pcapng output.
	Server server.Configuration `yaml:"server"`
	// Flows turns captured packets into flows (5-tuple, active and idle timeouts).
	Flows flows.Configuration `yaml:"flows"`
}

// LogConfiguration of the logger.
type LogConfiguration struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// OutputsConfiguration selects the sinks; several can be enabled at once.
type OutputsConfiguration struct {
	// Kafka is the Kafka sink.
	Kafka KafkaOutput `yaml:"kafka"`
	// File is the archive file sink.
	File FileOutput `yaml:"file"`
	// Stdout prints flows as JSON lines.
	Stdout StdoutOutput `yaml:"stdout"`
	// Store inserts flows into the embedded ClickHouse engine (chDB: binaries built with
	// `make build-chdb`), or in mode outlet with clickhouse.url into that ClickHouse server,
	// each outlet's unit once (docs/scaling.md). In mode all a ClickHouse server gets its
	// flows from the kafka output through a Kafka table instead: this output stays off, and
	// `flowzero store migrate` reads this section to create the server's tables.
	Store StoreOutput `yaml:"store"`
}

// StoreOutput is the ClickHouse sink with its switch.
type StoreOutput struct {
	// Enabled inserts flows into the flows table (and its aggregated tables) of the embedded
	// engine, or of the server of clickhouse.url in mode outlet (refused in mode all); it
	// refuses kafka.enabled together with outputs.kafka (every flow would be stored twice: by
	// this sink and by the Kafka table).
	Enabled             bool `yaml:"enabled"`
	store.Configuration `yaml:",inline"`
}

// KafkaOutput is the Kafka sink with its switch.
type KafkaOutput struct {
	// Enabled sends flows to Kafka, to the topic <topic-prefix>-<schema hash>.
	Enabled             bool `yaml:"enabled"`
	kafka.Configuration `yaml:",inline"`
}

// FileOutput is the archive file sink with its switch.
type FileOutput struct {
	// Enabled archives flows to rotated files of length-delimited protobuf.
	Enabled            bool `yaml:"enabled"`
	file.Configuration `yaml:",inline"`
}

// StdoutOutput prints flows as JSON lines on standard output.
type StdoutOutput struct {
	// Enabled prints every flow as a JSON line on standard output (debugging).
	Enabled bool `yaml:"enabled"`
}

// DefaultConfiguration returns the configuration used when no file is given: every listener
// on its usual port, HTTP on loopback, flows archived under var/flows.
func DefaultConfiguration() Configuration {
	c := Configuration{
		Log:       LogConfiguration{Level: "info", Format: "text"},
		Collector: collector.DefaultConfiguration(),
		Schema:    schema.DefaultConfiguration(),
		NetFlow:   netflow.DefaultConfiguration(),
		SFlow:     sflow.DefaultConfiguration(),
		Routing:   routing.DefaultConfiguration(),
		Enrich:    enrich.DefaultConfiguration(),
		Capture: CaptureSection{
			Server: server.DefaultConfiguration(),
			Flows:  flows.DefaultConfiguration(),
		},
		Outputs: OutputsConfiguration{
			Kafka: KafkaOutput{Configuration: kafka.DefaultConfiguration()},
			File:  FileOutput{Enabled: true, Configuration: file.DefaultConfiguration()},
			Store: StoreOutput{Configuration: store.DefaultConfiguration()},
		},
		Query:   query.DefaultConfiguration(),
		Console: defaultConsole(),
	}
	splitDefaults(&c)
	return c
}

// defaultConsole is the console's defaults with its views file left to follow the store
// (consoleConfiguration).
func defaultConsole() console.Configuration {
	c := console.DefaultConfiguration()
	c.ViewsFile = ""
	return c
}

// Validate checks every section, naming the bad key with its full path.
func (c *Configuration) Validate() error {
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return config.Errorf("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return config.Errorf("log.format", "must be text or json, not %q", c.Log.Format)
	}
	if err := c.validateSplit(); err != nil {
		return err
	}
	if err := c.Collector.Validate(); err != nil {
		return config.Prefix("collector", err)
	}
	if err := c.Schema.Validate(); err != nil {
		return config.Prefix("schema", err)
	}
	if err := c.NetFlow.Validate(); err != nil {
		return config.Prefix("netflow", err)
	}
	if err := c.SFlow.Validate(); err != nil {
		return config.Prefix("sflow", err)
	}
	if err := c.Routing.Validate(); err != nil {
		return config.Prefix("routing", err)
	}
	if err := c.Enrich.Validate(); err != nil {
		return config.Prefix("enrich", err)
	}
	if c.Capture.Flows.Enable && !c.Capture.Enabled {
		// Without the server there are no packets to turn into flows: say so rather than
		// accept a setting that does nothing.
		return &config.KeyError{Key: "capture.flows.enable", Err: errors.New("needs capture.enabled: true (the capture server inside the collector)")}
	}
	if c.Capture.Enabled {
		if err := c.Capture.Server.Validate(); err != nil {
			return config.Prefix("capture.server", err)
		}
		if err := c.Capture.Flows.Validate(); err != nil {
			return config.Prefix("capture.flows", err)
		}
	}
	if c.Outputs.Kafka.Enabled {
		if err := c.Outputs.Kafka.Validate(); err != nil {
			return config.Prefix("outputs.kafka", err)
		}
	}
	if c.Outputs.File.Enabled {
		if err := c.Outputs.File.Validate(); err != nil {
			return config.Prefix("outputs.file", err)
		}
	}
	if c.Outputs.Store.Enabled {
		if err := c.Outputs.Store.ValidateSink(); err != nil {
			return config.Prefix("outputs.store", err)
		}
		if c.Outputs.Store.ClickHouse.URL != "" && c.Mode != ModeOutlet {
			// Inserts into a server carry the deduplication tokens of an outlet's units; a
			// collector in mode all has no units.
			return config.Errorf("outputs.store.clickhouse.url",
				"the store output inserts into a ClickHouse server in mode outlet only (units with deduplication tokens); "+
					"in mode %s, turn the store output off, send the flows with outputs.kafka and create the tables with "+
					"`flowzero store migrate` (with kafka.enabled, the Kafka table that reads them), or keep the store output "+
					"without clickhouse.url for the embedded engine", c.Mode)
		}
		if c.Outputs.Store.Kafka.Enabled && c.Outputs.Kafka.Enabled {
			// The sink inserts each flow, and the Kafka table inserts it again from the topic
			// the kafka output fills: every flow would be stored twice.
			return config.Errorf("outputs.store.kafka.enabled",
				"with outputs.store.enabled and outputs.kafka.enabled, every flow would be stored twice "+
					"(by the store sink, and by the Kafka table reading the kafka output's topic): "+
					"keep outputs.store.enabled to store directly, or outputs.store.kafka.enabled to store through Kafka")
		}
	} else if c.Outputs.Store.ClickHouse.URL != "" {
		// The query API reads that server.
		if err := c.Outputs.Store.Validate(); err != nil {
			return config.Prefix("outputs.store", err)
		}
	}
	if err := c.Query.Validate(); err != nil {
		return config.Prefix("query", err)
	}
	if err := c.consoleConfiguration().Validate(); err != nil {
		return config.Prefix("console", err)
	}
	return nil
}

// Load reads a configuration file over the defaults ("" gives the defaults).
func Load(path string) (Configuration, error) {
	cfg := DefaultConfiguration()
	if err := config.LoadFile(path, &cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// NewLogger returns the logger the configuration asks for.
func (c LogConfiguration) NewLogger(w interface{ Write([]byte) (int, error) }) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(c.Level))); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (c *Configuration) summary() string {
	var outs []string
	if c.Outputs.Kafka.Enabled {
		outs = append(outs, "kafka")
	}
	if c.Outputs.File.Enabled {
		outs = append(outs, "file:"+c.Outputs.File.Directory)
	}
	if c.Outputs.Stdout.Enabled {
		outs = append(outs, "stdout")
	}
	if c.Outputs.Store.Enabled {
		outs = append(outs, "store")
	}
	return fmt.Sprintf("%d listeners, outputs %s", len(c.Collector.Listeners), strings.Join(outs, ","))
}
