package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"flowzero/app"
)

func init() {
	register("collect", "run the flow collector (UDP NetFlow/IPFIX/sFlow → Kafka, files, store)", runCollect)
}

func runCollect(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("collect", stderr)
	configPath := fs.String("config", "", "configuration file (YAML); without it, the defaults of docs/configuration.md")
	check := fs.Bool("check", false, "validate the configuration and exit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := app.Load(*configPath)
	if err != nil {
		return err
	}
	if *check {
		fmt.Fprintln(stdout, "configuration OK")
		return nil
	}
	log := cfg.Log.NewLogger(stderr)
	a, err := app.New(cfg, log)
	if err != nil {
		return err
	}
	a.ConfigPath = *configPath
	a.Stdout = stdout
	if err := a.Start(); err != nil {
		return err
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
