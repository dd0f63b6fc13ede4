// Package config decodes flowzero's YAML configuration strictly: an unknown key, a value of the
// wrong type or a failed validation is an error that names the key, so that a typo in a file
// deployed for months is caught at startup rather than silently ignored.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// Validator is implemented by configuration structs that check their own values. Errors should
// be built with KeyError so that the message names the bad key.
type Validator interface {
	Validate() error
}

// KeyError is a configuration error attached to a dotted key path (for example
// "collector.listeners[0].address"), and to its line in the file when known.
type KeyError struct {
	Key string
	// Line is the line of the value in the YAML document (0 when the error comes from
	// Validate, which sees values, not lines).
	Line int
	Err  error
}

func (e *KeyError) Error() string {
	switch {
	case e.Line > 0 && e.Key == "":
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s: %v", e.Line, e.Key, e.Err)
	}
	return e.Key + ": " + e.Err.Error()
}
func (e *KeyError) Unwrap() error { return e.Err }

// Errorf returns a *KeyError for key.
func Errorf(key, format string, args ...any) error {
	return &KeyError{Key: key, Err: fmt.Errorf(format, args...)}
}

// Prefix prepends prefix to the key of a *KeyError (or wraps a plain error under prefix), so a
// parent configuration can report "collector.kafka.brokers" for an error its child reported as
// "brokers".
func Prefix(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var ke *KeyError
	if errors.As(err, &ke) {
		return &KeyError{Key: join(prefix, ke.Key), Line: ke.Line, Err: ke.Err}
	}
	return &KeyError{Key: prefix, Err: err}
}

// Decode decodes YAML into out, which should already hold the defaults: keys absent from the
// document keep their default, and so do the keys absent from an item of a list or map whose
// type implements ItemDefaults. Unknown keys are errors. Every error of the document names
// the full key and the line (see check). An empty document is valid. When out implements
// Validator, Validate is called after decoding.
func Decode(data []byte, out any) error {
	if len(bytes.TrimSpace(data)) > 0 {
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("configuration: %s", cleanYAMLError(err))
		}
		if err := check(&doc, reflect.TypeOf(out), ""); err != nil {
			return fmt.Errorf("configuration: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(out); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("configuration: %s", cleanYAMLError(err))
		}
		applyItemDefaults(&doc, reflect.ValueOf(out), 0)
	}
	if v, ok := out.(Validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("configuration: %w", err)
		}
	}
	return nil
}

// LoadFile reads and decodes a YAML file into out (see Decode). An empty path decodes
// nothing and only validates the defaults.
func LoadFile(path string, out any) error {
	if path == "" {
		return Decode(nil, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if err := Decode(data, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// cleanYAMLError turns yaml.v3's "field foo not found in type x.Configuration" into
// "unknown key "foo"", keeping the line number.
func cleanYAMLError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	var out []string
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "field "); i >= 0 && strings.Contains(line, " not found in type ") {
			rest := line[i+len("field "):]
			name := rest[:strings.Index(rest, " not found in type ")]
			line = line[:i] + fmt.Sprintf("unknown key %q", name)
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}
