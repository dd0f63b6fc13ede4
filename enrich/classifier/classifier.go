// Package classifier classifies exporters and their interfaces with rules written as
// expressions (github.com/expr-lang/expr), with the names and semantics of Akvorado's
// exporter-classifiers and interface-classifiers, so that users can bring their rules over.
//
// An exporter rule reads Exporter.IP and Exporter.Name and sets the exporter's group, role,
// site, region and tenant (ClassifyGroup("europe"), ClassifySiteRegex(Exporter.Name,
// "^([a-z]+)[0-9]-", "$1")...), or rejects its flows (Reject()). An interface rule also reads
// Interface.Index, Name, Description, Speed and VLAN and sets the interface's provider,
// connectivity and boundary (ClassifyProvider, ClassifyConnectivity, ClassifyExternal,
// ClassifyInternal), renames it (SetName, SetDescription) or rejects the flows through it.
// Rules run in order until every attribute is set; the first rule that sets an attribute
// wins, and an attribute set before the rules run (static metadata) is never changed.
//
// # Design
//
// Rules are compiled once (Compile, at configuration time: a bad rule is an error naming
// its index, line and column, and so is a literal regular expression that does not compile)
// and run through expr's virtual machine. Running them allocates and takes microseconds, so
// the caller runs them once per exporter and interface and caches the result (enrich's
// MetadataCache encodes it into schema fragments); nothing here is on the per-flow path.
//
// The actions are methods of the environment an expression runs in, which holds a pointer to
// the classification being built: no global state, and a rule cannot touch anything else.
package classifier

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/lograte"
)

// Exporter is what rules know about an exporter.
type Exporter struct {
	// IP is the exporter's address as text, IPv4 unmapped ("192.0.2.1").
	IP string
	// Name is the exporter's name: from static metadata, else its SNMP sysName.
	Name string
}

// Interface is what interface rules know about an interface.
type Interface struct {
	// Index is the SNMP ifIndex the flow carries (InIf or OutIf).
	Index uint32
	// Name is the interface's name: from static metadata, else its SNMP ifName.
	Name string
	// Description is the interface's description: from static metadata, else its SNMP ifAlias.
	Description string
	// Speed is the interface's speed in Mbit/s (ifHighSpeed).
	Speed uint32
	// VLAN is the flow's SrcVlan for its input interface, DstVlan for its output interface.
	VLAN uint16
}

// ExporterClassification is what exporter rules set. Empty strings are unset.
type ExporterClassification struct {
	Group, Role, Site, Region, Tenant string
	// Reject drops the exporter's flows.
	Reject bool
}

func (c *ExporterClassification) complete() bool {
	return c.Group != "" && c.Role != "" && c.Site != "" && c.Region != "" && c.Tenant != ""
}

// Boundary is an interface's boundary, numbered as schema's InIfBoundary values.
type Boundary uint8

// Boundaries.
const (
	BoundaryUndefined Boundary = iota
	BoundaryExternal
	BoundaryInternal
)

// InterfaceClassification is what interface rules set. Empty strings are unset.
type InterfaceClassification struct {
	Provider, Connectivity string
	Boundary               Boundary
	// Name and Description replace the interface's when set (SetName, SetDescription).
	Name, Description string
	// Reject drops the flows through the interface.
	Reject bool
}

func (c *InterfaceClassification) complete() bool {
	return c.Provider != "" && c.Connectivity != "" && c.Boundary != BoundaryUndefined
}

// rules are compiled programs and the literal regular expressions they use.
type rules struct {
	exporter, iface []*vm.Program
	// literal holds the regular expressions written as string literals in Regex calls,
	// compiled with the rules; it is read-only afterwards.
	literal map[string]*regexp.Regexp
	// computed caches the others (built by the expression at run time), bounded.
	computedMu sync.Mutex
	computed   map[string]*regexp.Regexp
	usesVLAN   bool
}

// maxComputedRegexps bounds the cache of regular expressions built at run time.
const maxComputedRegexps = 1000

// compile compiles every rule of c.
func compile(c *Configuration) (*rules, error) {
	r := &rules{literal: map[string]*regexp.Regexp{}, computed: map[string]*regexp.Regexp{}}
	for i, src := range c.ExporterClassifiers {
		p, err := expr.Compile(src, expr.Env(&exporterEnv{}), expr.AsBool())
		if err == nil {
			err = r.inspect(p)
		}
		if err != nil {
			return nil, keyError("exporter-classifiers", i, err)
		}
		r.exporter = append(r.exporter, p)
	}
	for i, src := range c.InterfaceClassifiers {
		p, err := expr.Compile(src, expr.Env(&interfaceEnv{}), expr.AsBool())
		if err == nil {
			err = r.inspect(p)
		}
		if err != nil {
			return nil, keyError("interface-classifiers", i, err)
		}
		r.iface = append(r.iface, p)
	}
	return r, nil
}

// inspect compiles the literal regular expressions of p's Regex calls and notes whether it
// reads a VLAN.
func (r *rules) inspect(p *vm.Program) error {
	v := &inspector{r: r}
	n := p.Node()
	ast.Walk(&n, v)
	if v.err != nil {
		return v.err.Bind(p.Source())
	}
	return nil
}

type inspector struct {
	r   *rules
	err *file.Error
}

func (v *inspector) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.MemberNode:
		if p, ok := n.Property.(*ast.StringNode); ok && p.Value == "VLAN" {
			v.r.usesVLAN = true
		}
	case *ast.CallNode:
		callee, ok := n.Callee.(*ast.IdentifierNode)
		if !ok || len(n.Arguments) != 3 || len(callee.Value) <= len("Regex") || callee.Value[len(callee.Value)-len("Regex"):] != "Regex" {
			return
		}
		var re *regexp.Regexp
		if lit, ok := n.Arguments[1].(*ast.StringNode); ok {
			var err error
			if re, err = regexp.Compile(lit.Value); err != nil {
				if v.err == nil {
					v.err = &file.Error{Location: lit.Location(), Message: fmt.Sprintf("invalid regular expression %q: %v", lit.Value, err)}
				}
				return
			}
			v.r.literal[lit.Value] = re
		}
		if tpl, ok := n.Arguments[2].(*ast.StringNode); ok {
			if err := checkTemplate(re, tpl.Value); err != nil && v.err == nil {
				v.err = &file.Error{Location: tpl.Location(), Message: fmt.Sprintf("template %q: %v", tpl.Value, err)}
			}
		}
	}
}

// checkTemplate reads a template's references as regexp.Expand does and reports one that
// would expand to nothing whatever the input: a group re (nil: not known until run time)
// does not have, or "$1x", which Go reads as the group named "1x".
func checkTemplate(re *regexp.Regexp, tpl string) error {
	for {
		i := strings.IndexByte(tpl, '$')
		if i < 0 {
			return nil
		}
		tpl = tpl[i+1:]
		if strings.HasPrefix(tpl, "$") {
			tpl = tpl[1:] // "$$" is a "$"
			continue
		}
		braced := strings.HasPrefix(tpl, "{")
		rest := strings.TrimPrefix(tpl, "{")
		end := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' })
		if end < 0 {
			end = len(rest)
		}
		name := rest[:end]
		if name == "" || (braced && !strings.HasPrefix(rest[end:], "}")) {
			continue // not a reference: Expand writes the "$" as is
		}
		tpl = rest[end:]
		num, err := strconv.Atoi(name)
		isNum := err == nil && (name == "0" || name[0] != '0') // Expand reads "01" as a name
		switch {
		case isNum:
			if re != nil && num > re.NumSubexp() {
				return fmt.Errorf("$%s refers to group %d, and the regular expression has %d", name, num, re.NumSubexp())
			}
		case re != nil && re.SubexpIndex(name) >= 0:
		case !braced && name[0] >= '0' && name[0] <= '9':
			msg := fmt.Sprintf("$%s is read as the group named %q, not as a group number", name, name)
			if d := strings.IndexFunc(name, func(r rune) bool { return r < '0' || r > '9' }); d > 0 {
				msg += fmt.Sprintf("; write ${%s}%s", name[:d], name[d:])
			}
			return errors.New(msg)
		case re != nil:
			return fmt.Errorf("${%s} refers to no group of the regular expression", name)
		}
	}
}

// regexp returns the compiled regular expression s.
func (r *rules) regexp(s string) (*regexp.Regexp, error) {
	if re, ok := r.literal[s]; ok {
		return re, nil
	}
	r.computedMu.Lock()
	defer r.computedMu.Unlock()
	if re, ok := r.computed[s]; ok {
		return re, nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %w", s, err)
	}
	if len(r.computed) >= maxComputedRegexps {
		clear(r.computed)
	}
	r.computed[s] = re
	return re, nil
}

// classify sets *dst to the normalized value when it is unset.
func classify(dst *string, value string) bool {
	if *dst == "" {
		*dst = normalize(value)
	}
	return true
}

// classifyRegex reports whether regex matches input and, when it does and *dst is unset,
// sets it to the normalized template expanded with the match ($1, ${name}). A match whose
// expansion is empty (a group that matched nothing) sets nothing and is no match: it is
// counted in *empty, so that the chain it is in stops rather than going on as if it had
// classified.
func (r *rules) classifyRegex(empty *int, dst *string, input, regex, template string) (bool, error) {
	re, err := r.regexp(regex)
	if err != nil {
		return false, err
	}
	m := re.FindStringSubmatchIndex(input)
	if m == nil {
		return false, nil
	}
	if *dst == "" {
		v := normalize(string(re.ExpandString(nil, template, input, m)))
		if v == "" {
			*empty++
			return false, nil
		}
		*dst = v
	}
	return true, nil
}

// normalize lower-cases s and keeps a-z, 0-9, ".", "+" and "-", as Akvorado does, so that
// values are easy to filter on.
func normalize(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '.' || c == '+' || c == '-' {
			out = append(out, c)
		}
	}
	return string(out)
}

// Classifier runs compiled rules. It is safe for concurrent use.
type Classifier struct {
	rules   *rules
	metrics *metrics
	log     *slog.Logger
	logRate *lograte.Limiter
}

// New compiles the rules of cfg. Metrics go to reg (nil: not registered).
func New(reg prometheus.Registerer, cfg Configuration, logger *slog.Logger) (*Classifier, error) {
	r, err := compile(&cfg)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(reg, len(r.exporter), len(r.iface))
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Classifier{rules: r, metrics: m, log: logger, logRate: lograte.New(3, 30*time.Second)}, nil
}

// Reload compiles the rules of cfg into a new Classifier reporting to the same metrics and
// logger; c is unchanged. An error names the rule that does not compile and the position in
// it, as New's.
func (c *Classifier) Reload(cfg Configuration) (*Classifier, error) {
	r, err := compile(&cfg)
	if err != nil {
		return nil, err
	}
	return &Classifier{rules: r, metrics: c.metrics.forRules(len(r.exporter), len(r.iface)), log: c.log,
		logRate: c.logRate}, nil
}

// HasExporterRules reports whether there is any exporter rule.
func (c *Classifier) HasExporterRules() bool { return len(c.rules.exporter) > 0 }

// HasInterfaceRules reports whether there is any interface rule.
func (c *Classifier) HasInterfaceRules() bool { return len(c.rules.iface) > 0 }

// UsesVLAN reports whether an interface rule reads Interface.VLAN: the classification of an
// interface then depends on the flow's VLAN, and results must be cached per VLAN.
func (c *Classifier) UsesVLAN() bool { return c.rules.usesVLAN }

// ClassifyExporter runs the exporter rules on e, completing cl: attributes already set are
// kept. A rule that fails at run time (a regular expression built by the rule that does not
// compile) stops the classification, is counted and logged.
func (c *Classifier) ClassifyExporter(e Exporter, cl *ExporterClassification) {
	if len(c.rules.exporter) == 0 {
		return
	}
	c.metrics.runs[kindExporter].Inc()
	env := &exporterEnv{Exporter: e, cl: cl, r: c.rules}
	for i, p := range c.rules.exporter {
		if cl.Reject || cl.complete() {
			return
		}
		_, err := expr.Run(p, env)
		c.countEmpty(kindExporter, i, &env.empty)
		if err != nil {
			c.failed(kindExporter, i, err, "exporter", e.IP)
			return
		}
	}
}

// ClassifyInterface runs the interface rules on interface i of exporter e, completing cl as
// ClassifyExporter does.
func (c *Classifier) ClassifyInterface(e Exporter, i Interface, cl *InterfaceClassification) {
	if len(c.rules.iface) == 0 {
		return
	}
	c.metrics.runs[kindInterface].Inc()
	env := &interfaceEnv{Exporter: e, Interface: i, cl: cl, r: c.rules}
	for n, p := range c.rules.iface {
		if cl.Reject || cl.complete() {
			return
		}
		_, err := expr.Run(p, env)
		c.countEmpty(kindInterface, n, &env.empty)
		if err != nil {
			c.failed(kindInterface, n, err, "exporter", e.IP, "interface", i.Index)
			return
		}
	}
}

// countEmpty counts the empty expansions of a rule's run and resets *n.
func (c *Classifier) countEmpty(kind, rule int, n *int) {
	if *n > 0 {
		c.metrics.empty[kind][rule].Add(float64(*n))
		*n = 0
	}
}

func (c *Classifier) failed(kind, rule int, err error, attrs ...any) {
	c.metrics.errors[kind][rule].Inc()
	var fe *file.Error
	if errors.As(err, &fe) {
		err = errors.New(fe.Message) // without the snippet: one line in the logs
	}
	if ok, suppressed := c.logRate.Allow(time.Now()); ok {
		c.log.Warn("classifier rule failed", append(attrs, "rule", kindKeys[kind]+"["+strconv.Itoa(rule)+"]",
			"error", err, "suppressed", suppressed)...)
	}
}

// exporterEnv is what an exporter rule runs in: its exported fields and methods are the
// rule's names.
type exporterEnv struct {
	Exporter Exporter
	cl       *ExporterClassification
	r        *rules
	empty    int // Regex actions whose expansion was empty
}

// Classify is ClassifyGroup (Akvorado's first name for it).
func (e *exporterEnv) Classify(v string) bool { return classify(&e.cl.Group, v) }

// ClassifyGroup sets the exporter's group.
func (e *exporterEnv) ClassifyGroup(v string) bool { return classify(&e.cl.Group, v) }

// ClassifyRole sets the exporter's role.
func (e *exporterEnv) ClassifyRole(v string) bool { return classify(&e.cl.Role, v) }

// ClassifySite sets the exporter's site.
func (e *exporterEnv) ClassifySite(v string) bool { return classify(&e.cl.Site, v) }

// ClassifyRegion sets the exporter's region.
func (e *exporterEnv) ClassifyRegion(v string) bool { return classify(&e.cl.Region, v) }

// ClassifyTenant sets the exporter's tenant.
func (e *exporterEnv) ClassifyTenant(v string) bool { return classify(&e.cl.Tenant, v) }

// ClassifyRegex is ClassifyGroupRegex.
func (e *exporterEnv) ClassifyRegex(in, re, tpl string) (bool, error) {
	return e.r.classifyRegex(&e.empty, &e.cl.Group, in, re, tpl)
}

// ClassifyGroupRegex sets the group from a regular expression's match.
func (e *exporterEnv) ClassifyGroupRegex(in, re, tpl string) (bool, error) {
	return e.r.classifyRegex(&e.empty, &e.cl.Group, in, re, tpl)
}

// ClassifyRoleRegex sets the role from a regular expression's match.
func (e *exporterEnv) ClassifyRoleRegex(in, re, tpl string) (bool, error) {
	return e.r.classifyRegex(&e.empty, &e.cl.Role, in, re, tpl)
}

// ClassifySiteRegex sets the site from a regular expression's match.
func (e *exporterEnv) ClassifySiteRegex(in, re, tpl string) (bool, error) {
	return e.r.classifyRegex(&e.empty, &e.cl.Site, in, re, tpl)
}

// ClassifyRegionRegex sets the region from a regular expression's match.
func (e *exporterEnv) ClassifyRegionRegex(in, re, tpl string) (bool, error) {
	return e.r.classifyRegex(&e.empty, &e.cl.Region, in, re, tpl)
}

// ClassifyTenantRegex sets the tenant from a regular expression's match.
func (e *exporterEnv) ClassifyTenantRegex(in, re, tpl string) (bool, error) {
	return e.r.classifyRegex(&e.empty, &e.cl.Tenant, in, re, tpl)
}

// Reject drops the exporter's flows; it returns false so that nothing after it in a chain
// of && runs.
func (e *exporterEnv) Reject() bool {
	e.cl.Reject = true
	return false
}

// Format is fmt.Sprintf.
func (e *exporterEnv) Format(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// interfaceEnv is what an interface rule runs in.
type interfaceEnv struct {
	Exporter  Exporter
	Interface Interface
	cl        *InterfaceClassification
	r         *rules
	empty     int // Regex actions whose expansion was empty
}

// ClassifyProvider sets the interface's provider.
func (e *interfaceEnv) ClassifyProvider(v string) bool { return classify(&e.cl.Provider, v) }

// ClassifyConnectivity sets the interface's connectivity.
func (e *interfaceEnv) ClassifyConnectivity(v string) bool {
	return classify(&e.cl.Connectivity, v)
}

// ClassifyProviderRegex sets the provider from a regular expression's match.
func (e *interfaceEnv) ClassifyProviderRegex(in, re, tpl string) (bool, error) {
	return e.r.classifyRegex(&e.empty, &e.cl.Provider, in, re, tpl)
}

// ClassifyConnectivityRegex sets the connectivity from a regular expression's match.
func (e *interfaceEnv) ClassifyConnectivityRegex(in, re, tpl string) (bool, error) {
	return e.r.classifyRegex(&e.empty, &e.cl.Connectivity, in, re, tpl)
}

// ClassifyExternal sets the boundary to external.
func (e *interfaceEnv) ClassifyExternal() bool {
	if e.cl.Boundary == BoundaryUndefined {
		e.cl.Boundary = BoundaryExternal
	}
	return true
}

// ClassifyInternal sets the boundary to internal.
func (e *interfaceEnv) ClassifyInternal() bool {
	if e.cl.Boundary == BoundaryUndefined {
		e.cl.Boundary = BoundaryInternal
	}
	return true
}

// SetName replaces the interface's name (as is, not normalized).
func (e *interfaceEnv) SetName(v string) bool {
	if e.cl.Name == "" {
		e.cl.Name = v
	}
	return true
}

// SetDescription replaces the interface's description (as is, not normalized).
func (e *interfaceEnv) SetDescription(v string) bool {
	if e.cl.Description == "" {
		e.cl.Description = v
	}
	return true
}

// Reject drops the flows through the interface; it returns false.
func (e *interfaceEnv) Reject() bool {
	e.cl.Reject = true
	return false
}

// Format is fmt.Sprintf.
func (e *interfaceEnv) Format(format string, args ...any) string {
	return fmt.Sprintf(format, args...)
}
