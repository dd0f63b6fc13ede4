package app

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/enrich/networks"
	"flowzero/internal/config"
	"flowzero/schema"
)

// newNetworks builds the network attributes step (enrich.networks, enrich.network-sources,
// enrich.geoip), or returns nil when none is configured. It runs after the routing step, so
// that the geoip AS number provider comes last.
func newNetworks(reg prometheus.Registerer, cfg *Configuration, s *schema.Schema, log *slog.Logger) (*networks.Enricher, error) {
	na := &cfg.Enrich.NetworkAttributes
	if !na.Used() {
		return nil, nil
	}
	if key := na.VRFKey(); key != "" && !(s.Enabled(schema.ColumnIngressVRFID) && s.Enabled(schema.ColumnEgressVRFID)) {
		return nil, config.Errorf("enrich."+key, "needs the IngressVRFID and EgressVRFID columns (schema.enabled): without them decoders do not read the flows' VRFs")
	}
	e, err := networks.New(reg, *na, s, networks.Options{ASN: cfg.Enrich.GeoIPASN(), Logger: log})
	if err != nil {
		return nil, config.Prefix("enrich", err)
	}
	return e, nil
}
