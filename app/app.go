package app

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"flowzero/collector"
	"flowzero/decoder/netflow"
	"flowzero/output"
	"flowzero/output/file"
	"flowzero/output/jsonl"
	"flowzero/output/kafka"
	"flowzero/schema"
)

// App is a running `flowzero collect`.
type App struct {
	cfg       Configuration
	log       *slog.Logger
	registry  *prometheus.Registry
	schema    *schema.Schema
	netflow   *netflow.Decoder
	sinks     []output.Sink
	collector *collector.Collector
	// ConfigPath is re-read by Reload.
	ConfigPath string
	// Stdout receives the stdout sink's lines (os.Stdout by default).
	Stdout io.Writer

	kafka *kafka.Sink
	file  *file.Sink
}

// New builds every component from the configuration; nothing runs before Start.
func New(cfg Configuration, log *slog.Logger) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	a := &App{cfg: cfg, log: log, registry: prometheus.NewRegistry(), Stdout: os.Stdout}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s, err := schema.New(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	a.schema = s
	nf, err := netflow.New(a.registry, cfg.NetFlow, s)
	if err != nil {
		return nil, fmt.Errorf("netflow: %w", err)
	}
	a.netflow = nf
	if cfg.Outputs.Kafka.Enabled {
		k, err := kafka.New(a.registry, log, cfg.Outputs.Kafka.Configuration, s.Hash())
		if err != nil {
			return nil, fmt.Errorf("outputs.kafka: %w", err)
		}
		a.kafka = k
		a.sinks = append(a.sinks, k)
	}
	if cfg.Outputs.File.Enabled {
		f, err := file.New(a.registry, log, cfg.Outputs.File.Configuration)
		if err != nil {
			return nil, fmt.Errorf("outputs.file: %w", err)
		}
		a.file = f
		a.sinks = append(a.sinks, f)
	}
	return a, nil
}

// Start starts the sinks, the decoders' background work and the collector.
func (a *App) Start() error {
	if a.cfg.Outputs.Stdout.Enabled {
		a.sinks = append(a.sinks, jsonl.NewSink(a.Stdout, a.schema, a.log))
	}
	if err := a.netflow.Start(); err != nil {
		return fmt.Errorf("netflow: %w", err)
	}
	c, err := collector.New(a.cfg.Collector, collector.Dependencies{
		Schema:   a.schema,
		Decoders: map[string]collector.Decoder{"netflow": collector.NetFlowDecoder{D: a.netflow}},
		Sinks:    a.sinks,
		Registry: a.registry,
		Logger:   a.log,
		Reload:   a.Reload,
		ExporterDetails: func(addr netip.Addr) any {
			return nil
		},
	})
	if err != nil {
		return err
	}
	a.collector = c
	if err := c.Start(); err != nil {
		return err
	}
	a.log.Info("flowzero collector started", "schema", a.schema.Hash(), "summary", a.cfg.summary())
	return nil
}

// Stop stops the collector (which drains into the sinks and stops them), then the decoders
// (which save their templates).
func (a *App) Stop() error {
	err := a.collector.Stop()
	if e := a.netflow.Stop(); e != nil && err == nil {
		err = e
	}
	return err
}

// Reload re-reads the configuration file and applies what can change while running.
func (a *App) Reload() (string, error) {
	cfg, err := Load(a.ConfigPath)
	if err != nil {
		return "", err
	}
	restart, err := a.collector.Reload(cfg.Collector)
	if err != nil {
		return "", err
	}
	msg := "configuration reloaded (collector.exporters, collector.batch-interval)"
	if len(restart) > 0 {
		msg += fmt.Sprintf("; these changed but need a restart: %v", restart)
	}
	a.log.Info(msg)
	return msg, nil
}

// Schema returns the schema in use.
func (a *App) Schema() *schema.Schema { return a.schema }

// Collector returns the running collector.
func (a *App) Collector() *collector.Collector { return a.collector }

// Kafka returns the Kafka sink, or nil.
func (a *App) Kafka() *kafka.Sink { return a.kafka }

// File returns the file sink, or nil.
func (a *App) File() *file.Sink { return a.file }
