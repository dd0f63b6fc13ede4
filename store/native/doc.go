// Package native converts the collector's encoded flows into blocks of ClickHouse's Native
// format for the embedded sink's INSERTs (Encoder), sorted by the flows table's key so that
// the engine need not sort them, and groups them by the finest aggregated table's
// dimensions (Aggregator), the sink's pre-aggregation. Neither allocates per flow.
package native
