package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"flowzero/app"
	"flowzero/demo"
)

func init() {
	register("collect", "run the flow collector (UDP NetFlow/IPFIX/sFlow → Kafka, files, store)", runCollect)
}

func runCollect(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("collect", stderr)
	configPath := fs.String("config", "", "configuration file (YAML); without it, the defaults of docs/configuration.md")
	check := fs.Bool("check", false, "validate the configuration and the paths it names (without creating anything), and exit")
	withDemo := fs.Bool("demo", false, "also run the built-in demo exporters, sending to this collector's listeners")
	demoRate := fs.Int("demo-rate", 500, "flows per second of each demo exporter")
	summary := fs.Duration("summary", 0, "print a summary of top exporters, protocols and AS every interval (0: off)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := app.Load(*configPath)
	if err != nil {
		return err
	}
	if *check {
		// The paths as they are here, without creating or writing anything.
		if err := cfg.CheckPaths(false); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "configuration OK")
		return nil
	}
	if *withDemo && len(cfg.Enrich.Exporters) == 0 {
		cfg.Enrich.Exporters = app.DemoMetadata()
	}
	if *withDemo && !cfg.Enrich.NetworkAttributes.Used() {
		// The demo's networks and a GeoIP database of its remote networks, written under
		// var/demo, fill the network and geo columns.
		if cfg.Enrich.NetworkAttributes, err = app.DemoNetworkAttributes(filepath.Join("var", "demo")); err != nil {
			return fmt.Errorf("demo GeoIP database: %w", err)
		}
	}
	log := cfg.Log.NewLogger(stderr)
	a, err := app.New(cfg, app.Dependencies{Logger: log, Version: version})
	if err != nil {
		return err
	}
	a.ConfigPath = *configPath
	a.Stdout = stdout
	if *summary > 0 {
		a.Summary, a.SummaryInterval = stdout, *summary
	}
	if *withDemo {
		d := demo.DefaultConfiguration()
		d.FlowsPerSecond = *demoRate
		d.Diurnal = true
		a.Demo = &d
	}
	if err := a.Start(); err != nil {
		return err
	}
	if u := a.ConsoleURL(); u != "" {
		fmt.Fprintf(stdout, "web console: %s\n", u)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	for s := range sig {
		if s == syscall.SIGHUP {
			if _, err := a.Reload(); err != nil {
				log.Error("reload failed; keeping the running configuration", "error", err)
			}
			continue
		}
		log.Info("stopping", "signal", s.String())
		break
	}
	signal.Stop(sig)
	return a.Stop()
}
