package classifier

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/config"
)

func newClassifier(t *testing.T, cfg Configuration) (*Classifier, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := New(reg, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

func TestExporterRules(t *testing.T) {
	exporter := Exporter{IP: "192.0.2.1", Name: "th2-ncs55a1-1.example.fr"}
	for _, tc := range []struct {
		name   string
		rules  []string
		preset ExporterClassification
		want   ExporterClassification
	}{
		{name: "no rule", want: ExporterClassification{}},
		{name: "constant", rules: []string{`ClassifyRole("Edge")`}, want: ExporterClassification{Role: "edge"}},
		{name: "Classify is ClassifyGroup", rules: []string{`Classify("Europe West")`}, want: ExporterClassification{Group: "europewest"}},
		{
			name:  "regex on the name",
			rules: []string{`ClassifySiteRegex(Exporter.Name, "^([^-]+)-", "$1")`},
			want:  ExporterClassification{Site: "th2"},
		},
		{
			name: "first rule wins per attribute",
			rules: []string{
				`Exporter.Name endsWith ".fr" && ClassifyRegion("france")`,
				`ClassifyRegion("italy") && ClassifyTenant("acme")`,
			},
			want: ExporterClassification{Region: "france", Tenant: "acme"},
		},
		{
			name:  "regex without a match returns false",
			rules: []string{`ClassifySiteRegex(Exporter.Name, "^par", "paris") || ClassifySite("elsewhere")`},
			want:  ExporterClassification{Site: "elsewhere"},
		},
		{
			name:   "static values are kept",
			rules:  []string{`ClassifyGroup("rules") && ClassifyRole("rules")`},
			preset: ExporterClassification{Group: "static"},
			want:   ExporterClassification{Group: "static", Role: "rules"},
		},
		{
			name:  "on the address, with Format",
			rules: []string{`Exporter.IP startsWith "192.0.2." && ClassifyTenant(Format("t-%s", split(Exporter.IP, ".")[3]))`},
			want:  ExporterClassification{Tenant: "t-1"},
		},
		{
			name:  "reject",
			rules: []string{`Exporter.Name contains "ncs55" && Reject()`, `ClassifyRole("never")`},
			want:  ExporterClassification{Reject: true},
		},
		{
			name:  "all set: later rules skipped",
			rules: []string{`Classify("g") && ClassifyRole("r") && ClassifySite("s") && ClassifyRegion("x") && ClassifyTenant("t")`, `Reject()`},
			want:  ExporterClassification{Group: "g", Role: "r", Site: "s", Region: "x", Tenant: "t"},
		},
		{
			name:  "every regex variant",
			rules: []string{`ClassifyRegex(Exporter.Name, "^(th2)", "$1") && ClassifyGroupRegex(Exporter.Name, ".", "x") && ClassifyRoleRegex(Exporter.Name, "(ncs)", "${1}r") && ClassifyRegionRegex(Exporter.Name, "\\.([a-z]+)$", "$1") && ClassifyTenantRegex(Exporter.IP, "^(\\d+)", "n$1")`},
			want:  ExporterClassification{Group: "th2", Role: "ncsr", Region: "fr", Tenant: "n192"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newClassifier(t, Configuration{ExporterClassifiers: tc.rules})
			got := tc.preset
			c.ClassifyExporter(exporter, &got)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestInterfaceRules(t *testing.T) {
	exporter := Exporter{IP: "2001:db8::1", Name: "edge1.par1"}
	transit := Interface{Index: 10, Name: "et-0/0/1", Description: "Transit: Cogent 1-3834938493", Speed: 100000}
	akvorado := []string{
		`ClassifyConnectivityRegex(Interface.Description, "^(?i)(transit|pni|ppni|ix):? ", "$1") &&
ClassifyProviderRegex(Interface.Description, "^[^ ]+? ([^ ]+)", "$1") &&
ClassifyExternal()`,
		`ClassifyInternal()`,
	}
	for _, tc := range []struct {
		name   string
		rules  []string
		iface  Interface
		preset InterfaceClassification
		want   InterfaceClassification
	}{
		{
			name: "Akvorado's example, transit", rules: akvorado, iface: transit,
			want: InterfaceClassification{Connectivity: "transit", Provider: "cogent", Boundary: BoundaryExternal},
		},
		{
			name: "Akvorado's example, PNI", rules: akvorado,
			iface: Interface{Index: 11, Name: "et-0/0/2", Description: "PNI: Netflix (WL6-1190)"},
			want:  InterfaceClassification{Connectivity: "pni", Provider: "netflix", Boundary: BoundaryExternal},
		},
		{
			name: "Akvorado's example, core", rules: akvorado,
			iface: Interface{Index: 12, Name: "ae0", Description: "core: par2"},
			want:  InterfaceClassification{Boundary: BoundaryInternal},
		},
		{
			name:  "boundary: first wins",
			rules: []string{`ClassifyInternal()`, `ClassifyExternal()`}, iface: transit,
			want: InterfaceClassification{Boundary: BoundaryInternal},
		},
		{
			name:  "static values are kept",
			rules: akvorado, iface: transit,
			preset: InterfaceClassification{Provider: "level3", Name: "static-name"},
			want:   InterfaceClassification{Provider: "level3", Connectivity: "transit", Boundary: BoundaryExternal, Name: "static-name"},
		},
		{
			name:  "SetName with the VLAN",
			rules: []string{`Interface.VLAN > 0 && SetName(Format("%s.%d", Interface.Name, Interface.VLAN)) && SetDescription("Customer VLAN")`},
			iface: Interface{Index: 3, Name: "xe-0/0/3", VLAN: 44},
			want:  InterfaceClassification{Name: "xe-0/0/3.44", Description: "Customer VLAN"},
		},
		{
			name:  "speed and index",
			rules: []string{`Interface.Speed >= 100000 && Interface.Index == 10 && ClassifyConnectivity("100G")`},
			iface: transit,
			want:  InterfaceClassification{Connectivity: "100g"},
		},
		{
			name:  "exporter name",
			rules: []string{`Exporter.Name matches "^edge" && ClassifyProvider(Exporter.Name)`},
			iface: transit,
			want:  InterfaceClassification{Provider: "edge1.par1"},
		},
		{
			name:  "reject",
			rules: []string{`Interface.Name startsWith "et-" && Reject()`, `ClassifyInternal()`},
			iface: transit,
			want:  InterfaceClassification{Reject: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newClassifier(t, Configuration{InterfaceClassifiers: tc.rules})
			got := tc.preset
			c.ClassifyInterface(exporter, tc.iface, &got)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUsesVLAN(t *testing.T) {
	for _, tc := range []struct {
		rules []string
		want  bool
	}{
		{[]string{`ClassifyInternal()`}, false},
		{[]string{`ClassifyInternal()`, `Interface.VLAN == 3 && Reject()`}, true},
		{[]string{`Interface?.VLAN == 3`}, true},
		{[]string{`Interface.Name == "VLAN"`}, false},
	} {
		c, _ := newClassifier(t, Configuration{InterfaceClassifiers: tc.rules})
		if got := c.UsesVLAN(); got != tc.want {
			t.Errorf("%q: UsesVLAN() = %v", tc.rules, got)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{
			"exporter-classifiers:\n  - ClassifyRole(\"edge\")\n  - Exporter.Nam == \"x\"\n",
			`exporter-classifiers[1]: line 1, column 10: type classifier.Exporter has no field Nam`,
		},
		{
			"interface-classifiers:\n  - |\n    ClassifyExternal() &&\n      ClassifyProvider(3)\n",
			`interface-classifiers[0]: line 2, column 20: cannot use int as argument (type string) to call ClassifyProvider`,
		},
		{
			// An interface action in an exporter rule.
			"exporter-classifiers:\n  - ClassifyExternal()\n",
			`exporter-classifiers[0]: line 1, column 1: unknown name ClassifyExternal`,
		},
		{
			"interface-classifiers:\n  - Interface.Speed + 1\n",
			`interface-classifiers[0]: `,
		},
		{
			"interface-classifiers:\n  - ClassifyInternal()\n  - ClassifyProviderRegex(Interface.Description, \"^(transit\", \"$1\")\n",
			`interface-classifiers[1]: line 1, column 46: invalid regular expression "^(transit"`,
		},
		{"exporter-classifiers:\n  - \"\"\n", `exporter-classifiers[0]: line 1, column 1: unexpected token EOF`},
		// Template references that would expand to nothing whatever the input.
		{
			"interface-classifiers:\n  - ClassifyProviderRegex(Interface.Description, \"^Transit (\\\\w+)\", \"$2\")\n",
			`interface-classifiers[0]: line 1, column 65: template "$2": $2 refers to group 2, and the regular expression has 1`,
		},
		{
			"exporter-classifiers:\n  - ClassifySiteRegex(Exporter.Name, \"^(?P<city>[a-z]+)\", \"${site}\")\n",
			`exporter-classifiers[0]: line 1, column 55: template "${site}": ${site} refers to no group of the regular expression`,
		},
		{
			"interface-classifiers:\n  - ClassifyProviderRegex(Interface.Description, \"^Transit (\\\\w+)\", \"$1x\")\n",
			`template "$1x": $1x is read as the group named "1x", not as a group number; write ${1}x`,
		},
		{
			// Known at compile time even when the regular expression is built at run time.
			"interface-classifiers:\n  - ClassifyProviderRegex(Interface.Description, Interface.Name, \"as$01\")\n",
			`interface-classifiers[0]: line 1, column 62: template "as$01": $01 is read as the group named "01", not as a group number`,
		},
	} {
		var cfg Configuration
		err := config.Decode([]byte(tc.yaml), &cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// References that expand to something for some input are accepted: groups that exist, by
// number or name, "$$", a "$" not followed by a name, and ${N} followed by letters.
func TestTemplateReferences(t *testing.T) {
	for _, tpl := range []string{`$0`, `$1`, `${1}x`, `$city`, `${city}-$1`, `$$1x`, `US$`, `$-`, `${`, `transit`} {
		rule := `ClassifySiteRegex(Exporter.Name, "^(?P<city>[a-z]+)", "` + tpl + `")`
		if _, err := New(nil, Configuration{ExporterClassifiers: []string{rule}}, nil); err != nil {
			t.Errorf("template %q: %v", tpl, err)
		}
	}
	// With a regular expression built at run time, only what no group can satisfy is refused.
	for _, tpl := range []string{`$2`, `${site}`, `${1x}`} {
		rule := `ClassifySiteRegex(Exporter.Name, "^" + Exporter.IP, "` + tpl + `")`
		if _, err := New(nil, Configuration{ExporterClassifiers: []string{rule}}, nil); err != nil {
			t.Errorf("template %q with a computed regular expression: %v", tpl, err)
		}
	}
}

// A match whose template expands to nothing (an optional group that did not match, or a
// value normalize empties) sets nothing, counts, and is no match: the chain stops there.
func TestEmptyExpansion(t *testing.T) {
	c, reg := newClassifier(t, Configuration{InterfaceClassifiers: []string{
		`ClassifyProviderRegex(Interface.Description, "^Transit(?:: (\\S+))?", "$1") && ClassifyExternal()`,
		`ClassifyConnectivity("other")`,
	}})
	for _, tc := range []struct {
		description string
		want        InterfaceClassification
		empty       float64
	}{
		{"Transit: Cogent", InterfaceClassification{Provider: "cogent", Boundary: BoundaryExternal, Connectivity: "other"}, 0},
		{"Transit", InterfaceClassification{Connectivity: "other"}, 1},
		{"Transit: (*)", InterfaceClassification{Connectivity: "other"}, 2},
	} {
		var got InterfaceClassification
		c.ClassifyInterface(Exporter{IP: "192.0.2.1"}, Interface{Index: 1, Description: tc.description}, &got)
		if got != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.description, got, tc.want)
		}
		if n := testutil.ToFloat64(c.metrics.empty[kindInterface][0]); n != tc.empty {
			t.Errorf("%q: %v empty expansions counted, want %v", tc.description, n, tc.empty)
		}
	}
	if n := testutil.ToFloat64(c.metrics.errors[kindInterface][0]); n != 0 {
		t.Errorf("empty expansions counted as %v errors", n)
	}
	if n, err := testutil.GatherAndCount(reg, "flowzero_enrich_classifier_empty_expansions_total"); err != nil || n != 2 {
		t.Errorf("%d series of empty expansions (%v), want one per rule", n, err)
	}
}

// Rules that divide by zero, index past a slice, format wildly or loop long are refused at
// New or run without panicking.
func TestHostileRules(t *testing.T) {
	for _, rule := range []string{
		`Interface.Speed % 0 == 0 && ClassifyProvider("x")`,
		`1 % 0 == 0`,
		`Interface.Speed / 0 > 1 && ClassifyProvider("x")`,
		`int(Interface.Speed) % int(Interface.Index) == 0 && ClassifyProvider("x")`,
		`ClassifyProviderRegex(Interface.Description, Interface.Name, "$1")`,
		`ClassifyProviderRegex(Interface.Description, "(", "$1")`,
		`Interface.Name matches "(" `,
		`Interface.Name matches Interface.Description`,
		`ClassifyProvider(split(Interface.Name, "/")[5])`,
		`ClassifyProvider(Format("%d %s", Interface.Name))`,
		`ClassifyProvider(Interface.Name[10:2])`,
		`ClassifyProvider(string(nil))`,
		`nil`,
		`Interface.Index == 0 ? true : nil`,
		`ClassifyProvider(repeat("x", -1))`,
		`ClassifyProvider(Format("%v", Interface))`,
		`toJSON(Interface) != "" && ClassifyProvider("y")`,
		`ClassifyProviderRegex(Interface.Description, "a{1000}{1000}", "x")`,
		`ClassifyProviderRegex(Interface.Description, "^(x)", "$2${nope}$1x")`,
		`all(1..1000000000, {# > 0}) && ClassifyProvider("z")`,
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("rule %q: panic %v", rule, r)
				}
			}()
			c, err := New(nil, Configuration{InterfaceClassifiers: []string{rule}}, nil)
			if err != nil {
				return
			}
			c.ClassifyInterface(Exporter{IP: "192.0.2.1"}, Interface{Description: "x"}, &InterfaceClassification{})
		}()
	}
}

func TestRunError(t *testing.T) {
	// A regular expression built at run time that does not compile: counted, and the
	// classification stops at that rule.
	c, reg := newClassifier(t, Configuration{InterfaceClassifiers: []string{
		`ClassifyProvider("first")`,
		`ClassifyConnectivityRegex(Interface.Name, Interface.Name + "(", "$1")`,
		`ClassifyInternal()`,
	}})
	var got InterfaceClassification
	c.ClassifyInterface(Exporter{IP: "192.0.2.1"}, Interface{Name: "et-0"}, &got)
	if got != (InterfaceClassification{Provider: "first"}) {
		t.Errorf("got %+v", got)
	}
	if n := testutil.ToFloat64(c.metrics.errors[kindInterface][1]); n != 1 {
		t.Errorf("errors of rule 1: %v", n)
	}
	if n, err := testutil.GatherAndCount(reg, "flowzero_enrich_classifier_errors_total"); err != nil || n != 3 {
		t.Errorf("%d series of errors (%v), want one per rule", n, err)
	}
	// Computed regular expressions are cached.
	c.ClassifyInterface(Exporter{}, Interface{Name: "x"}, &InterfaceClassification{})
	c2, _ := newClassifier(t, Configuration{InterfaceClassifiers: []string{`ClassifyProviderRegex(Interface.Name, "^" + Interface.Description, "$0")`}})
	for range 3 {
		var cl InterfaceClassification
		c2.ClassifyInterface(Exporter{}, Interface{Name: "cogent-1", Description: "cog"}, &cl)
		if cl.Provider != "cog" {
			t.Fatalf("got %+v", cl)
		}
	}
	if len(c2.rules.computed) != 1 {
		t.Errorf("%d computed regexps cached", len(c2.rules.computed))
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"Cogent":              "cogent",
		"Level(3) Comms":      "level3comms",
		"de-cix_fra.1+2":      "de-cixfra.1+2",
		"Orange Business/OBS": "orangebusinessobs",
		"café":                "caf",
	} {
		if got := normalize(in); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCompile compiles arbitrary rules: an error, or a program that runs on an exporter and
// an interface without panicking.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`ClassifySiteRegex(Exporter.Name, "^([^-]+)-", "$1")`,
		`Exporter.Name endsWith ".it" && ClassifyRegion("italy")`,
		`ClassifyConnectivityRegex(Interface.Description, "^(?i)(transit|pni|ppni|ix):? ", "$1") && ClassifyExternal()`,
		`Interface.VLAN > 0 && SetName(Format("%s.%d", Interface.Name, Interface.VLAN))`,
		`Reject()`,
		`ClassifyProviderRegex(Interface.Name, Interface.Description, "$1")`,
		`ClassifySiteRegex(Exporter.Name, "^(?P<city>[a-z]+)(x)?", "${city}$2$$1x${")`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		for _, cfg := range []Configuration{{ExporterClassifiers: []string{src}}, {InterfaceClassifiers: []string{src}}} {
			c, err := New(nil, cfg, nil)
			if err != nil {
				continue
			}
			c.ClassifyExporter(Exporter{IP: "192.0.2.1", Name: "r1"}, &ExporterClassification{})
			c.ClassifyInterface(Exporter{IP: "192.0.2.1", Name: "r1"}, Interface{Index: 1, Name: "et-0/0/0", Description: "(", Speed: 10, VLAN: 2}, &InterfaceClassification{})
		}
	})
}
