// Package ddl generates the ClickHouse statements of a schema and a configuration (the flows
// table, the aggregated tables and their views, dictionaries, the Kafka table) and migrates a
// database to them (Migrator), on the embedded engine or a server alike.
package ddl
