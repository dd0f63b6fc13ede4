package engine

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
// and X-ClickHouse-Key headers, never in the URL (so they do not end up in logs). It is safe
// for concurrent use.
type HTTPClient struct {
	base     *url.URL
	user     string
	password string
	maxBytes int64
	client   *http.Client
}

// ServerError is an error reported by the ClickHouse server.
type ServerError struct {
	Status int    // HTTP status
	Code   string // ClickHouse exception code (X-ClickHouse-Exception-Code), "" if absent
	Msg    string // the server's message (its end, when long: where ClickHouse puts the exception)
}

func (e *ServerError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("clickhouse: HTTP %d, code %s: %s", e.Status, e.Code, e.Msg)
	}
	return fmt.Sprintf("clickhouse: HTTP %d: %s", e.Status, e.Msg)
}

// ErrResponseTooLarge is returned for a response body longer than max-response-bytes.
var ErrResponseTooLarge = errors.New("response larger than clickhouse.max-response-bytes")

// NewHTTPClient returns a client for the server in cfg.
func NewHTTPClient(cfg HTTPConfiguration) (*HTTPClient, error) {
	u, err := parseServerURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: url: %w", err)
	}
	maxBytes := cfg.MaxResponseBytes
	if maxBytes <= 0 {
		maxBytes = DefaultHTTPConfiguration().MaxResponseBytes
	}
	return &HTTPClient{base: u, user: cfg.User, password: cfg.Password, maxBytes: maxBytes,
		client: &http.Client{Timeout: cfg.Timeout}}, nil
}

// errorMessageBytes is how much of an error response's body ServerError quotes.
const errorMessageBytes = 2000

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
	// One byte more than the limit tells a body of exactly the limit from a longer one.
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("clickhouse: reading the response: %w", err)
	}
	tooLarge := int64(len(data)) > c.maxBytes
	code := resp.Header.Get("X-ClickHouse-Exception-Code")
	if resp.StatusCode != http.StatusOK || code != "" {
		// An exception after the output started is written at the end of the body.
		msg := strings.TrimSpace(string(data))
		if len(msg) > errorMessageBytes || tooLarge {
			msg = "…" + strings.ToValidUTF8(msg[max(0, len(msg)-errorMessageBytes):], "")
		}
		return nil, &ServerError{Status: resp.StatusCode, Code: code, Msg: msg}
	}
	if tooLarge {
		return nil, fmt.Errorf("clickhouse: %w (%d bytes)", ErrResponseTooLarge, c.maxBytes)
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
// schema uses (see Args).
func (c *HTTPClient) Exec(ctx context.Context, sql string) error {
	_, err := c.do(ctx, url.Values{"wait_end_of_query": {"1"}, "allow_suspicious_low_cardinality_types": {"1"}}, strings.NewReader(sql))
	return err
}

// Query runs a statement and returns its output in format ("" is TabSeparated) unless it
// says FORMAT.
func (c *HTTPClient) Query(ctx context.Context, sql, format string) ([]byte, error) {
	if format == "" {
		format = "TabSeparated"
	}
	return c.do(ctx, url.Values{"default_format": {format}, "wait_end_of_query": {"1"}}, strings.NewReader(sql))
}

// Insert runs an INSERT statement (ending with its FORMAT clause) whose data is read from body.
func (c *HTTPClient) Insert(ctx context.Context, query string, body io.Reader) error {
	_, err := c.do(ctx, url.Values{"query": {query}}, body)
	return err
}
