package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"

	"flowzero/replay"
)

func init() {
	register("replay", "send the UDP payloads of pcap files to a collector", runReplay)
}

func runReplay(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", stderr)
	to := fs.String("to", "127.0.0.1:2055", "collector address HOST:PORT")
	rate := fs.Float64("rate", 0, "datagrams per second (0: as fast as possible)")
	loops := fs.Int("loop", 1, "send the files this many times")
	quiet := fs.Bool("quiet", false, "no progress line")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flowzero replay [flags] FILE.pcap...\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	addr, err := netip.ParseAddrPort(*to)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	opts := replay.SendOptions{To: addr, Rate: *rate, Loops: *loops}
	if !*quiet {
		opts.Progress = stderr
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	st, err := replay.Send(ctx, fs.Args(), opts)
	fmt.Fprintf(stdout, "sent %d datagrams (%d bytes) from %d exporters in %s\n", st.Datagrams, st.Bytes, st.Exporters, st.Elapsed.Round(1e6))
	return err
}
