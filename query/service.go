package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"flowzero/internal/clock"
	"flowzero/internal/config"
	"flowzero/query/catalog"
	"flowzero/query/chsql"
	"flowzero/query/filter"
)

// Service answers the queries of the API and the CLI on an engine. It is safe for
// concurrent use.
type Service struct {
	cfg    Configuration
	base   *catalog.Catalog
	engine Engine
	clock  clock.Clock
	log    *slog.Logger

	mu    sync.Mutex
	state *tablesState
	sf    singleflight.Group

	funcsMu sync.Mutex
	funcs   map[string]bool // the engine's table functions (RawSQL)
}

// tablesState is what the table choice and the filters read from the engine: the oldest
// row of each table (absent when the table is empty or unreadable), the oldest row that
// counts flows (aggregated tables made before their Flows column hold rows with 0 flows)
// and the protocol names.
type tablesState struct {
	read    time.Time
	oldest  map[string]time.Time
	counted map[string]time.Time
	catalog *catalog.Catalog // base with the protocol names
}

// oldestFor returns the oldest rows the table choice reads: those counting flows when the
// query needs flow counts.
func (st *tablesState) oldestFor(needCount bool) map[string]time.Time {
	if needCount {
		return st.counted
	}
	return st.oldest
}

// countsFrom tells whether w's table counts the flows of w's whole range: its oldest row
// counting flows is its oldest row, or at most one interval after w's start, or it was
// empty when the state was read.
func (st *tablesState) countsFrom(w window) bool {
	if !w.table.FlowCount {
		return false
	}
	o, ok := st.counted[w.table.Name]
	if !ok {
		// Empty when read: its rows are new ones, counting flows.
		_, rows := st.oldest[w.table.Name]
		return !rows
	}
	return !o.After(st.oldest[w.table.Name]) || !o.After(w.start.Add(w.interval))
}

// New returns a service reading the flows of cat through engine, with clk as its clock
// (clock.System{} in production). The configuration's default filter must parse.
func New(cfg Configuration, cat *catalog.Catalog, engine Engine, clk clock.Clock, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Service{cfg: cfg, base: cat, engine: engine, clock: clock.Or(clk), log: log}
	if _, err := filter.Parse(cat, cfg.DefaultFilter); err != nil {
		// Protocol names are not known yet: a default filter naming one is checked again
		// once they are read.
		var fe *filter.Error
		if !errors.As(err, &fe) || !strings.Contains(fe.Message, "protocol") {
			return nil, fmt.Errorf("query: %w", config.Errorf("default-filter", "%v", err))
		}
	}
	return s, nil
}

// Configuration returns the service's configuration.
func (s *Service) Configuration() Configuration { return s.cfg }

// Now returns the service's clock's time.
func (s *Service) Now() time.Time { return s.clock.Now() }

// tablesRetry is when the tables' state is read again after a failure, or when every table
// was empty.
const tablesRetry = 5 * time.Second

// tables returns the state of the tables, read again when older than TablesRefresh. When
// reading fails, the last state read is kept, and without one the error is returned.
func (s *Service) tables(ctx context.Context) (*tablesState, error) {
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if st != nil && s.clock.Now().Sub(st.read) < s.cfg.TablesRefresh {
		return st, nil
	}
	v, err, _ := s.sf.Do("tables", func() (any, error) {
		// Not the caller's context: a client going away should not fail the others.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
		defer cancel()
		return s.readTables(rctx)
	})
	if err != nil {
		if st == nil {
			return nil, err
		}
		// Keep the last state, and read again in tablesRetry rather than at every query.
		s.log.Warn("query: cannot read the tables' oldest rows, keeping the last ones", "error", err)
		kept := *st
		kept.read = s.clock.Now().Add(tablesRetry - s.cfg.TablesRefresh)
		s.mu.Lock()
		s.state = &kept
		s.mu.Unlock()
		return &kept, nil
	}
	st = v.(*tablesState)
	if len(st.oldest) == 0 {
		// No table holds a row yet (a collector just started): read again soon, not in
		// TablesRefresh, so that the first flows are drawn from the right tables.
		young := *st
		young.read = st.read.Add(tablesRetry - s.cfg.TablesRefresh)
		st = &young
	}
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
	return st, nil
}

// InvalidateTables makes the next query read the tables' state again.
func (s *Service) InvalidateTables() {
	s.mu.Lock()
	s.state = nil
	s.mu.Unlock()
}

func (s *Service) readTables(ctx context.Context) (*tablesState, error) {
	st := &tablesState{read: s.clock.Now(), oldest: map[string]time.Time{}, counted: map[string]time.Time{}, catalog: s.base}
	var parts []string
	for _, t := range append([]catalog.Table{s.base.Flows}, s.base.Aggregated...) {
		// The oldest row and the count come from the parts' metadata (min of the partition
		// key's column, count()). Rows of an aggregated table written before it had its
		// Flows column hold 0 flows: its oldest counted row is the first in time order with
		// Flows > 0 (read in the primary key's order, which starts with TimeReceived).
		table := chsql.Table(s.base.Database, t.Name)
		sel := fmt.Sprintf("SELECT %s AS name, (SELECT toUnixTimestamp(min(TimeReceived)) FROM %s) AS oldest, (SELECT count() FROM %s) AS n",
			chsql.String(t.Name), table, table)
		switch {
		case !t.FlowCount:
			sel += ", 0 AS counted, 0 AS nc"
		case t.Resolution == 0:
			sel += ", oldest AS counted, n AS nc"
		default:
			sel += fmt.Sprintf(", toUnixTimestamp(min(t)) AS counted, count() AS nc\nFROM (SELECT TimeReceived AS t FROM %s WHERE Flows > 0 ORDER BY TimeReceived LIMIT 1)", table)
		}
		parts = append(parts, sel)
	}
	res, err := s.run(ctx, "SELECT * FROM (\n"+strings.Join(parts, "\nUNION ALL\n")+"\n)", 5, 0)
	if err != nil {
		return nil, err
	}
	for _, row := range res.Data {
		if cellUint(row[2]) > 0 {
			st.oldest[cellString(row[0])] = time.Unix(cellInt(row[1]), 0).UTC()
		}
		if cellUint(row[4]) > 0 {
			st.counted[cellString(row[0])] = time.Unix(cellInt(row[3]), 0).UTC()
		}
	}
	res, err = s.run(ctx, "SELECT proto, name FROM "+chsql.Table(s.base.Database, "protocols")+" ORDER BY proto", 2, 0)
	if err != nil {
		s.log.Warn("query: no protocol names (the protocols dictionary cannot be read): filters take protocol numbers only", "error", err)
		return st, nil
	}
	var ps []catalog.Protocol
	for _, row := range res.Data {
		if n := cellUint(row[0]); n <= 255 {
			ps = append(ps, catalog.Protocol{Number: uint8(n), Name: cellString(row[1])})
		}
	}
	st.catalog = s.base.WithProtocols(ps)
	return st, nil
}

// Catalog returns the catalog with the protocol names once they are read (the base catalog
// before, or when the engine cannot be read).
func (s *Service) Catalog(ctx context.Context) *catalog.Catalog {
	if st, err := s.tables(ctx); err == nil {
		return st.catalog
	}
	return s.base
}

// TableInfo is a table as the console sees it.
type TableInfo struct {
	Name       string `json:"name"`
	Resolution int64  `json:"resolution"` // seconds, 0 for the flows table
	TTL        int64  `json:"ttl"`        // seconds, 0 for none
	// Oldest is the time of the oldest row, absent for an empty table.
	Oldest *time.Time `json:"oldest,omitempty"`
}

// Tables returns the tables with their oldest rows.
func (s *Service) Tables(ctx context.Context) ([]TableInfo, error) {
	st, err := s.tables(ctx)
	if err != nil {
		return nil, err
	}
	var out []TableInfo
	for _, t := range append([]catalog.Table{s.base.Flows}, s.base.Aggregated...) {
		ti := TableInfo{Name: t.Name, Resolution: int64(t.Resolution / time.Second), TTL: int64(t.TTL / time.Second)}
		if o, ok := st.oldest[t.Name]; ok {
			ti.Oldest = &o
		}
		out = append(out, ti)
	}
	return out, nil
}

// run runs a SELECT with the query settings and parses its answer, which must have at
// least cols columns. timeout, when not 0, shortens the configured one. A statement over
// MaxStatementBytes is refused naming the filter.
func (s *Service) run(ctx context.Context, sql string, cols int, timeout time.Duration) (*result, error) {
	if timeout == 0 || timeout > s.cfg.Timeout {
		timeout = s.cfg.Timeout
	}
	stmt := statement(sql, timeout, s.cfg.MaxMemory)
	if len(stmt) > MaxStatementBytes {
		// The filter is the only part of a request that can make a statement this long
		// (repeated per axis, per period and per table): columns, dimensions and the
		// other fields are bounded well under it.
		return nil, fieldError("filter", "the query it makes is %d bytes, over the engine's %d (max_query_size): shorten the filter (fewer IN values)",
			len(stmt), MaxStatementBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	defer cancel()
	out, err := s.engine.Query(ctx, stmt, "JSONCompact")
	if err != nil {
		return nil, classify(err)
	}
	return parseResult(out, cols)
}

// statement appends the settings and the output format to a SELECT: the engine stops the
// query past timeout or maxMemory, and writes numbers unquoted.
func statement(sql string, timeout time.Duration, maxMemory int64) string {
	return fmt.Sprintf("%s\nSETTINGS max_execution_time = %d, max_memory_usage = %d, "+
		"output_format_json_quote_64bit_integers = 0, output_format_json_quote_denormals = 0\nFORMAT JSONCompact",
		sql, int64(timeout/time.Second), maxMemory)
}
