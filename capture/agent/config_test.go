package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"flowzero/internal/config"
)

func TestConfigValidate(t *testing.T) {
	agent := func(f func(*Configuration)) error {
		c := DefaultConfiguration()
		c.Name = "a1"
		c.Replay.Files = []string{"x.pcap"}
		f(&c)
		return c.Validate()
	}
	cases := []struct {
		key string
		err error
	}{
		{"", agent(func(*Configuration) {})},
		{"name", agent(func(c *Configuration) { c.Name = "a:b" })},
		{"server", agent(func(c *Configuration) { c.Server = "nohost" })},
		{"live.interfaces", agent(func(c *Configuration) { c.Live.Interfaces = []string{"eth0"} })},
		{"live.filter", agent(func(c *Configuration) {
			c.Replay.Files, c.Live.Interfaces, c.Live.Filter = nil, []string{"eth0"}, "tcp or"
		})},
		{"replay.speed", agent(func(c *Configuration) { c.Replay.Speed = "fast" })},
		{"buffer-size", agent(func(c *Configuration) { c.BufferSize = c.FrameSize })},
		{"tls.cert", agent(func(c *Configuration) { c.TLS = TLSConfiguration{Enable: true, Cert: "c.pem"} })},
		{"tls.enable", agent(func(c *Configuration) { c.TLS = TLSConfiguration{CA: "ca.pem"} })},
		{"reconnect-max", agent(func(c *Configuration) { c.ReconnectMax = time.Millisecond })},
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
	if err := config.Decode([]byte("live:\n  snaplen: 128\n"), &c); err == nil || !strings.Contains(err.Error(), "snaplen") {
		t.Fatalf("unknown key: %v", err)
	}
}

// TestLiveFilterKey checks that a filter that fits no interface is refused naming the key and
// the interfaces.
func TestLiveFilterKey(t *testing.T) {
	ddd := "4\n40 0 0 12\n21 0 1 2048\n6 0 0 128\n6 0 0 0\n"
	_, err := interfaceFilters(ddd, 128, []string{"eth0", "wg0"}, []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeRaw})
	var ke *config.KeyError
	if !errors.As(err, &ke) || ke.Key != "live.filter" || !strings.Contains(err.Error(), "eth0") || !strings.Contains(err.Error(), "wg0") {
		t.Fatalf("tcpdump -ddd across link types: %v", err)
	}
}
