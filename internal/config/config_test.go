package config

import (
	"errors"
	"strings"
	"testing"
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
		{"unknown key named", "name: x\ninner:\n  prot: 80\n", `line 3: unknown key "prot"`},
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
