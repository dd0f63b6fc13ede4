// Package bench holds flowzero's comparative benchmarks against peers (vtprotobuf, easyproto,
// GoFlow2, gobgp, bart, msgpack...). It is a separate Go module so that the main module never
// depends on the peers. Each area has its own sub-package; `make bench` runs them all and
// prints benchstat tables.
package bench
