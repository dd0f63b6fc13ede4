package classifier

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	kindExporter = iota
	kindInterface
	kindCount
)

var (
	kindNames = [kindCount]string{"exporter", "interface"}
	kindKeys  = [kindCount]string{"exporter-classifiers", "interface-classifiers"}
)

type metrics struct {
	// runs counts classifications by kind: each is a cache miss or refresh of the caller.
	runs [kindCount]prometheus.Counter
	// errors and empty hold one handle per rule.
	errors, empty [kindCount][]prometheus.Counter
	// the vectors, for the handles of reloaded rules
	runsVec, errorsVec, emptyVec *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, exporterRules, interfaceRules int) (*metrics, error) {
	runs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "flowzero", Subsystem: "enrich", Name: "classifier_runs_total",
		Help: "Exporters or interfaces classified by the rules (a miss or a refresh of the metadata cache), by kind.",
	}, []string{"kind"})
	errors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "flowzero", Subsystem: "enrich", Name: "classifier_errors_total",
		Help: "Classifier rules that failed at run time (the classification stops there), by kind and rule index.",
	}, []string{"kind", "rule"})
	empty := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "flowzero", Subsystem: "enrich", Name: "classifier_empty_expansions_total",
		Help: "Regex actions whose regular expression matched but whose template expanded to an empty value (a group that matched nothing): treated as no match, by kind and rule index.",
	}, []string{"kind", "rule"})
	m := (&metrics{runsVec: runs, errorsVec: errors, emptyVec: empty}).forRules(exporterRules, interfaceRules)
	if reg != nil {
		for _, c := range []prometheus.Collector{runs, errors, empty} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// forRules returns the handles for a set of rules, on the same vectors.
func (m *metrics) forRules(exporterRules, interfaceRules int) *metrics {
	n := &metrics{runsVec: m.runsVec, errorsVec: m.errorsVec, emptyVec: m.emptyVec}
	for k, count := range [kindCount]int{exporterRules, interfaceRules} {
		n.runs[k] = m.runsVec.WithLabelValues(kindNames[k])
		for i := range count {
			n.errors[k] = append(n.errors[k], m.errorsVec.WithLabelValues(kindNames[k], strconv.Itoa(i)))
			n.empty[k] = append(n.empty[k], m.emptyVec.WithLabelValues(kindNames[k], strconv.Itoa(i)))
		}
	}
	return n
}
