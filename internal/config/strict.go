package config

import (
	"encoding"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// ItemDefaults is implemented (with a pointer receiver) by the element type of a list, or
// the value type of a map, whose keys have defaults of their own: an item written without
// some of its keys gets them from SetDefaults, as a section gets its absent keys from
// DefaultConfiguration. Without it an absent key of an item is the type's zero value.
type ItemDefaults interface {
	SetDefaults()
}

var (
	itemDefaultsType = reflect.TypeFor[ItemDefaults]()
	prefixType       = reflect.TypeFor[netip.Prefix]()
	addrType         = reflect.TypeFor[netip.Addr]()
	addrPortType     = reflect.TypeFor[netip.AddrPort]()
)

// maxDepth bounds the walk (aliases can nest a document far deeper than it is written).
const maxDepth = 64

// check walks the YAML document along the type it decodes into, before it is decoded, so
// that every error names the full key of the value at fault with its line: an unknown key,
// a value of the wrong type, a value its type refuses (encoding.TextUnmarshaler), a prefix
// that does not parse or has host bits set. yaml.v3's own errors name neither the key (only
// the line, and not at all for a TextUnmarshaler's error) nor, under a custom unmarshaler,
// unknown keys.
func check(n *yaml.Node, t reflect.Type, key string) error {
	return checkNode(n, t, key, 0)
}

func checkNode(n *yaml.Node, t reflect.Type, key string, depth int) error {
	if depth > maxDepth {
		return &KeyError{Key: key, Line: n.Line, Err: fmt.Errorf("nested more than %d levels deep", maxDepth)}
	}
	for n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else if len(n.Content) == 0 {
			return nil
		} else {
			n = n.Content[0]
		}
		if n == nil {
			return nil
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // the zero value, as yaml.v3 decodes it
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case prefixType:
		return checkPrefix(n, key)
	case addrType, addrPortType:
		return checkLeaf(n, t, key)
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields, rest := structFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" {
				// A merge key: its mapping's keys are the struct's too.
				if err := checkNode(v, t, key, depth+1); err != nil {
					return err
				}
				continue
			}
			f, ok := fields[k.Value]
			if !ok {
				if rest {
					continue // an inline map takes any key
				}
				return &KeyError{Key: key, Line: k.Line, Err: fmt.Errorf("unknown key %q", k.Value)}
			}
			if err := checkNode(v, t.FieldByIndex(f).Type, join(key, k.Value), depth+1); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if err := checkLeaf(k, t.Key(), join(key, k.Value)); err != nil {
				return err
			}
			if err := checkNode(v, t.Elem(), join(key, k.Value), depth+1); err != nil {
				return err
			}
		}
		return nil
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, v := range n.Content {
			if err := checkNode(v, t.Elem(), fmt.Sprintf("%s[%d]", key, i), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return checkLeaf(n, t, key)
}

// checkLeaf decodes a value on its own, into a throw-away value of its type, and returns
// the error, if any, under key.
func checkLeaf(n *yaml.Node, t reflect.Type, key string) error {
	if t.Kind() == reflect.Interface {
		return nil
	}
	v := reflect.New(t)
	var err error
	if tu, ok := v.Interface().(encoding.TextUnmarshaler); ok && n.Kind == yaml.ScalarNode {
		// The type's own words, not yaml.v3's wrapping of them (which has no line).
		err = tu.UnmarshalText([]byte(n.Value))
	} else {
		err = n.Decode(v.Interface())
	}
	if err == nil {
		return nil
	}
	return &KeyError{Key: key, Line: n.Line, Err: fmt.Errorf("%s", yamlMessage(err))}
}

// checkPrefix reads a prefix as netip does, but says what is wrong in the configuration's
// terms, and refuses host bits: 10.0.0.1/24 is more often a typo for 10.0.0.1/32 or
// 10.0.0.0/24 than a wish to match the whole /24.
func checkPrefix(n *yaml.Node, key string) error {
	if n.Kind != yaml.ScalarNode {
		return &KeyError{Key: key, Line: n.Line, Err: fmt.Errorf("a prefix (address/length) is expected here")}
	}
	if _, err := ParsePrefix(n.Value); err != nil {
		return &KeyError{Key: key, Line: n.Line, Err: err}
	}
	return nil
}

// ParsePrefix parses a configured prefix (address/length), refusing one with host bits
// set; its errors quote the value and say what is wrong, without netip's function name.
func ParsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		// netip's error reads `netip.ParsePrefix("x"): reason`: keep the reason.
		reason := err.Error()
		if i := strings.LastIndex(reason, "): "); i >= 0 {
			reason = reason[i+3:]
		}
		return netip.Prefix{}, fmt.Errorf("%q is not a prefix (address/length): %s", s, reason)
	}
	if err := CheckHostBits(p); err != nil {
		return netip.Prefix{}, err
	}
	return p, nil
}

// CheckHostBits refuses a prefix with host bits set, saying both readings it may have
// meant. Validate methods call it for prefixes set in code rather than read from YAML.
func CheckHostBits(p netip.Prefix) error {
	if m := p.Masked(); m != p {
		return fmt.Errorf("%s has host bits set (%s or %s/%d?)", p, m, p.Addr(), p.Addr().BitLen())
	}
	return nil
}

// structFields maps the YAML keys of a struct, inline structs included, to their field
// index; rest tells whether an inline map takes the other keys.
func structFields(t reflect.Type) (fields map[string][]int, rest bool) {
	fields = map[string][]int{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			idx := append(append([]int(nil), index...), i)
			if strings.Contains(","+opts+",", ",inline,") {
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Map {
					rest = true
				} else if ft.Kind() == reflect.Struct {
					walk(ft, idx)
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			fields[name] = idx
		}
	}
	walk(t, nil)
	return fields, rest
}

func join(key, name string) string {
	if key == "" {
		return name
	}
	return key + "." + name
}

var linePrefix = regexp.MustCompile(`^line \d+: `)

// yamlMessage is yaml.v3's error without its "yaml: unmarshal errors:" header and line
// prefixes (the KeyError carries the line).
func yamlMessage(err error) string {
	var parts []string
	if te, ok := err.(*yaml.TypeError); ok {
		parts = te.Errors
	} else {
		parts = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	for i, p := range parts {
		parts[i] = linePrefix.ReplaceAllString(strings.TrimSpace(p), "")
	}
	return strings.Join(parts, "; ")
}

// applyItemDefaults gives the items of lists and maps whose type implements ItemDefaults
// the defaults of the keys they were written without. n is the document out was decoded
// from.
func applyItemDefaults(n *yaml.Node, v reflect.Value, depth int) {
	if depth > maxDepth || n == nil {
		return
	}
	for n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else if len(n.Content) == 0 {
			return
		} else {
			n = n.Content[0]
		}
		if n == nil {
			return
		}
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch {
	case v.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields, _ := structFields(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			if f, ok := fields[n.Content[i].Value]; ok {
				applyItemDefaults(n.Content[i+1], v.FieldByIndex(f), depth+1)
			}
		}
	case v.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			if i >= v.Len() {
				break
			}
			ev := v.Index(i)
			withItemDefaults(item, ev)
			applyItemDefaults(item, ev, depth+1)
		}
	case v.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := reflect.New(v.Type().Key())
			if n.Content[i].Decode(k.Interface()) != nil {
				continue
			}
			ev := v.MapIndex(k.Elem())
			if !ev.IsValid() {
				continue
			}
			cp := reflect.New(ev.Type()).Elem()
			cp.Set(ev)
			withItemDefaults(n.Content[i+1], cp)
			applyItemDefaults(n.Content[i+1], cp, depth+1)
			v.SetMapIndex(k.Elem(), cp)
		}
	}
}

// withItemDefaults sets the keys absent from n of an item v whose type implements
// ItemDefaults to their defaults.
func withItemDefaults(n *yaml.Node, v reflect.Value) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if v.Kind() != reflect.Struct || n.Kind != yaml.MappingNode || !reflect.PointerTo(v.Type()).Implements(itemDefaultsType) {
		return
	}
	def := reflect.New(v.Type())
	def.Interface().(ItemDefaults).SetDefaults()
	fillAbsent(n, v, def.Elem())
}

// fillAbsent copies into dst the fields of def whose keys n does not hold, recursing into
// sections that n holds in part.
func fillAbsent(n *yaml.Node, dst, def reflect.Value) {
	fields, _ := structFields(dst.Type())
	present := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		present[n.Content[i].Value] = n.Content[i+1]
	}
	for name, idx := range fields {
		fv := dst.FieldByIndex(idx)
		vn, ok := present[name]
		switch {
		case !ok:
			fv.Set(def.FieldByIndex(idx))
		case fv.Kind() == reflect.Struct && vn.Kind == yaml.MappingNode:
			fillAbsent(vn, fv, def.FieldByIndex(idx))
		}
	}
}
