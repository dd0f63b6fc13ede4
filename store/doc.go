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
// schema's .proto and the view moving its rows into the flows table. The records that table
// cannot parse do not stop it (kafka_handle_error_mode = 'stream'): a second view keeps each
// in flows_kafka_errors for a day (kafkaErrorsTTL), with its topic, partition, offset, the
// engine's error, its size and its first 4 KiB. The engine rejects a record whole, so one
// malformed message costs the flows of its record. With a cluster name the
// same objects become Replicated*MergeTree tables behind Distributed ones, created ON CLUSTER.
//
// The statements run unchanged on a ClickHouse server (HTTPClient, its HTTP interface) and in
// the embedded engine (Embedded over store/chdb). Migrator compares what exists with what the
// DDL wants; every object carries its statement's fingerprint as COMMENT, which makes
// migrations idempotent and lets data tables be altered in place (ADD COLUMN, TTL) while
// objects without data are replaced. A server gets its flows from the collector's Kafka
// output through the Kafka table; the Sink writes to the embedded engine only.
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
// ~+12% for the sink.
//
// The encoder also hands the engine each batch sorted by the flows table's key
// (batchSorter, sortkey.go): the engine checks whether a block is sorted before it sorts it,
// and its sort, with the writing of every column through the permutation (the ~30 columns
// it fills with defaults included), cost it ~0.3 µs per flow. In Go the sort costs ~175 ns
// per flow (BenchmarkStoreNativeEncode, impl=native against impl=native-unsorted): ~75 ns
// to code the key and radix-sort it (BenchmarkBatchSorter), ~100 ns to write the block's
// columns through the permutation. The sink went from ~800k to ~950k flows per CPU-second
// (BenchmarkStoreInsert table=sink, binaries alternated 5 times, medians 804k and 947k;
// without the engine's merge threads 843k and 1.00M). Tried first and not kept: sorting the
// messages before converting them, which needs a second parse of every message for its key
// (~240 ns per flow) and, converted in key order, a cache miss per message (~160 ns)
// unless they are copied first.
//
// The grouping's keys hold only the dimensions set since the groups were reset
// (nativeAggregator.activate): 13 of the default 48 in the demo traffic, ~80 bytes instead of
// ~230 to hash, compare and keep in the cache. The grouping went from ~115 to ~85 ns per flow
// (BenchmarkStoreAggregate) and the sink from ~940k to ~980k flows per CPU-second, ~990k to
// ~1.03M without the merge threads (BenchmarkStoreInsert table=sink, binaries alternated 5
// times, medians). Tried and not kept: breaking the key's ties by the other dimensions in
// the radix sort (with dense codes for sparse integers), so that a group's rows come together
// and a row equal to the previous one skips the hash table: the grouping saved ~45 ns per
// flow and the sort cost ~55 ns more; a cache-conscious two-pass gather of the columns
// through the permutation, slower than the plain gather except for 16-byte values.
//
// The groups' block goes sorted by the aggregated tables' key as well (aggsort.go: the
// dimensions coded into integers of just the bits the groups need, radix-sorted), so the
// engine skips its sort of flows_1m's block and, when the groups share a minute, of the
// flows_5m and flows_1h views' blocks. In the engine's counters that sort took ~30 ns per
// flow (MergeTreeDataWriterSortingBlocksMicroseconds 0.080 to 0.069 µs per flow, the
// queries' user time 0.38 to 0.35 µs); in Go the profile puts it at ~13 ns per flow at
// the per-batch groups of BenchmarkStoreAggregate (0.076 groups per flow), about half that
// at the sink's 30 s groups. The sink went from ~971k to ~982k flows per CPU-second, ~1.016M
// to ~1.023M without the merge threads (BenchmarkStoreInsert table=sink, binaries
// alternated in four sessions, 20 and 24 runs, medians): within this machine's noise
// (±5% between sessions), in the direction the counters give.
//
// The engine still checks that every block is sorted, comparing neighbouring rows key
// column by key column up to the first that differs. The aggregated tables' key is ~48
// columns: the flows table's (the primary key) and then every other dimension, an order
// that only SummingMergeTree needs. That free part now puts the numbers first and the
// LowCardinality strings last, so that groups differing in an interface or the AS path
// are told apart before the ~30 string columns, empty in every group without the metadata
// they carry, are compared. The check went from 0.070 to 0.050 µs per flow
// (MergeTreeDataWriterSortingBlocksMicroseconds) and the sink from ~991k to ~1.042M flows
// per CPU-second (BenchmarkStoreInsert table=sink, binaries alternated 5 times, medians;
// faster in every pair, +2 to +7%). Existing tables keep their key (migrations only add
// columns at its end): the sink reads the key the table has and sorts the groups by it
// (DDL.preAggregatedKeyDims).
//
// The flows' key codes UInt32 values by their rank among the batch's values when that takes
// fewer bits than their range (sortPart.densify): in the demo traffic two ETypes took 15
// bits and a few AS numbers 16 each, and the key went from 55 bits to 13, from five radix
// passes to two; its parts are packed 1024 rows at a time. BenchmarkStoreNativeEncode
// impl=native went from ~378 to ~370 ns per flow, the sink from ~998k to ~1.034M flows per
// CPU-second (BenchmarkStoreInsert table=sink, 4 alternated pairs, medians; faster in 3).
// Tried and not kept: radix digits of even width (as many passes, smaller counters),
// slower; a branch-free 8-byte varint decoder in pbwire, slower on these 2- and 3-byte
// varints than the loop the branch predictor learns.
//
// The groups are also summed over successive batches, for embedded.pre-aggregate-interval
// (30 s by default) of traffic, before one INSERT: a collector below ~100k flows/s cuts a
// batch every flush-interval (5 s by default), and every batch would otherwise insert the
// same minute's groups again, to be summed once more by merges. With the batches of the
// demo's 20k flows/s (BenchmarkStoreInsert, same runs): 5 s batches went from ~196k flows
// per CPU-second unsummed to ~268k summed for 10 s (table=sink-5s-unsummed and
// table=sink-5s), 2 s batches from ~109k to ~223k; summing for 30 s instead of 10 s gave
// another +33% and +46% (~275k to ~366k, ~216k to ~314k, binaries alternated 5 times).
// Full 64 MiB batches, which hold more than 30 s of that traffic, are inserted each with
// their groups as before. The aggregated tables then lag the flows table by up to the
// interval, and a failed flows INSERT drops the pending groups with it (they hold the
// failed batch too), so that they never count a flow the flows table lacks. Pending groups
// go in early once they take 64 MiB (~250k groups of up to ~250 bytes), so that traffic with
// many distinct dimensions cannot grow the sink without bound.
//
// Where an insert's CPU went before the sort in Go (64 MiB batches, the engine's own
// counters in system.events and Go's profile): ~0.35 µs per flow in Go (Native conversion
// ~0.23, grouping ~0.15); in the engine, ~0.2 µs sorting the blocks by the tables' keys
// (almost all for the flows table), the rest parsing the Native input, filling the absent
// columns' defaults and compressing the parts. With the sort in Go, the engine's check of
// the flows block and its sort of the aggregated tables' take ~0.07 µs. Measured and not
// kept: ordering the flows table by TimeReceived alone, which the batches already follow,
// gained only ~9%; LZ4 instead of ZSTD(1) for the addresses, +5% but 21.8 bytes per flow
// on disk; the engine's automatic column statistics off (the table setting auto_statistics_types empty), no
// change to inserts and +5% for merges, not significant; wide parts from 64 MiB, -13% for
// inserts and +7% sustained (3 runs each).
//
// Merges cost more than inserts. BenchmarkStoreInsert's table=sink variant inserts 1M flows
// and barely merges; table=sink-sustained feeds 8M flows with advancing times and waits until
// the background merges have settled, all CPU of the process counted (the merge threads are
// the engine's, in this process: ~6-7 CPU-s of them run after the last insert). With 64 MiB
// batches the sustained rate was ~280k flows per CPU-second (~470k flows/s on 2 cores),
// against ~580k for the insert alone in the same run: perf puts 54% of the process's CPU in
// the engine's merge threads and 17% in its insert pipelines. Merges are vertical: the sort
// key columns are merged first, then each other column is gathered on its own, which from
// compact parts means reading the part once per column (~700 bytes read per flow for ~22
// compressed); still, horizontal merges (vertical off, or every part compact) cost ~20%
// more in single runs. Each merged row costs the engine ~1.5 µs, about as much as inserting
// it, and every flow is merged again at each level of the part tree (1.2 merged rows per flow in this run;
// more with a day's worth of parts). Batches of 128 MiB (embedded.batch-bytes) make parts of
// ~1M flows: sustained ~390k flows per CPU-second (+39%, same-run A/B), ~550k flows/s, 18.6
// bytes per flow on disk as merged; but 16 parts were left in all tables instead of 8, so
// part of the gain is merges put off, not saved, and the sink then holds about 5 × 128 MiB.
// The default stays 64 MiB; a machine with memory to spare can raise it. Measured and not
// kept (no gain, or wall time lost): sparse serialization off, merge_max_block_size 65536,
// the StochasticSimple selector, merge_selector_base 10 (+10% per CPU-second, not
// significant, -17% flows/s as the last merge runs alone, and more parts).
package store
