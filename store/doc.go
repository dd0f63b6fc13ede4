// Package store keeps flows in ClickHouse: the tables generated from the schema, their
// migrations, and the embedded engine (chDB) that makes one machine work without a server.
//
// # Design
//
// One SQL dialect everywhere. DDL generates the statements for a schema and a configuration:
// the flows table (MergeTree, daily partitions, Akvorado's sorting key, TTL dropping whole
// parts), aggregated tables per resolution (SummingMergeTree over the dimensions that make
// sense summed, their own TTL) fed by cascading materialized views (flows → 1m → 5m → 1h, so
// only the finest view groups every flow), dictionaries (protocol names built in, AS names
// from an HTTP CSV), and for the Kafka path a Kafka engine table on flows-<hash> with the
// schema's .proto and the view moving its rows into the flows table. With a cluster name the
// same objects become Replicated*MergeTree tables behind Distributed ones, created ON CLUSTER.
//
// The statements run unchanged on a ClickHouse server (HTTPClient, its HTTP interface) and in
// the embedded engine (Embedded over store/chdb). Migrator compares what exists with what the
// DDL wants; every object carries its statement's fingerprint as COMMENT, which makes
// migrations idempotent and lets data tables be altered in place (ADD COLUMN, TTL) while
// objects without data are replaced.
//
// Sink is the collector's embedded output: encoded flows are appended to a batch buffer and
// streamed to `INSERT ... FORMAT Protobuf` by one inserter goroutine, by size and time, into a
// persistent data directory.
package store
