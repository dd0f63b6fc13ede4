// Package engine is how statements reach ClickHouse: the Executor interface, implemented by
// Embedded (the in-process engine of store/chdb) and HTTPClient (a server's HTTP interface,
// every response read within a size limit).
package engine
