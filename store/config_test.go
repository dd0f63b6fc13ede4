package store

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

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
	if _, err := NewSink(nil, cfg, Dependencies{Schema: s}); err == nil || !strings.Contains(err.Error(), "clickhouse.url: ") {
		t.Errorf("NewSink with a server: %v", err)
	}
}

// TestURLErrorsHideSecrets checks that the errors about a URL name the key and never quote
// the password it holds, whether the URL does not parse, has the wrong scheme or holds
// credentials where none are allowed (user:password@ or the query parameters ClickHouse's
// HTTP interface takes), and that a failed request does not quote the URL's query.
func TestURLErrorsHideSecrets(t *testing.T) {
	const secret = "s3cret"
	urls := []string{
		"ftp://flowzero:" + secret + "@ch.example:8123",     // wrong scheme
		"ftp://ch.example:8123/?password=" + secret,         // wrong scheme, password in the query
		"http://flowzero:" + secret + "%zz@ch.example:8123", // does not parse
		"https://flowzero:" + secret + "@ch.example:8443",   // credentials in the URL
		"https://ch.example:8443/?user=flowzero&password=" + secret,
		"https://ch.example:8443/?password=" + secret,
		"https://ch.example:8443/?user=" + secret,
		"http:/flowzero:" + secret + "@ch.example:8123", // one slash: no host, the rest is a path
		"flowzero:" + secret + "@ch.example:8123",       // no scheme: an opaque URL
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

	// The query parameter holding credentials is named, so that it can be found.
	cfg := DefaultConfiguration()
	cfg.ClickHouse.URL = "http://ch.example:8123/?database=flowzero&password=" + secret
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `"password" query parameter`) ||
		!strings.Contains(err.Error(), "clickhouse.password") {
		t.Errorf("password in the query: %v", err)
	}

	// A request that fails quotes no query, whatever clickhouse.url holds (a client made
	// before the parameters were refused, or another parameter that is a secret).
	base, err := url.Parse("http://127.0.0.1:1/?password=" + secret + "&user=flowzero&quota_key=" + secret)
	if err != nil {
		t.Fatal(err)
	}
	c := &HTTPClient{base: base, client: &http.Client{Timeout: 5 * time.Second}}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Exec":   c.Exec(ctx, "SELECT 1"),
		"Insert": c.Insert(ctx, "INSERT INTO t FORMAT Native", strings.NewReader("")),
	} {
		if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "?") ||
			!strings.Contains(err.Error(), "http://127.0.0.1:1/") {
			t.Errorf("%s against a closed port: %v", name, err)
		}
	}
}
