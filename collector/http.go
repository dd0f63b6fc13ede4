package collector

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"flowzero/internal/health"
	"flowzero/internal/httpserver"
)

// RequestHeader must be present (any value; "1" by convention) on requests that change
// state, such as POST /api/v0/reload. A browser sends a custom header cross-site only after
// a CORS preflight, which this server never grants, so a web page the operator opens cannot
// trigger a reload.
const RequestHeader = "X-Flowzero-Request"

type httpServer struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

func (c *Collector) startHTTP() (*httpServer, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(c.deps.Registry, promhttp.HandlerOpts{}))
	// 200 when every component is ok, 503 when one is degraded, with the JSON of
	// HealthReport (docs/api.md).
	mux.HandleFunc("GET /healthz", health.Handler(c.HealthReport))
	mux.HandleFunc("GET /api/v0/exporters", c.handleExporters)
	mux.HandleFunc("POST /api/v0/reload", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(RequestHeader) == "" {
			c.metrics.httpRejected.WithLabelValues("no-request-header").Inc()
			http.Error(w, "send the header "+RequestHeader+": 1 with this request", http.StatusForbidden)
			return
		}
		if c.deps.Reload == nil {
			http.Error(w, "reload is not available", http.StatusNotImplemented)
			return
		}
		msg, err := c.deps.Reload()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(msg + "\n"))
	})
	for pattern, h := range c.deps.Handlers {
		mux.Handle(pattern, h)
	}
	if c.cfg.HTTP.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	limit := httpserver.NewLimiter(c.cfg.HTTP.MaxConcurrentRequests, c.cfg.HTTP.MaxQueuedRequests, apiQueueWait)
	limit.Busy = c.metrics.httpRejected.WithLabelValues("busy")
	limit.Timeout = c.metrics.httpRejected.WithLabelValues("busy-timeout")
	limit.InFlight = c.metrics.apiInFlight
	// A handler's panic (the query API, the console's) answers 500 and is counted; the
	// server and the other requests go on.
	handler := limit.Wrap(httpserver.Recover(mux, c.metrics.httpPanics, c.log),
		func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") })
	ln, err := net.Listen("tcp", c.cfg.HTTP.Listen)
	if err != nil {
		return nil, err
	}
	h := &httpServer{
		srv:  httpserver.New(ln, handler, c.httpTimeouts, c.metrics.httpRejected.WithLabelValues("host")),
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error("HTTP server stopped", "error", err)
		}
	}()
	c.log.Info("HTTP server listening", "address", h.addr)
	return h, nil
}

// apiQueueWait is how long an API request waits for its turn before it is answered 503.
const apiQueueWait = 10 * time.Second

// Health returns the collector's own state: degraded while another socket shares a
// listener's port. Its counters are the datagrams, flows and errors of every exporter, the
// kernel's drops and, with af-packet listeners, the frames their rings refused.
func (c *Collector) Health() health.Report {
	r := c.health.Report()
	var datagrams, flows, errs, kernel uint64
	c.exporters.Range(func(_, v any) bool {
		e := v.(*exporterInfo)
		datagrams += e.datagrams.Load()
		flows += e.flows.Load()
		errs += e.errors.Load()
		return true
	})
	var ringErrs uint64
	rings := false
	for _, w := range c.workers {
		kernel += uint64(w.dropsSeen.Load())
		if w.ring != nil {
			rings = true
			ringErrs += w.ring.refused.Load()
		}
	}
	r.Counters = map[string]uint64{"datagrams": datagrams, "flows": flows, "decode-errors": errs, "kernel-drops": kernel}
	if rings {
		r.Counters["ring-errors"] = ringErrs
	}
	return r
}

// Name identifies the collector in /healthz.
func (c *Collector) Name() string { return "collector" }

// HealthReport returns what /healthz answers: the collector's state, each sink's that
// reports one, and the other components' of Dependencies.Health.
func (c *Collector) HealthReport() health.Overall {
	reporters := []health.Reporter{c}
	for _, s := range c.deps.Sinks {
		if r, ok := s.(health.Reporter); ok {
			reporters = append(reporters, r)
		}
	}
	return health.Collect(append(reporters, c.deps.Health...))
}

func (h *httpServer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.srv.Shutdown(ctx)
	<-h.done
	return err
}

// ExporterStatus is one exporter in /api/v0/exporters.
type ExporterStatus struct {
	Address      netip.Addr `json:"address"`
	FirstSeen    time.Time  `json:"first-seen"`
	LastPacket   time.Time  `json:"last-packet"`
	Datagrams    uint64     `json:"datagrams"`
	Flows        uint64     `json:"flows"`
	Errors       uint64     `json:"errors"`
	Allowed      bool       `json:"allowed"`
	SamplingRate uint64     `json:"last-sampling-rate"`
	Decoder      any        `json:"decoder,omitempty"`
}

// Exporters returns the exporters seen since start, sorted by address.
func (c *Collector) Exporters() []ExporterStatus {
	pol := c.policy.Load()
	var out []ExporterStatus
	c.exporters.Range(func(_, v any) bool {
		e := v.(*exporterInfo)
		st := ExporterStatus{
			Address:      e.addr,
			FirstSeen:    e.firstSeen.UTC(),
			LastPacket:   time.Unix(0, e.lastSeen.Load()).UTC(),
			Datagrams:    e.datagrams.Load(),
			Flows:        e.flows.Load(),
			Errors:       e.errors.Load(),
			Allowed:      pol.allowed(e.addr),
			SamplingRate: e.samplingRate.Load(),
		}
		if c.deps.ExporterDetails != nil {
			st.Decoder = c.deps.ExporterDetails(e.addr)
		}
		out = append(out, st)
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Address.Less(out[j].Address) })
	return out
}

func (c *Collector) handleExporters(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(map[string]any{"exporters": c.Exporters()})
}
