package app

import (
	"fmt"

	"flowzero/collector"
	"flowzero/datagram"
	"flowzero/inlet"
	"flowzero/internal/config"
	"flowzero/internal/health"
	"flowzero/outlet"
)

// Modes of `flowzero collect` (the mode key).
const (
	ModeAll    = "all"
	ModeInlet  = "inlet"
	ModeOutlet = "outlet"
)

// validateSplit checks mode and, in a split mode, the sections it uses.
func (c *Configuration) validateSplit() error {
	switch c.Mode {
	case ModeAll:
		return nil
	case ModeInlet, ModeOutlet:
	default:
		return config.Errorf("mode", "must be all, inlet or outlet, not %q", c.Mode)
	}
	if err := c.Datagrams.Validate(); err != nil {
		return config.Prefix("datagrams", err)
	}
	if c.Mode == ModeInlet {
		if len(c.Collector.Listeners) == 0 {
			return config.Errorf("collector.listeners", "an inlet needs at least one listener")
		}
		if err := c.Inlet.Validate(); err != nil {
			return config.Prefix("inlet", err)
		}
		return nil
	}
	if err := c.Outlet.Validate(); err != nil {
		return config.Prefix("outlet", err)
	}
	return nil
}

// newSplit builds the inlet or the outlet of a split mode.
func (a *App) newSplit() error {
	switch a.cfg.Mode {
	case ModeInlet:
		in, err := inlet.New(a.registry, a.log, a.cfg.Datagrams, a.cfg.Inlet)
		if err != nil {
			return fmt.Errorf("inlet: %w", err)
		}
		a.inlet = in
	case ModeOutlet:
		var enricher outlet.Enricher
		if a.enricher != nil {
			enricher = a.enricher
		}
		out, err := outlet.New(a.cfg.Datagrams, a.cfg.Outlet, outlet.Dependencies{
			Schema: a.schema, NetFlow: a.netflow, SFlow: a.sflow, Enricher: enricher, Sinks: a.sinks,
			BatchSize: a.cfg.Collector.BatchSize, Registry: a.registry, Logger: a.log, Clock: a.clock,
		})
		if err != nil {
			return fmt.Errorf("outlet: %w", err)
		}
		a.outlet = out
	}
	return nil
}

// splitCollector adapts the collector to the mode: an inlet's workers forward datagrams to
// it, there are no sinks, and /healthz reports the inlet; an outlet has no UDP listener (its
// collector serves HTTP and starts and stops the sinks, and reports the outlet in /healthz).
func (a *App) splitCollector(cfg *collector.Configuration, deps *collector.Dependencies) {
	switch a.cfg.Mode {
	case ModeInlet:
		deps.Forward = a.inlet
		deps.Decoders, deps.Sinks, deps.Enricher = nil, nil, nil
		// Degraded while it drops datagrams or Kafka does not take them.
		deps.Health = append(deps.Health, a.inlet)
	case ModeOutlet:
		cfg.Listeners = nil
		// Degraded while a partition waits for a template past outlet.template-wait.
		deps.Health = append(deps.Health, outletHealth{a})
	}
}

// Inlet returns the inlet (mode inlet), or nil.
func (a *App) Inlet() *inlet.Inlet { return a.inlet }

// Outlet returns the outlet (mode outlet), or nil.
func (a *App) Outlet() *outlet.Outlet { return a.outlet }

// splitDefaults are the defaults of the split collector's sections.
func splitDefaults(c *Configuration) {
	c.Mode = ModeAll
	c.Datagrams = datagram.DefaultTopicConfiguration()
	c.Inlet = inlet.DefaultConfiguration()
	c.Outlet = outlet.DefaultConfiguration()
}

// outletHealth reports the outlet in /healthz, ok until it is made (startOutlet).
type outletHealth struct{ a *App }

func (h outletHealth) Name() string { return "outlet" }

func (h outletHealth) Health() health.Report {
	if o := h.a.outletHealth.Load(); o != nil {
		return o.Health()
	}
	return health.Report{Status: health.OK}
}
