package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Port int `yaml:"port"`
}

type outer struct {
	Name  string `yaml:"name"`
	Inner inner  `yaml:"inner"`
}

func (o *outer) Validate() error {
	if o.Inner.Port <= 0 || o.Inner.Port > 65535 {
		return Prefix("inner", Errorf("port", "must be in 1..65535, got %d", o.Inner.Port))
	}
	return nil
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name, doc, wantErr string
	}{
		{"empty keeps defaults", "", ""},
		{"override", "name: x\ninner:\n  port: 80\n", ""},
		{"unknown key named", "name: x\ninner:\n  prot: 80\n", `line 3: inner: unknown key "prot"`},
		{"wrong type", "inner:\n  port: abc\n", "cannot unmarshal"},
		{"validation names key", "inner:\n  port: 70000\n", "inner.port: must be in 1..65535"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := outer{Name: "default", Inner: inner{Port: 2055}}
			err := Decode([]byte(c.doc), &o)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, c.wantErr)
			}
		})
	}
	o := outer{Inner: inner{Port: 1}}
	if err := Decode([]byte("inner: {port: 0}"), &o); err == nil {
		t.Fatal("want error")
	} else {
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != "inner.port" {
			t.Fatalf("want KeyError inner.port, got %#v", err)
		}
	}
}

type item struct {
	Name    string `yaml:"name"`
	Workers int    `yaml:"workers"`
	Buffer  int    `yaml:"buffer"`
	Sub     struct {
		A int `yaml:"a"`
		B int `yaml:"b"`
	} `yaml:"sub"`
}

func (i *item) SetDefaults() { i.Workers, i.Buffer, i.Sub.A, i.Sub.B = 2, 8<<20, 1, 2 }

type plainItem struct {
	Workers int `yaml:"workers"`
}

type shared struct {
	Port int `yaml:"port"`
}

type document struct {
	Items   []item              `yaml:"items"`
	ByName  map[string]item     `yaml:"by-name"`
	Plain   []plainItem         `yaml:"plain"`
	Allow   []netip.Prefix      `yaml:"allow"`
	Nets    map[string][]string `yaml:"nets"`
	Addr    netip.Addr          `yaml:"addr"`
	Wait    time.Duration       `yaml:"wait"`
	Mode    mode                `yaml:"mode"`
	Section struct {
		shared `yaml:",inline"`
		Deep   struct {
			Items []item `yaml:"items"`
		} `yaml:"deep"`
	} `yaml:"section"`
}

type mode int

func (m *mode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "fast":
		*m = 1
	case "slow":
		*m = 2
	default:
		return fmt.Errorf("unknown mode %q (fast or slow)", b)
	}
	return nil
}

// TestDecodeNamesFullKey: every error of a document names the whole key of the value at
// fault and its line, however deep (list items, map values, inline sections), whether
// yaml.v3 or the value's own type refuses it.
func TestDecodeNamesFullKey(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"items: [{name: a, wrokers: 3}]", `line 1: items[0]: unknown key "wrokers"`},
		{"section:\n  deep:\n    items:\n      - name: a\n      - name: b\n        sub: {c: 1}\n", `line 6: section.deep.items[1].sub: unknown key "c"`},
		{"section: {port: x}", "line 1: section.port: cannot unmarshal !!str `x` into int"},
		{"by-name:\n  edge1: {workers: many}\n", "line 2: by-name.edge1.workers: cannot unmarshal !!str `many` into int"},
		{"allow: [10.0.0.0/8, 10.0.0.0/33]", `line 1: allow[1]: "10.0.0.0/33" is not a prefix (address/length): prefix length out of range`},
		{"allow: [10.0.0.1/24]", `line 1: allow[0]: 10.0.0.1/24 has host bits set (10.0.0.0/24 or 10.0.0.1/32?)`},
		{"allow: ['2001:db8::1/64']", `allow[0]: 2001:db8::1/64 has host bits set (2001:db8::/64 or 2001:db8::1/128?)`},
		{"allow: [{a: 1}]", `line 1: allow[0]: a prefix (address/length) is expected here`},
		{"addr: 10.0.0.300", `line 1: addr: ParseAddr("10.0.0.300")`},
		{"wait: 3 parsecs", "line 1: wait: cannot unmarshal !!str `3 parsecs` into time.Duration"},
		{"mode: medium", `line 1: mode: unknown mode "medium" (fast or slow)`},
		{"nets: {a: [x, [y]]}", "line 1: nets.a[1]: cannot unmarshal !!seq into string"},
		{"x: &a {b: 1}\n", `line 1: unknown key "x"`},
	} {
		var d document
		err := Decode([]byte(c.doc), &d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error containing %q", c.doc, err, c.want)
		}
		var ke *KeyError
		if err != nil && !errors.As(err, &ke) {
			t.Errorf("%q: %v is not a KeyError", c.doc, err)
		}
	}
	// Good values pass, anchors and aliases included.
	var d document
	doc := "base: &b {name: a}\n"
	if err := Decode([]byte(doc), &d); err == nil {
		t.Error("an unknown top-level key accepted")
	}
	doc = "items: [&b {name: a, workers: 3}, *b]\nallow: [10.0.0.0/8, '2001:db8::/32', 192.0.2.1/32]\nmode: fast\nwait: 1m\n"
	if err := Decode([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Items) != 2 || d.Items[1].Workers != 3 || len(d.Allow) != 3 || d.Mode != 1 || d.Wait != time.Minute {
		t.Errorf("decoded %+v", d)
	}
}

// TestDecodeItemDefaults: an item of a list or map whose type sets its own defaults gets
// them for the keys it was written without (nested sections key by key); others keep the
// zero value, and keys written keep what was written, zero included.
func TestDecodeItemDefaults(t *testing.T) {
	var d document
	doc := `
items:
  - name: a
  - name: b
    workers: 4
    sub: {b: 0}
  - {name: c, buffer: 0}
by-name:
  x: {name: x}
section:
  deep:
    items: [{name: d}]
plain: [{}]
`
	if err := Decode([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	want := []item{{Name: "a", Workers: 2, Buffer: 8 << 20}, {Name: "b", Workers: 4, Buffer: 8 << 20}, {Name: "c", Workers: 2}}
	want[0].Sub.A, want[0].Sub.B = 1, 2
	want[1].Sub.A, want[1].Sub.B = 1, 0
	want[2].Sub.A, want[2].Sub.B = 1, 2
	if len(d.Items) != 3 || d.Items[0] != want[0] || d.Items[1] != want[1] || d.Items[2] != want[2] {
		t.Errorf("items %+v, want %+v", d.Items, want)
	}
	if x := d.ByName["x"]; x.Workers != 2 || x.Buffer != 8<<20 || x.Sub.A != 1 {
		t.Errorf("map value %+v: defaults not applied", x)
	}
	if it := d.Section.Deep.Items; len(it) != 1 || it[0].Workers != 2 {
		t.Errorf("nested list %+v: defaults not applied", it)
	}
	if len(d.Plain) != 1 || d.Plain[0].Workers != 0 {
		t.Errorf("an item without defaults of its own: %+v", d.Plain)
	}
}
