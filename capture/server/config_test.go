package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"flowzero/internal/config"
)

func TestConfigValidate(t *testing.T) {
	server := func(f func(*Configuration)) error {
		c := DefaultConfiguration()
		f(&c)
		return c.Validate()
	}
	cases := []struct {
		key string
		err error
	}{
		{"", server(func(*Configuration) {})},
		{"output.path", server(func(c *Configuration) { c.Output.Path, c.Output.RotateSize = "-", 10 })},
		{"output.max-files", server(func(c *Configuration) { c.Output.MaxFiles = 3 })},
		{"output.idle-close", server(func(c *Configuration) { c.Output.IdleClose = -time.Second })},
		{"tls.cert", server(func(c *Configuration) { c.TLS.Enable = true })},
		{"max-interfaces-per-agent", server(func(c *Configuration) { c.MaxInterfacesPerAgent = 0 })},
		{"tokens[1]", server(func(c *Configuration) { c.Tokens = []string{"a", ""} })},
	}
	for _, tc := range cases {
		var ke *config.KeyError
		switch {
		case tc.key == "" && tc.err != nil:
			t.Errorf("defaults refused: %v", tc.err)
		case tc.key != "" && (!errors.As(tc.err, &ke) || ke.Key != tc.key):
			t.Errorf("want an error on %s, got %v", tc.key, tc.err)
		}
	}
	// Strict YAML: an unknown key is an error naming it.
	c := DefaultConfiguration()
	if err := config.Decode([]byte("output:\n  rotate-sise: 10\n"), &c); err == nil || !strings.Contains(err.Error(), "rotate-sise") {
		t.Fatalf("unknown key: %v", err)
	}
	if err := config.Decode([]byte("listen: 127.0.0.1:0\noutput:\n  path: /tmp/x-%Y.pcapng\n  rotate-interval: 1h\n  max-files: 24\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Output.RotateInterval != time.Hour || c.Output.MaxFiles != 24 {
		t.Fatalf("decoded %+v", c.Output)
	}
}
