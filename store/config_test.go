package store

import (
	"strings"
	"testing"
	"time"

	"flowzero/schema"
	"flowzero/store/internal/storetest"
)

// TestSinkRefusesServer checks that the embedded sink is not made for a ClickHouse server,
// which it would not write to (ServerSink does).
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
// HTTP interface takes). The HTTP client's own errors are engine's (TestHTTPErrorsHideSecrets).
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
	}
}

// TestConfigurationValidate checks that each bad key of outputs.store is named, those of the
// tables (ddl) as those of the server and the embedded engine.
func TestConfigurationValidate(t *testing.T) {
	for _, tc := range []struct {
		mod func(*Configuration)
		key string
	}{
		{func(c *Configuration) { c.Database = "flow-zero" }, "database"},
		{func(c *Configuration) { c.Resolutions[1].Interval = 0 }, "resolutions[1].interval"},
		{func(c *Configuration) { c.ClickHouse.URL = "tcp://x:9000" }, "clickhouse.url"},
		{func(c *Configuration) { c.ClickHouse.Timeout = 0 }, "clickhouse.timeout"},
		{func(c *Configuration) { c.ClickHouse.MaxResponseBytes = 10 }, "clickhouse.max-response-bytes"},
		{func(c *Configuration) { c.Server.InsertTimeout = 0 }, "server.insert-timeout"},
		{func(c *Configuration) { c.Server.Retries = -1 }, "server.retries"},
		{func(c *Configuration) { c.Server.RetryDelay = -time.Second }, "server.retry-delay"},
		{func(c *Configuration) { c.Embedded.Path = "" }, "embedded.path"},
		{func(c *Configuration) { c.Embedded.BatchBytes = 10 }, "embedded.batch-bytes"},
		{func(c *Configuration) { c.Embedded.QueueLength = 0 }, "embedded.queue-length"},
		{func(c *Configuration) { c.Embedded.QueryConnections = 0 }, "embedded.query-connections"},
		{func(c *Configuration) { c.Embedded.MaxResultBytes = 100 }, "embedded.max-result-bytes"},
		{func(c *Configuration) { c.Embedded.PreAggregateInterval = -time.Second }, "embedded.pre-aggregate-interval"},
		{func(c *Configuration) { c.ASNames.URL = "file:///x" }, "as-names.url"},
	} {
		cfg := DefaultConfiguration()
		tc.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
			t.Errorf("want an error on %s, got %v", tc.key, err)
		}
	}
	if err := DefaultConfiguration().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if got := DefaultConfiguration().Embedded.BatchBytes; got != storetest.SinkBatchBytes {
		t.Errorf("default batch-bytes %d, storetest.SinkBatchBytes %d: the benchmarks' batches are not the sink's", got, storetest.SinkBatchBytes)
	}
}
