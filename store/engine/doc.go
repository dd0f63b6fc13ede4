// Package engine is how statements reach ClickHouse: the Executor interface, implemented by
// Embedded (a connection to the in-process engine of store/chdb), HTTPClient (a server's
// HTTP interface, every response read within a size limit) and ReadOnly (read-only
// connections to the embedded engine, for queries beside the sink's inserts).
package engine
