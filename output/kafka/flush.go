package kafka

import "context"

// Flush waits until every batch sent before the call is delivered or dropped (see Counts),
// or ctx ends. A split collector's outlet calls it before committing the offsets of the
// datagrams whose flows it sent.
func (s *Sink) Flush(ctx context.Context) error { return s.client.Flush(ctx) }
