package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"flowzero/demo"
)

func init() {
	register("demo", "run demo exporters sending NetFlow v9, IPFIX and sFlow to a collector", runDemo)
}

func runDemo(args []string, stdout, stderr io.Writer) error {
	cfg := demo.DefaultConfiguration()
	fs := newFlagSet("demo", stderr)
	nf := fs.String("netflow", cfg.NetFlow.String(), "NetFlow v9 destination HOST:PORT (empty: off)")
	ipfix := fs.String("ipfix", cfg.IPFIX.String(), "IPFIX destination HOST:PORT (empty: off)")
	sf := fs.String("sflow", cfg.SFlow.String(), "sFlow destination HOST:PORT (empty: off)")
	fs.IntVar(&cfg.FlowsPerSecond, "rate", cfg.FlowsPerSecond, "flows per second of each exporter")
	rate := fs.Uint("sampling-rate", uint(cfg.SamplingRate), "sampling rate announced by the exporters")
	fs.BoolVar(&cfg.Diurnal, "diurnal", false, "shape the rate by time of day")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed (same seed, same traffic)")
	writePcap := fs.String("write-pcap", "", "instead of sending, write this many --flows as exporter datagrams to a pcap file (for replay and load tests)")
	pcapProto := fs.String("protocol", "netflow-v9", "with --write-pcap: netflow-v9, ipfix or sflow")
	pcapFlows := fs.Int("flows", 100000, "with --write-pcap: number of flows")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg.SamplingRate = uint32(*rate)
	if *writePcap != "" {
		f, err := os.Create(*writePcap)
		if err != nil {
			return err
		}
		n, err := demo.WritePcap(f, *pcapProto, *pcapFlows, cfg.Seed, time.Now())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d flows in %d datagrams to %s\n", *pcapFlows, n, *writePcap)
		return nil
	}
	for _, x := range []struct {
		s   string
		dst *netip.AddrPort
	}{{*nf, &cfg.NetFlow}, {*ipfix, &cfg.IPFIX}, {*sf, &cfg.SFlow}} {
		*x.dst = netip.AddrPort{}
		if x.s == "" {
			continue
		}
		ap, err := netip.ParseAddrPort(x.s)
		if err != nil {
			return fmt.Errorf("destination %q: %w", x.s, err)
		}
		*x.dst = ap
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	fmt.Fprintf(stderr, "demo exporters: NetFlow v9 → %s, IPFIX → %s, sFlow → %s, %d flows/s each (Ctrl-C to stop)\n",
		cfg.NetFlow, cfg.IPFIX, cfg.SFlow, cfg.FlowsPerSecond)
	st, err := demo.Run(ctx, cfg)
	fmt.Fprintf(stdout, "sent %d flows in %d datagrams\n", st.Flows, st.Datagrams)
	return err
}
