package config

import (
	"strings"
	"testing"
)

// FuzzDecode: any document, however malformed (YAML of any shape, anchors, aliases, values
// of the wrong kind at any depth, prefixes with host bits), is decoded or refused with an
// error naming the configuration, never a panic; a prefix accepted has no host bits.
func FuzzDecode(f *testing.F) {
	for _, doc := range []string{
		"items: [{name: a, wrokers: 3}]",
		"items:\n  - name: a\n  - {name: b, workers: 4, sub: {b: 0}}\nby-name:\n  x: {name: x}\n",
		"section: {port: 1, deep: {items: [{name: d}]}}\nplain: [{}]",
		"allow: [10.0.0.0/8, 192.0.2.1/24, 10.0.0.0/33]",
		"nets: {a: [x, y]}\naddr: 192.0.2.1\nwait: 5s\nmode: fast",
		"items: &a [{name: a}]\nsection: {deep: {items: *a}}",
		"items: {name: a}",
		"by-name: [1, 2]",
		"wait: forever\nmode: 3",
		"- a\n- b",
		"? [a]\n: b",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return // yaml.v3's aliases can expand a short document enormously
		}
		var d document
		err := Decode(data, &d)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "configuration: ") {
				t.Fatalf("%q: error %q does not say it is about the configuration", data, err)
			}
			return
		}
		for _, p := range d.Allow {
			if p.IsValid() && p.Masked() != p {
				t.Fatalf("%q: prefix %s with host bits accepted", data, p)
			}
		}
	})
}
