package capture

import (
	"errors"
	"strings"
	"testing"
	"time"

	"flowzero/internal/config"
)

func TestConfigValidate(t *testing.T) {
	agent := func(f func(*AgentConfiguration)) error {
		c := DefaultAgentConfiguration()
		c.Name = "a1"
		c.Replay.Files = []string{"x.pcap"}
		f(&c)
		return c.Validate()
	}
	server := func(f func(*ServerConfiguration)) error {
		c := DefaultServerConfiguration()
		f(&c)
		return c.Validate()
	}
	cases := []struct {
		key string
		err error
	}{
		{"", agent(func(*AgentConfiguration) {})},
		{"", server(func(*ServerConfiguration) {})},
		{"name", agent(func(c *AgentConfiguration) { c.Name = "a:b" })},
		{"server", agent(func(c *AgentConfiguration) { c.Server = "nohost" })},
		{"live.interfaces", agent(func(c *AgentConfiguration) { c.Live.Interfaces = []string{"eth0"} })},
		{"live.filter", agent(func(c *AgentConfiguration) {
			c.Replay.Files, c.Live.Interfaces, c.Live.Filter = nil, []string{"eth0"}, "tcp or"
		})},
		{"replay.speed", agent(func(c *AgentConfiguration) { c.Replay.Speed = "fast" })},
		{"buffer-size", agent(func(c *AgentConfiguration) { c.BufferSize = c.FrameSize })},
		{"tls.cert", agent(func(c *AgentConfiguration) { c.TLS = TLSClientConfiguration{Enable: true, Cert: "c.pem"} })},
		{"reconnect-max", agent(func(c *AgentConfiguration) { c.ReconnectMax = time.Millisecond })},
		{"output.path", server(func(c *ServerConfiguration) { c.Output.Path, c.Output.RotateSize = "-", 10 })},
		{"output.max-files", server(func(c *ServerConfiguration) { c.Output.MaxFiles = 3 })},
		{"output.idle-close", server(func(c *ServerConfiguration) { c.Output.IdleClose = -time.Second })},
		{"tls.cert", server(func(c *ServerConfiguration) { c.TLS.Enable = true })},
		{"max-interfaces-per-agent", server(func(c *ServerConfiguration) { c.MaxInterfacesPerAgent = 0 })},
		{"tokens[1]", server(func(c *ServerConfiguration) { c.Tokens = []string{"a", ""} })},
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
	c := DefaultServerConfiguration()
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
