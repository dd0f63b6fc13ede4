package query

import (
	"time"

	"flowzero/internal/config"
)

// Configuration bounds and tunes the queries; it is the query section of the collector's
// configuration (the HTTP API reads the concurrency and cache settings).
type Configuration struct {
	// DimensionsLimit is the largest number of rows (dimension values) a query may ask for;
	// the rows past a query's limit fold into one row named Other.
	DimensionsLimit int `yaml:"dimensions-limit"`
	// Points is the number of points of a time series when the request does not say.
	Points int `yaml:"points"`
	// DefaultFilter is the filter the console starts with (and the home page's graph); it
	// must parse against the enabled columns.
	DefaultFilter string `yaml:"default-filter"`
	// Timeout bounds one query: the engine stops it past this time (max_execution_time) and
	// the API answers 504.
	Timeout time.Duration `yaml:"timeout"`
	// MaxMemory bounds the memory of one query in the engine, in bytes (max_memory_usage):
	// past it, the query fails rather than take the collector's memory.
	MaxMemory int64 `yaml:"max-memory"`
	// MaxConcurrent is the number of API queries run at once; max-queued more wait for their
	// turn (at most Timeout). Past both, the API answers 429 with Retry-After.
	MaxConcurrent int `yaml:"max-concurrent"`
	// MaxQueued is the number of API queries waiting for their turn while max-concurrent
	// run; past it, the API answers 429 with Retry-After.
	MaxQueued int `yaml:"max-queued"`
	// CacheDuration is how long the API answers the same request with the same result
	// (a console auto-refreshing, several users on one dashboard); 0 disables the cache.
	CacheDuration time.Duration `yaml:"cache-duration"`
	// CacheSize bounds the cached answers, in bytes.
	CacheSize int `yaml:"cache-size"`
	// CompletionTimeout bounds the engine's search for values to propose in filter
	// completion (the most frequent in recent flows, AS names); past it, only the fixed
	// lists and the columns are proposed.
	CompletionTimeout time.Duration `yaml:"completion-timeout"`
	// TablesRefresh is how long the oldest row of each table, which the table choice needs,
	// and the protocol names are remembered before they are read again.
	TablesRefresh time.Duration `yaml:"tables-refresh"`
	// ClickHouseHTTP serves ClickHouse's own HTTP query protocol (read-only, SELECT only) on
	// a listener of its own, so that ClickHouse clients and Grafana's ClickHouse data source
	// read the stored flows. Off unless listen is set.
	ClickHouseHTTP ClickHouseHTTPConfiguration `yaml:"clickhouse-http"`
}

// DefaultConfiguration returns the defaults: 50 rows at most, 200 points, the external
// traffic as the default filter, 30 s and 2 GiB per query, 4 queries at once and 32
// waiting, answers cached 5 s (32 MiB), completion values within 2 s, tables read again
// every minute.
func DefaultConfiguration() Configuration {
	return Configuration{
		DimensionsLimit: 50,
		Points:          200,
		DefaultFilter:   "InIfBoundary = external",
		Timeout:         30 * time.Second,
		MaxMemory:       2 << 30,
		MaxConcurrent:   4,
		MaxQueued:       32,
		CacheDuration:   5 * time.Second,
		CacheSize:       32 << 20,
		TablesRefresh:   time.Minute,
		// Completion runs while the user types: it must answer fast or not at all.
		CompletionTimeout: 2 * time.Second,
		ClickHouseHTTP:    DefaultClickHouseHTTPConfiguration(),
	}
}

// Validate checks the configuration; errors name the key. The default filter is checked
// against the columns by New.
func (c Configuration) Validate() error {
	switch {
	case c.DimensionsLimit < 1 || c.DimensionsLimit > 1000:
		return config.Errorf("dimensions-limit", "must be in 1..1000, not %d", c.DimensionsLimit)
	case c.Points < MinPoints || c.Points > MaxPoints:
		return config.Errorf("points", "must be in %d..%d, not %d", MinPoints, MaxPoints, c.Points)
	case c.Timeout < time.Second || c.Timeout%time.Second != 0:
		return config.Errorf("timeout", "must be a whole number of seconds, at least 1s, not %s", c.Timeout)
	case c.MaxMemory < 16<<20:
		return config.Errorf("max-memory", "must be at least 16 MiB (16777216), not %d", c.MaxMemory)
	case c.MaxConcurrent < 1:
		return config.Errorf("max-concurrent", "must be at least 1, not %d", c.MaxConcurrent)
	case c.MaxQueued < 0:
		return config.Errorf("max-queued", "must not be negative")
	case c.CacheDuration < 0:
		return config.Errorf("cache-duration", "must not be negative")
	case c.CacheSize < 0:
		return config.Errorf("cache-size", "must not be negative")
	case c.CompletionTimeout < time.Second || c.CompletionTimeout%time.Second != 0:
		return config.Errorf("completion-timeout", "must be a whole number of seconds, at least 1s, not %s", c.CompletionTimeout)
	case c.TablesRefresh < time.Second:
		return config.Errorf("tables-refresh", "must be at least 1s, not %s", c.TablesRefresh)
	}
	if err := c.ClickHouseHTTP.Validate(); err != nil {
		return config.Prefix("clickhouse-http", err)
	}
	return nil
}
