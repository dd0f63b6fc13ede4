// Package state shares the NetFlow/IPFIX decoder state between the outlets of a split
// collector (mode: outlet) through a compacted Kafka topic: every template, options template,
// withdrawal, sampling rate and system init time that an outlet's decoder learns from a
// datagram is published (netflow.Observer), keyed by exporter session (address and port),
// NetFlow version, observation domain and template or sampler ID, and every outlet applies
// every record of the topic (netflow.Decoder.ApplyState). Any outlet can then decode any
// exporter's datagrams, whichever partition of the datagrams topic they come through.
//
// The topic has one partition, so that every outlet applies the records in the same order;
// compaction keeps the latest record of each key, so the topic stays as small as the state
// itself. An outlet reads it from the start to its end before it consumes datagrams (Start),
// then follows it. Applying a record the decoder already holds changes nothing, and a
// definition from an older datagram never replaces a newer one (the receive times are the
// inlets'), so the outlets converge to the same state whatever the order they learned it in.
// docs/scaling.md says what that order means for the datagrams decoded meanwhile.
package state
