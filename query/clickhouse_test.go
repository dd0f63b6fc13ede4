package query

import (
	"strings"
	"testing"
)

func TestClickHouseHTTPValidate(t *testing.T) {
	for _, c := range []struct {
		listen, user, password, want string
	}{
		{"", "", "", ""}, // off: nothing checked
		{"127.0.0.1:8123", "default", "", ""},
		{"[::1]:8123", "default", "", ""},
		{"localhost:8123", "default", "", ""},
		{"0.0.0.0:8123", "default", "", "password: is required"},
		{"192.0.2.1:8123", "default", "secret", ""},
		{"8123", "default", "", "listen:"},
		{"127.0.0.1:8123", "", "", "user:"},
	} {
		cfg := DefaultClickHouseHTTPConfiguration()
		cfg.Listen, cfg.User, cfg.Password = c.listen, c.user, c.password
		err := cfg.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c, err, c.want)
		}
	}
	cfg := DefaultConfiguration()
	cfg.ClickHouseHTTP.Listen = "0.0.0.0:8123"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "clickhouse-http.password") {
		t.Errorf("whole configuration: %v, want the key clickhouse-http.password", err)
	}
}

func TestSplitFormat(t *testing.T) {
	for _, c := range []struct{ in, stmt, format, err string }{
		{"SELECT 1", "SELECT 1", "", ""},
		{"SELECT 1 FORMAT JSON;", "SELECT 1", "JSON", ""},
		{"select 1 format `CSVWithNames`", "select 1", "CSVWithNames", ""},
		{"SELECT 'FORMAT JSON'", "SELECT 'FORMAT JSON'", "", ""},
		{"SELECT format FROM t", "SELECT format FROM t", "", ""},
		{"SELECT 1 -- FORMAT JSON", "", "", "sql:"},
	} {
		stmt, format, err := splitFormat(c.in)
		if stmt != c.stmt || format != c.format || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("splitFormat(%q) = %q, %q, %v", c.in, stmt, format, err)
		}
	}
}
