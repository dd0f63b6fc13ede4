package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// HTTPClient applies statements to a ClickHouse server through its HTTP interface
// (https://clickhouse.com/docs/interfaces/http): the statement is the POST body, or the
// `query` parameter when the body carries INSERT data; credentials go in the X-ClickHouse-User
// and X-ClickHouse-Key headers, never in the URL (so they do not end up in logs).
type HTTPClient struct {
	base     *url.URL
	user     string
	password string
	client   *http.Client
}

// ServerError is an error reported by the ClickHouse server.
type ServerError struct {
	Status int    // HTTP status
	Code   string // ClickHouse exception code (X-ClickHouse-Exception-Code), "" if absent
	Msg    string // the server's message
}

func (e *ServerError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("clickhouse: HTTP %d, code %s: %s", e.Status, e.Code, e.Msg)
	}
	return fmt.Sprintf("clickhouse: HTTP %d: %s", e.Status, e.Msg)
}

// NewHTTPClient returns a client for the server in cfg.
func NewHTTPClient(cfg ClickHouseConfiguration) (*HTTPClient, error) {
	u, err := parseClickHouseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: url: %w", err)
	}
	return &HTTPClient{base: u, user: cfg.User, password: cfg.Password,
		client: &http.Client{Timeout: cfg.Timeout}}, nil
}

func (c *HTTPClient) do(ctx context.Context, params url.Values, body io.Reader) ([]byte, error) {
	u := *c.base
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return nil, hideURL(err, &u)
	}
	if c.user != "" {
		req.Header.Set("X-ClickHouse-User", c.user)
	}
	if c.password != "" {
		req.Header.Set("X-ClickHouse-Key", c.password)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", hideURL(err, &u))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: reading the response: %w", err)
	}
	code := resp.Header.Get("X-ClickHouse-Exception-Code")
	if resp.StatusCode != http.StatusOK || code != "" {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return nil, &ServerError{Status: resp.StatusCode, Code: code, Msg: msg}
	}
	return data, nil
}

// hideURL makes a *url.Error quote u as scheme://host/path: its query holds the statement
// and whatever parameters clickhouse.url has, which may be secret.
func hideURL(err error, u *url.URL) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	}
	return err
}

// Exec runs a statement and discards its output. It allows LowCardinality(IPv6), which the
// schema uses (see EngineArgs).
func (c *HTTPClient) Exec(ctx context.Context, sql string) error {
	_, err := c.do(ctx, url.Values{"wait_end_of_query": {"1"}, "allow_suspicious_low_cardinality_types": {"1"}}, strings.NewReader(sql))
	return err
}

// Query runs a statement and returns its output, TabSeparated unless it says FORMAT.
func (c *HTTPClient) Query(ctx context.Context, sql string) ([]byte, error) {
	return c.do(ctx, url.Values{"default_format": {"TabSeparated"}, "wait_end_of_query": {"1"}}, strings.NewReader(sql))
}

// Insert runs an INSERT statement (ending with its FORMAT clause) whose data is read from body.
func (c *HTTPClient) Insert(ctx context.Context, query string, body io.Reader) error {
	_, err := c.do(ctx, url.Values{"query": {query}}, body)
	return err
}
