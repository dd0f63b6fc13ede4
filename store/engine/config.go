package engine

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"flowzero/internal/config"
)

// HTTPConfiguration is a ClickHouse server reached over its HTTP interface.
type HTTPConfiguration struct {
	// URL of the server's HTTP interface (for example http://127.0.0.1:8123); empty,
	// `flowzero store migrate` works on the embedded engine's data directory. It must not
	// hold credentials (user:password@, or user and password query parameters): user and
	// password go in headers, which errors and logs do not quote.
	URL string `yaml:"url"`
	// User to authenticate as.
	User string `yaml:"user"`
	// Password of the user; it is never logged.
	Password string `yaml:"password"`
	// Timeout of one HTTP request.
	Timeout time.Duration `yaml:"timeout"`
	// MaxResponseBytes bounds the body read from one response: a larger answer is an error,
	// never cut silently.
	MaxResponseBytes int64 `yaml:"max-response-bytes"`
}

// DefaultHTTPConfiguration returns the defaults: no server, 5 minutes per request, answers
// of up to 64 MiB.
func DefaultHTTPConfiguration() HTTPConfiguration {
	return HTTPConfiguration{Timeout: 5 * time.Minute, MaxResponseBytes: 64 << 20}
}

// Validate checks the configuration; errors name the bad key.
func (c HTTPConfiguration) Validate() error {
	if c.URL != "" {
		if _, err := parseServerURL(c.URL); err != nil {
			return config.Prefix("url", err)
		}
	}
	if c.Timeout <= 0 {
		return config.Errorf("timeout", "must be positive")
	}
	if c.MaxResponseBytes < 1024 {
		return config.Errorf("max-response-bytes", "must be at least 1024, not %d", c.MaxResponseBytes)
	}
	return nil
}

// ParseHTTPURL parses the URL of an HTTP(S) server. Its errors never quote a password: they
// show the URL redacted, or not at all when it does not parse (url.Parse's error quotes it
// whole).
func ParseHTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("cannot be parsed as a URL (not quoted: it may hold a password)")
	}
	if u.Host == "" {
		// Without a host, user:password@ is left in the opaque part or the path, where
		// Redacted does not hide it.
		return nil, errors.New("not an http(s) URL with a host (not quoted: it may hold a password)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		// Scheme and host only: the path and query may hold a secret too.
		return nil, fmt.Errorf("%q is not an http(s) URL", (&url.URL{Scheme: u.Scheme, Host: u.Host}).String())
	}
	return u, nil
}

// CredentialParam returns the first query parameter of u that carries credentials to a
// ClickHouse server (user, password), or "".
func CredentialParam(u *url.URL) string {
	q := u.Query()
	for _, key := range []string{"user", "password"} {
		if q.Has(key) {
			return key
		}
	}
	return ""
}

// parseServerURL parses clickhouse.url, which must not hold credentials, as user:password@
// or as the user and password query parameters the HTTP interface also takes: the client
// sends them in headers, never in the URL, so that they stay out of logs and errors.
func parseServerURL(raw string) (*url.URL, error) {
	u, err := ParseHTTPURL(raw)
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, errors.New("put credentials in clickhouse.user and clickhouse.password, not in the URL")
	}
	if key := CredentialParam(u); key != "" {
		return nil, fmt.Errorf("%q query parameter: put credentials in clickhouse.user and clickhouse.password, not in the URL", key)
	}
	return u, nil
}
