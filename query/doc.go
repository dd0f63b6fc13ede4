// Package query answers what users ask of the stored flows: time series (Line), Sankey
// diagrams, tables of totals, flow records, the home page widgets, and the filter
// language's validation and completion. The HTTP API (query/httpapi) and the CLI are thin
// layers over a Service.
//
// # Design
//
// A Service reads flows through an Engine: one method running a SELECT that carries its own
// SETTINGS (the query's time and memory limits) and FORMAT (JSONCompact), which the store's
// embedded engine and its ClickHouse HTTP client both are. What the queries know of the
// columns and tables is a catalog.Catalog, filled from the schema and the store's DDL.
//
// Each request is a struct validated before anything runs (errors name the field, or are
// the filter's *filter.Error with its position). The table is chosen from the range, the
// points asked for and the age of each table's oldest row (choose.go): the coarsest
// aggregated table fitting the interval that reaches back to the start, or the flows table
// when a dimension or the filter needs a column only it holds. Line and table queries are
// one statement each: a CTE ranks the rows to keep, every axis (direct, reverse for
// bidirectional, previous period) groups by bucket and row, with the others folded into
// Other (series.go). Counts are scaled by SamplingRate. Times come from the Service's clock,
// never from the engine's now(), so tests run it at any date. See docs/design/query.md for
// the choices and what was considered.
package query
