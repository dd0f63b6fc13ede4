package query

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowzero/internal/config"
	"flowzero/query/chsql"
)

// ClickHouseHTTPConfiguration is the listener answering ClickHouse's HTTP query protocol
// (query/chhttp): `GET /?query=SELECT...`, `POST /` with the statement as the body, and
// `/ping`, as a ClickHouse server does, for SELECT statements only.
type ClickHouseHTTPConfiguration struct {
	// Listen is the address (host:port) of the listener; empty serves none. ClickHouse's
	// own HTTP port is 8123.
	Listen string `yaml:"listen"`
	// User is the user name clients give (HTTP basic authentication, the
	// X-ClickHouse-User header or the user parameter).
	User string `yaml:"user"`
	// Password is the user's password; it is never logged. Required when listen is not a
	// loopback address; empty on loopback, any client is let in.
	Password string `yaml:"password"`
	// MaxBodyBytes bounds a request's statement (the body of a POST and the query
	// parameter together).
	MaxBodyBytes int `yaml:"max-body-bytes"`
}

// DefaultClickHouseHTTPConfiguration returns the defaults: no listener, user default
// without a password (loopback only), statements up to 256 KiB.
func DefaultClickHouseHTTPConfiguration() ClickHouseHTTPConfiguration {
	return ClickHouseHTTPConfiguration{User: "default", MaxBodyBytes: 256 << 10}
}

// Validate checks the configuration; errors name the key.
func (c ClickHouseHTTPConfiguration) Validate() error {
	if c.Listen == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return config.Errorf("listen", "%q is not host:port: %v", c.Listen, err)
	}
	switch {
	case c.User == "":
		return config.Errorf("user", "must not be empty")
	case c.MaxBodyBytes < 1024:
		return config.Errorf("max-body-bytes", "must be at least 1024, not %d", c.MaxBodyBytes)
	case c.Password == "" && !isLoopback(host):
		return config.Errorf("password", "is required when listen (%s) is not a loopback address", c.Listen)
	}
	return nil
}

// isLoopback tells whether host is a loopback address or localhost.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// ClickHouseRequest is a statement received over ClickHouse's HTTP protocol.
type ClickHouseRequest struct {
	// SQL is one SELECT statement, which may end with FORMAT <name>.
	SQL string
	// DefaultFormat is the format when the statement names none (default_format).
	DefaultFormat string
	// Settings are the ClickHouse settings the client gave as URL parameters; only those
	// shaping the output are accepted (AllowedClickHouseSetting).
	Settings map[string]string
}

// clickHouseSettings are the settings a client of the ClickHouse protocol may set: they
// shape the output of the formats a client reads, nothing else. An allow-list: format_*,
// input_format_* and output_format_* also hold settings naming files the engine reads or
// writes (format_schema, format_template_row, format_template_resultset,
// output_format_schema), and limits, permissions and what is read are the collector's
// (max_execution_time is taken apart: it may shorten the configured timeout).
var clickHouseSettings = map[string]bool{
	"extremes": true, "session_timezone": true, "date_time_output_format": true, "interval_output_format": true,
	"output_format_decimal_trailing_zeros":               true,
	"output_format_json_quote_64bit_integers":            true,
	"output_format_json_quote_64bit_floats":              true,
	"output_format_json_quote_denormals":                 true,
	"output_format_json_quote_decimals":                  true,
	"output_format_json_escape_forward_slashes":          true,
	"output_format_json_named_tuples_as_objects":         true,
	"output_format_json_array_of_rows":                   true,
	"output_format_json_validate_utf8":                   true,
	"output_format_json_pretty_print":                    true,
	"output_format_write_statistics":                     true,
	"output_format_pretty_max_rows":                      true,
	"output_format_pretty_max_column_pad_width":          true,
	"output_format_pretty_max_value_width":               true,
	"output_format_pretty_color":                         true,
	"output_format_pretty_grid_charset":                  true,
	"output_format_pretty_row_numbers":                   true,
	"output_format_csv_crlf_end_of_line":                 true,
	"output_format_tsv_crlf_end_of_line":                 true,
	"output_format_arrow_string_as_string":               true,
	"output_format_arrow_low_cardinality_as_dictionary":  true,
	"output_format_parquet_string_as_string":             true,
	"output_format_native_encode_types_in_binary_format": true,
	"output_format_binary_encode_types_in_binary_format": true,
	"output_format_native_write_json_as_string":          true,
	"format_csv_delimiter":                               true,
	"format_csv_null_representation":                     true,
	"format_tsv_null_representation":                     true,
	"format_custom_escaping_rule":                        true,
	"format_custom_field_delimiter":                      true,
	"format_custom_row_before_delimiter":                 true,
	"format_custom_row_after_delimiter":                  true,
	"format_custom_row_between_delimiter":                true,
	"format_custom_result_before_delimiter":              true,
	"format_custom_result_after_delimiter":               true,
	"bool_true_representation":                           true,
	"bool_false_representation":                          true,
}

// AllowedClickHouseSetting tells whether a client of the ClickHouse protocol may set a
// setting (clickHouseSettings).
func AllowedClickHouseSetting(name string) bool { return clickHouseSettings[name] }

var settingName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,127}$`)

// ClickHouse runs one statement received over ClickHouse's HTTP protocol, as RawSQL does
// (read-only, the query's time, memory and result limits), with the output format its
// trailing FORMAT clause names (else req.DefaultFormat, else TabSeparated) and the output
// settings the client asked for.
func (s *Service) ClickHouse(ctx context.Context, req ClickHouseRequest) (*RawSQLResult, error) {
	sql, format, err := splitFormat(req.SQL)
	if err != nil {
		return nil, err
	}
	if format == "" {
		format = req.DefaultFormat
	}
	var extra strings.Builder
	names := make([]string, 0, len(req.Settings))
	for name := range req.Settings {
		names = append(names, name)
	}
	slices.Sort(names)
	timeout := s.cfg.Timeout
	for _, name := range names {
		if name == "max_execution_time" {
			// Clients send their own deadline (clickhouse-go does): it may only shorten ours.
			sec, err := strconv.ParseUint(req.Settings[name], 10, 32)
			if err != nil {
				return nil, fieldError("settings", "max_execution_time: %q is not a number of seconds", req.Settings[name])
			}
			if d := time.Duration(sec) * time.Second; sec > 0 && d < timeout {
				timeout = d
			}
			continue
		}
		if !settingName.MatchString(name) || !AllowedClickHouseSetting(name) {
			return nil, fieldError("settings", "%q: only the output format settings of the documented list may be set here (the collector sets the others)", name)
		}
		fmt.Fprintf(&extra, ", %s = %s", name, chsql.String(req.Settings[name]))
	}
	return s.rawSQL(ctx, RawSQLRequest{SQL: sql, Format: format}, timeout, extra.String())
}

// splitFormat returns sql without a trailing `FORMAT name` clause, and the name ("" when
// there is none).
func splitFormat(sql string) (stmt, format string, err error) {
	sql = strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n")
	toks, err := chsql.Lex(sql)
	if err != nil {
		return "", "", fieldError("sql", "%v (one statement, without comments)", err)
	}
	n := len(toks)
	if n >= 3 && toks[n-2].Kind == chsql.TokenWord && strings.EqualFold(toks[n-2].Text, "FORMAT") &&
		(toks[n-1].Kind == chsql.TokenWord || toks[n-1].Kind == chsql.TokenIdent) {
		name := toks[n-1].Text
		if toks[n-1].Kind == chsql.TokenIdent {
			name = toks[n-1].Value
		}
		return strings.TrimSpace(sql[:toks[n-2].Offset]), name, nil
	}
	return sql, "", nil
}
