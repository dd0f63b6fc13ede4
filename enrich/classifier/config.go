package classifier

import (
	"errors"
	"fmt"

	"github.com/expr-lang/expr/file"

	"flowzero/internal/config"
)

// Configuration holds the rules, as Akvorado's exporter-classifiers and
// interface-classifiers.
type Configuration struct {
	// ExporterClassifiers are expressions run in order on each exporter (Exporter.IP,
	// Exporter.Name) until its group, role, site, region and tenant are all set: the first
	// rule that sets an attribute wins. ClassifyGroup/Role/Site/Region/Tenant("value") set one
	// (Classify is ClassifyGroup), their Regex variants (input, regex, template) set the
	// expanded template when the regex matches, Reject() drops the exporter's flows and
	// Format("%s-%d", ...) builds strings. Values are lower-cased and keep only a-z, 0-9, ".",
	// "+" and "-". Static metadata (enrich.exporters) is applied first and wins. A template
	// naming a group its literal regex does not have ($2, ${site}), or written "$1x" (read as
	// the group "1x": write "${1}x"), is an error; a match whose template expands to an empty
	// value sets nothing and counts as no match.
	ExporterClassifiers []string `yaml:"exporter-classifiers"`
	// InterfaceClassifiers are expressions run in order on each interface (Exporter.IP,
	// Exporter.Name, Interface.Index, Interface.Name, Interface.Description, Interface.Speed in
	// Mbit/s, Interface.VLAN: SrcVlan for the input interface, DstVlan for the output one)
	// until its provider, connectivity and boundary are all set. ClassifyProvider,
	// ClassifyConnectivity (with Regex variants), ClassifyExternal(), ClassifyInternal(),
	// SetName, SetDescription, Reject() and Format as for exporters; the first rule that sets
	// an attribute wins, static metadata first.
	InterfaceClassifiers []string `yaml:"interface-classifiers"`
}

// DefaultConfiguration has no rules.
func DefaultConfiguration() Configuration { return Configuration{} }

// Enabled reports whether there is any rule.
func (c *Configuration) Enabled() bool {
	return len(c.ExporterClassifiers) > 0 || len(c.InterfaceClassifiers) > 0
}

// Validate compiles every rule; an error names the rule and the position in it.
func (c *Configuration) Validate() error {
	_, err := compile(c)
	return err
}

// keyError turns a compilation error into a configuration error naming the rule and, for the
// parser's and type checker's errors, the line and column in it.
func keyError(key string, i int, err error) error {
	k := fmt.Sprintf("%s[%d]", key, i)
	var fe *file.Error
	if errors.As(err, &fe) {
		return config.Errorf(k, "line %d, column %d: %s", fe.Line, fe.Column+1, fe.Message)
	}
	return config.Errorf(k, "%v", err)
}
