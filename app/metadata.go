package app

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/enrich"
	"flowzero/internal/clock"
	"flowzero/schema"
)

// newMetadataStep returns the enrichment step filling the exporter and interface columns:
// enrich.MetadataCache when SNMP, classifier rules or drop-unknown-interfaces are on (it
// includes the static metadata, and runs first so that a rejected flow costs no RIB
// lookup), else enrich.Metadata for static metadata alone, else nil. The cache, when
// returned, must be started and stopped.
func newMetadataStep(cfg enrich.Configuration, s *schema.Schema, reg prometheus.Registerer, log *slog.Logger, clk clock.Clock) (enrich.FlowEnricher, *enrich.MetadataCache, error) {
	mc, err := enrich.NewMetadataCache(cfg.Dynamic, cfg.Exporters, s, enrich.MetadataCacheDependencies{Registry: reg, Logger: log, Clock: clk})
	if err != nil || mc != nil {
		return mc, mc, err
	}
	md, err := enrich.NewMetadata(cfg.Exporters, s)
	if err != nil || md == nil {
		return nil, nil, err
	}
	return md, nil, nil
}
