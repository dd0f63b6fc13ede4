package store

import (
	"strings"
	"testing"

	"flowzero/schema"
)

// TestSinkRefusesServer checks that a sink is not made for a ClickHouse server, which it
// would not write to.
func TestSinkRefusesServer(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.ClickHouse.URL = "http://127.0.0.1:8123"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := NewSink(nil, cfg, s, nil); err == nil || !strings.Contains(err.Error(), "clickhouse.url: ") {
		t.Errorf("NewSink with a server: %v", err)
	}
}

// TestURLErrorsHideSecrets checks that the errors about a URL name the key and never quote
// the password it holds, whether the URL does not parse, has the wrong scheme or holds
// credentials where none are allowed.
func TestURLErrorsHideSecrets(t *testing.T) {
	const secret = "s3cret"
	urls := []string{
		"ftp://flowzero:" + secret + "@ch.example:8123",     // wrong scheme
		"http://flowzero:" + secret + "%zz@ch.example:8123", // does not parse
		"https://flowzero:" + secret + "@ch.example:8443",   // credentials in the URL
		"http:/flowzero:" + secret + "@ch.example:8123",     // one slash: no host, the rest is a path
		"flowzero:" + secret + "@ch.example:8123",           // no scheme: an opaque URL
	}
	for _, u := range urls {
		for key, set := range map[string]func(*Configuration){
			"clickhouse.url": func(c *Configuration) { c.ClickHouse.URL = u },
			"as-names.url":   func(c *Configuration) { c.ASNames.URL = u },
		} {
			cfg := DefaultConfiguration()
			set(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), key+": ") || strings.Contains(err.Error(), secret) {
				t.Errorf("%s %s: %v", key, u, err)
			}
		}
		_, err := NewHTTPClient(ClickHouseConfiguration{URL: u})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("NewHTTPClient(%s): %v", u, err)
		}
	}
}
