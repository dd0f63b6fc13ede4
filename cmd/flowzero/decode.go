package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"flowzero/app"
	"flowzero/replay"
)

func init() {
	register("decode", "decode NetFlow/IPFIX/sFlow datagrams from pcap files and print flows as JSON lines", runDecode)
}

func runDecode(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("decode", stderr)
	configPath := fs.String("config", "", "configuration file (schema, decoder options such as sampling rates)")
	columns := fs.String("columns", "", "comma-separated column names to print (default: every column present)")
	millis := fs.Bool("ms", false, "print times as Unix milliseconds instead of RFC 3339")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flowzero decode [flags] FILE.pcap...\n\nDecodes the exporter datagrams of the files in the order given (templates carry across\nfiles), one JSON object per flow on stdout, a summary on stderr.\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	cfg, err := app.Load(*configPath)
	if err != nil {
		return err
	}
	var opts replay.DecodeOptions
	if *columns != "" {
		opts.Columns = strings.Split(*columns, ",")
	}
	opts.TimesAsMillis = *millis
	w := bufio.NewWriter(stdout)
	sum, err := replay.Decode(replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}, fs.Args(), opts, w)
	w.Flush()
	sum.WriteSummary(stderr)
	return err
}
