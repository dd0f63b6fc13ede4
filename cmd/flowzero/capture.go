package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"flowzero/capture/agent"
	"flowzero/capture/server"
	"flowzero/internal/config"
	"flowzero/internal/health"
	"flowzero/internal/httpserver"
)

func init() {
	register("capture", "capture forwarder: 'capture agent' streams packets, 'capture server' writes pcapng", runCapture)
}

func runCapture(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "agent" && args[0] != "server") {
		fmt.Fprintf(stderr, "Usage: flowzero capture agent|server [-config file.yaml] [flags]\n"+
			"  agent   capture on interfaces (AF_PACKET) or replay pcap/pcapng files to a server\n"+
			"  server  accept agents and write pcapng (rotation, per agent, stdout or FIFO)\n")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errUsage
	}
	if args[0] == "agent" {
		return runCaptureAgent(args[1:], stdout, stderr)
	}
	return runCaptureServer(args[1:], stdout, stderr)
}

// stopContext returns the context that ends a capture agent or server: SIGINT or SIGTERM.
// Tests replace it to stop the commands they run in-process.
var stopContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// secondsOrDuration is a flag taking whole seconds, as tcpdump's -G does, or a Go duration.
type secondsOrDuration struct{ d *time.Duration }

func (v secondsOrDuration) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v secondsOrDuration) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > math.MaxInt64/int64(time.Second) {
			return fmt.Errorf("%d seconds: out of range", n)
		}
		*v.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q: want whole seconds (3600) or a duration (1h)", s)
	}
	*v.d = d
	return nil
}

// tcpdumpSize is a flag taking a file size as tcpdump's -C does: a whole number of millions
// of bytes (1,000,000, not 1,048,576), or of KiB, MiB or GiB with a k, m or g suffix. Taking
// plain bytes instead would make a tcpdump user's "-C 100" rotate after every packet.
type tcpdumpSize struct{ n *int64 }

func (v tcpdumpSize) String() string {
	if v.n == nil {
		return "0"
	}
	return strconv.FormatInt(*v.n, 10)
}

func (v tcpdumpSize) Set(s string) error {
	unit := int64(1_000_000)
	num := s
	if k := len(s) - 1; k > 0 {
		switch s[k] {
		case 'k', 'K':
			unit, num = 1<<10, s[:k]
		case 'm', 'M':
			unit, num = 1<<20, s[:k]
		case 'g', 'G':
			unit, num = 1<<30, s[:k]
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q: want millions of bytes (100), or KiB, MiB or GiB with a k, m or g suffix (512m)", s)
	}
	if n > math.MaxInt64/unit {
		return fmt.Errorf("%q: out of range", s)
	}
	*v.n = n * unit
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// serveMetrics exposes a registry on addr as /metrics, and component's state as /healthz with
// the collector's handler (nothing when addr is empty), with the project's HTTP timeouts and
// guards.
func serveMetrics(addr string, reg *prometheus.Registry, component health.Reporter, log *slog.Logger, t httpserver.Timeouts) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	badHost := prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_metrics_http_rejected_total",
		Help:        "Requests refused, by reason (host: not addressed as localhost while bound to loopback).",
		ConstLabels: prometheus.Labels{"reason": "host"}})
	if err := reg.Register(badHost); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /healthz", health.Handler(func() health.Overall { return health.Collect([]health.Reporter{component}) }))
	srv := httpserver.New(ln, mux, t, badHost)
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics", "address", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

func runCaptureAgent(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("capture agent", stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (keys as in flowzero/capture/agent.Configuration)")
	name := fs.String("name", "", "agent name (default: the host name)")
	serverAddr := fs.String("server", "", "server host:port")
	tokenFile := fs.String("token-file", "", "file holding the shared token")
	ifaces := fs.String("interfaces", "", "comma-separated interfaces to capture on (AF_PACKET)")
	filter := fs.String("filter", "", "filter: built-in tcpdump subset (e.g. 'not port 22 and (tcp or udp)') or `tcpdump -ddd` output")
	snap := fs.Int("snaplen", 0, "snap length")
	replay := fs.String("replay", "", "comma-separated pcap/pcapng files to replay instead of capturing")
	speed := fs.String("speed", "", "replay speed: max or recorded")
	loop := fs.Int("loop", 0, "replay the files this many times")
	compress := fs.Bool("compress", false, "zstd-compress frames")
	retryUnauthorized := fs.Bool("retry-unauthorized", false, "keep trying when the server refuses the token (default: stop with an error)")
	metrics := fs.String("metrics", "", "serve Prometheus metrics (/metrics) and the agent's state (/healthz) on this address (e.g. 127.0.0.1:9101)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := agent.DefaultConfiguration()
	if *name == "" {
		*name, _ = os.Hostname()
	}
	cfg.Name = *name
	file := captureAgentFile(cfg)
	if err := loadNoValidate(*cfgPath, &file); err != nil {
		return err
	}
	cfg = agent.Configuration(file)
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "name":
			cfg.Name = *name
		case "server":
			cfg.Server = *serverAddr
		case "interfaces":
			cfg.Live.Interfaces = splitList(*ifaces)
		case "filter":
			cfg.Live.Filter = *filter
		case "snaplen":
			cfg.Live.SnapLength = *snap
		case "replay":
			cfg.Replay.Files = splitList(*replay)
		case "speed":
			cfg.Replay.Speed = *speed
		case "loop":
			cfg.Replay.Loop = *loop
		case "compress":
			cfg.Compress = *compress
		case "retry-unauthorized":
			cfg.RetryUnauthorized = *retryUnauthorized
		}
	})
	if *tokenFile != "" {
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		cfg.Token = strings.TrimSpace(string(tok))
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	reg := prometheus.NewRegistry()
	a, err := agent.New(reg, cfg, agent.Dependencies{Logger: log})
	if err != nil {
		return err
	}
	stopMetrics, err := serveMetrics(*metrics, reg, a, log, httpserver.DefaultTimeouts)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if err := a.Start(); err != nil {
		return err
	}
	ctx, cancel := stopContext()
	defer cancel()
	select {
	case <-ctx.Done():
	case <-a.Done():
	}
	err = a.Stop()
	st := a.Stats()
	fmt.Fprintf(stdout, "captured %d, sent %d, dropped by the agent %d, by the kernel %d, connections %d\n",
		st.Captured, st.Sent, st.DroppedAgent, st.DroppedKernel, st.Connections)
	return err
}

func runCaptureServer(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("capture server", stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (keys as in flowzero/capture/server.Configuration)")
	listen := fs.String("listen", "", "address agents connect to")
	output := fs.String("w", "", "output pcapng path ('-' for stdout; a FIFO works)")
	perAgent := fs.Bool("per-agent", false, "one file per agent")
	var rotSize int64
	fs.Var(tcpdumpSize{&rotSize}, "C", "rotate after this many millions of bytes (tcpdump -C 100), or KiB, MiB, GiB with a k, m, g suffix (512m)")
	var rotTime time.Duration
	fs.Var(secondsOrDuration{&rotTime}, "G", "rotate after this many seconds (tcpdump -G 3600) or this Go duration (1h); strftime conversions in -w")
	maxFiles := fs.Int("W", 0, "keep at most this many files (tcpdump -W)")
	tokenFile := fs.String("token-file", "", "file holding the accepted shared token")
	metrics := fs.String("metrics", "", "serve Prometheus metrics (/metrics) and the server's state (/healthz) on this address (e.g. 127.0.0.1:9102)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	file := captureServerFile(server.DefaultConfiguration())
	if err := loadNoValidate(*cfgPath, &file); err != nil {
		return err
	}
	cfg := server.Configuration(file)
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "w":
			cfg.Output.Path = *output
		case "per-agent":
			cfg.Output.PerAgent = *perAgent
		case "C":
			cfg.Output.RotateSize = rotSize
		case "G":
			cfg.Output.RotateInterval = rotTime
		case "W":
			cfg.Output.MaxFiles = *maxFiles
		}
	})
	if *tokenFile != "" {
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		cfg.Tokens = append(cfg.Tokens, strings.TrimSpace(string(tok)))
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	reg := prometheus.NewRegistry()
	s, err := server.New(reg, cfg, server.Dependencies{Stdout: stdout, Logger: log})
	if err != nil {
		return err
	}
	stopMetrics, err := serveMetrics(*metrics, reg, s, log, httpserver.DefaultTimeouts)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if err := s.Start(); err != nil {
		return err
	}
	log.Info("capture server listening", "address", s.Addr().String(), "output", cfg.Output.Path)
	ctx, cancel := stopContext()
	defer cancel()
	select {
	case <-ctx.Done():
		return s.Stop()
	case err := <-s.Err():
		_ = s.Stop()
		return err
	}
}

// The configuration types without their methods: the file is decoded strictly first, the
// flags applied, and only then is the result validated.
type (
	captureAgentFile  agent.Configuration
	captureServerFile server.Configuration
)

// loadNoValidate decodes a YAML file over the defaults already in out.
func loadNoValidate(path string, out any) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if err := config.Decode(data, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
