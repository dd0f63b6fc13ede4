// Package store keeps flows in ClickHouse: it is the outputs.store section of the
// configuration and the collector's store output (Sink), which inserts the flows into the
// embedded engine (chDB) so that one machine works without a server. A server gets its flows
// from the Kafka output through the Kafka table the DDL creates, or, from the outlets of a
// split collector, through ServerSink: each outlet's units inserted over HTTP with their
// deduplication tokens.
//
// The parts, each a package below, with data flowing one way (the sink uses them; ddl and
// native do not know each other):
//   - store/chdb: the cgo binding to libchdb.so, the ClickHouse engine in the process;
//   - store/engine: how statements reach ClickHouse (the embedded engine, a server over
//     HTTP);
//   - store/ddl: the tables, views, dictionaries and Kafka table of a schema, and their
//     migrations, the same SQL on a server and in the embedded engine;
//   - store/native: the Native blocks the sink inserts, sorted by the tables' keys, and the
//     pre-aggregation of the finest resolution in Go.
//
// The design, its measurements and what was tried are in docs/design/store.md.
package store
