// Package store keeps flows in ClickHouse: the tables generated from the schema, their
// migrations, and the embedded engine (chDB) that makes one machine work without a server.
//
// # Design
//
// One SQL dialect everywhere. DDL generates the statements for a schema and a configuration:
// the flows table (MergeTree, daily partitions, Akvorado's sorting key, TTL dropping whole
// parts), aggregated tables per resolution (SummingMergeTree over the dimensions that make
// sense summed, their own TTL) fed by cascading materialized views (flows → 1m → 5m → 1h: only
// the finest view groups, the others round the time and their table sums on merge; with the
// embedded engine the sink fills the finest table itself), dictionaries (protocol names built
// in, AS names from an HTTP CSV), and for the Kafka path a Kafka engine table on flows-<hash> with the
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
// lower. The finest resolution's GROUP BY is done in Go as well (embedded.pre-aggregate, see
// aggregate.go): the encoder's blocks are grouped into a hash table while they are built and
// the sums are inserted straight into flows_1m, whose view from the flows table the
// migration drops (the views from flows_1m to the coarser tables stay). That view cost the
// engine ~1.2 µs per flow, serializing every row's ~48 keys; the Go grouping costs ~0.15 µs
// (BenchmarkStoreAggregate) and the sink went from ~400k to ~610k flows per CPU-second
// (BenchmarkStoreInsert, table=sink-view and table=sink). Blocks leave out the columns empty
// in all their rows, and the conversion takes each field with one table lookup (native.go):
// ~+12% for the sink. What remains per flow is the flows part (sort, compress, write), the
// engine reading the blocks, the aggregated tables' parts, and merges, which
// BenchmarkStoreInsert hardly sees (a few parts per run) but which rewrite every flow's
// part again: an OPTIMIZE FINAL of 8 parts of 0.5M demo flows into one costs the engine
// ~2.3 µs per flow, more than inserting them.
package store
