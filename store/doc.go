// Package store keeps flows in ClickHouse: the tables generated from the schema, their
// migrations, and the embedded engine (chDB) that makes one machine work without a server.
//
// # Design
//
// One SQL dialect everywhere. DDL generates the statements for a schema and a configuration:
// the flows table (MergeTree, daily partitions, Akvorado's sorting key, TTL dropping whole
// parts), aggregated tables per resolution (SummingMergeTree over the dimensions that make
// sense summed, their own TTL) fed by cascading materialized views (flows → 1m → 5m → 1h: only
// the finest view groups, the others round the time and their table sums on merge), dictionaries (protocol names built in, AS names
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
// Sink is the collector's embedded output: encoded flows are appended to a batch buffer, by
// size and time, and one inserter goroutine converts each batch to ClickHouse's Native format
// (NativeEncoder, in Go: the engine's Protobuf input cost more than the rest of an insert) and
// inserts it into a persistent data directory. Inserts skip optimize_on_insert and write
// compact parts (tableSettings), which made the aggregated tables' cost per flow several times
// lower; what remains is the views' GROUP BY over every dimension, the parts they write and
// the merges (see BenchmarkStoreInsert).
package store
