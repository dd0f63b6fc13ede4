// Package confdoc generates the configuration reference (docs/configuration.md) from the
// configuration structs themselves: every YAML key, its default (read from the value returned
// by the DefaultConfiguration functions) and its description (the Go doc comment of the
// field). A test compares the committed file with a fresh generation, so the reference can
// never drift from the code.
package confdoc

import (
	"encoding"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"net/netip"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Entry is one documented key.
type Entry struct {
	Key         string
	Type        string
	Default     string
	Description string
}

// Generate walks v (a configuration struct holding its defaults) and returns one entry per
// leaf key. root is the repository root, where the source of the structs' packages is read
// for their doc comments; modulePath is the module prefix of package paths.
func Generate(v any, root, modulePath string) ([]Entry, error) {
	g := &generator{root: root, module: modulePath, comments: map[string]map[string]string{}}
	if err := g.walk("", reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	return g.entries, nil
}

type generator struct {
	root, module string
	inList       int                          // > 0 while walking the element type of a list: no defaults there
	comments     map[string]map[string]string // package path → "Type.Field" → comment
	entries      []Entry
}

func (g *generator) comment(t reflect.Type, field string) string {
	pkg := t.PkgPath()
	m, ok := g.comments[pkg]
	if !ok {
		m = map[string]string{}
		g.comments[pkg] = m
		if strings.HasPrefix(pkg, g.module) {
			dir := filepath.Join(g.root, strings.TrimPrefix(strings.TrimPrefix(pkg, g.module), "/"))
			for _, f := range parsePackage(dir) {
				collectComments(f, m)
			}
		}
	}
	return m[t.Name()+"."+field]
}

// parsePackage parses, with their comments, the non-test Go files of the package in dir that
// the default build context selects (go/build applies the build constraints, which
// parser.ParseDir ignored). A package that cannot be read yields no files: its keys then have
// no description, which the reference test shows.
func parsePackage(dir string) []*ast.File {
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range append(bp.GoFiles, bp.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err == nil {
			files = append(files, f)
		}
	}
	return files
}

func collectComments(f *ast.File, m map[string]string) {
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		for _, fl := range st.Fields.List {
			text := ""
			if fl.Doc != nil {
				text = fl.Doc.Text()
			} else if fl.Comment != nil {
				text = fl.Comment.Text()
			}
			text = strings.Join(strings.Fields(text), " ")
			for _, name := range fl.Names {
				m[ts.Name.Name+"."+name.Name] = text
			}
			if len(fl.Names) == 0 { // embedded
				if id, ok := fl.Type.(*ast.SelectorExpr); ok {
					m[ts.Name.Name+"."+id.Sel.Name] = text
				}
			}
		}
		return false
	})
}

var (
	durationType        = reflect.TypeOf(time.Duration(0))
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	leafTypes           = map[reflect.Type]bool{
		durationType:                       true,
		reflect.TypeOf(netip.Addr{}):       true,
		reflect.TypeOf(netip.Prefix{}):     true,
		reflect.TypeOf(netip.AddrPort{}):   true,
		reflect.TypeOf(time.Time{}):        true,
		reflect.TypeOf([]netip.Prefix{}):   true,
		reflect.TypeOf([]string{}):         true,
		reflect.TypeOf([]netip.AddrPort{}): true,
	}
)

func (g *generator) walk(prefix string, v reflect.Value) error {
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			v = reflect.New(t.Elem())
		}
		return g.walk(prefix, v.Elem())
	}
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("%s: not a struct", prefix)
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		fv := v.Field(i)
		if strings.Contains(opts, "inline") {
			if err := g.walk(prefix, fv); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		desc := g.comment(t, f.Name)
		ft := f.Type
		switch {
		case leafTypes[ft]:
			g.entries = append(g.entries, Entry{key, typeName(ft), g.format(fv), desc})
		case ft.Kind() == reflect.Struct:
			if desc != "" {
				g.entries = append(g.entries, Entry{key, "section", "", desc})
			}
			if err := g.walk(key, fv); err != nil {
				return err
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			g.entries = append(g.entries, Entry{key, "list", g.format(fv), desc})
			if err := g.walkItem(key+"[]", ft.Elem()); err != nil {
				return err
			}
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			// Like a list: the element's keys are documented under "<key>".
			g.entries = append(g.entries, Entry{key, typeName(ft), g.format(fv), desc})
			if err := g.walkItem(key+".<key>", ft.Elem()); err != nil {
				return err
			}
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			g.entries = append(g.entries, Entry{key, "section (optional)", "", desc})
			g.inList++
			err := g.walk(key, reflect.New(ft.Elem()).Elem())
			g.inList--
			if err != nil {
				return err
			}
		case ft.Kind() == reflect.Map:
			g.entries = append(g.entries, Entry{key, typeName(ft), g.format(fv), desc})
		default:
			g.entries = append(g.entries, Entry{key, typeName(ft), g.format(fv), desc})
		}
	}
	return nil
}

// itemDefaults is config.ItemDefaults: a list item type whose keys have defaults of their
// own.
type itemDefaults interface{ SetDefaults() }

// walkItem documents the keys of a list item or map value of type t: without defaults,
// unless t sets its own (itemDefaults), in which case the keys it gives a value show it.
func (g *generator) walkItem(key string, t reflect.Type) error {
	v := reflect.New(t)
	d, ok := v.Interface().(itemDefaults)
	if !ok {
		g.inList++
		defer func() { g.inList-- }()
		return g.walk(key, v.Elem())
	}
	d.SetDefaults()
	start := len(g.entries)
	saved := g.inList
	g.inList = 0
	err := g.walk(key, v.Elem())
	g.inList = saved
	zero := reflect.New(t).Elem()
	// A key without a default of its own shows none, as in any list item.
	for i := start; i < len(g.entries); i++ {
		if g.entries[i].Default == format(zeroField(zero, strings.TrimPrefix(g.entries[i].Key, key+"."))) {
			g.entries[i].Default = ""
		}
	}
	return err
}

// zeroField returns the field of the zero struct v named by a dotted YAML key path (v
// itself when it cannot be found).
func zeroField(v reflect.Value, path string) reflect.Value {
	for name := range strings.SplitSeq(path, ".") {
		if v.Kind() != reflect.Struct {
			return v
		}
		found := false
		for i := range v.NumField() {
			f := v.Type().Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" {
				tag = strings.ToLower(f.Name)
			}
			if tag == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return v
		}
	}
	return v
}

func typeName(t reflect.Type) string {
	switch t {
	case durationType:
		return "duration"
	case reflect.TypeOf(netip.Addr{}):
		return "IP address"
	case reflect.TypeOf(netip.Prefix{}):
		return "prefix"
	case reflect.TypeOf(netip.AddrPort{}):
		return "address:port"
	}
	// A number or a list written as text (a protocol name): what the YAML holds is a string.
	if k := t.Kind(); k != reflect.Struct && k != reflect.String && reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return "string"
	}
	switch t.Kind() {
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "map of " + typeName(t.Key()) + " to " + typeName(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "unsigned integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Struct:
		return "object"
	}
	return t.String()
}

func (g *generator) format(v reflect.Value) string {
	if g.inList > 0 {
		return ""
	}
	return format(v)
}

// format renders a default value in YAML flow style.
func format(v reflect.Value) string {
	if v.Type() == durationType {
		if v.Int() == 0 {
			return "0"
		}
		return time.Duration(v.Int()).String()
	}
	if s, ok := v.Interface().(fmt.Stringer); ok && v.Kind() == reflect.Struct {
		str := s.String()
		if str == "invalid IP" || str == "invalid Prefix" || str == "invalid AddrPort" {
			return ""
		}
		return str
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return `""`
		}
		return v.String()
	case reflect.Slice:
		if v.Len() == 0 {
			return "[]"
		}
		var parts []string
		for i := 0; i < v.Len(); i++ {
			parts = append(parts, format(v.Index(i)))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		if v.Len() == 0 {
			return "{}"
		}
		var parts []string
		for _, k := range v.MapKeys() {
			parts = append(parts, fmt.Sprintf("%v: %s", k.Interface(), format(v.MapIndex(k))))
		}
		sort.Strings(parts)
		return "{" + strings.Join(parts, ", ") + "}"
	case reflect.Struct:
		var parts []string
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if v.Field(i).IsZero() {
				continue
			}
			parts = append(parts, name+": "+format(v.Field(i)))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case reflect.Pointer:
		if v.IsNil() {
			return "null"
		}
		return format(v.Elem())
	}
	return fmt.Sprint(v.Interface())
}

// Markdown renders entries as a reference page, one table per top-level section.
func Markdown(title, intro string, entries []Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n%s\n", title, intro)
	section := ""
	for _, e := range entries {
		top, _, _ := strings.Cut(e.Key, ".")
		if top != section {
			section = top
			fmt.Fprintf(&b, "\n## `%s`\n\n| key | type | default | description |\n|---|---|---|---|\n", section)
		}
		if e.Type == "section" && !strings.Contains(e.Key, ".") {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", e.Key, e.Type, cell(e.Default), strings.ReplaceAll(e.Description, "|", "\\|"))
	}
	return b.String()
}

func cell(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", "\\|") + "`"
}
