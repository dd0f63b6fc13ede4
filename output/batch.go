// Package output defines what the collector hands to its sinks: batches of length-delimited
// protobuf flow messages, pooled and reference-counted so that one batch can go to several
// sinks (Kafka, file, stdout, store) without being copied, and nothing is allocated per flow.
//
// A worker appends each finalized flow to its current Batch; when the batch reaches its size
// limit or its age limit, the worker hands it to every sink with Send. A sink that cannot take
// it (queue or buffer full) drops it and counts the flows it held: the UDP path never blocks
// on a slow sink.
package output

import "sync/atomic"

// Batch is a run of length-delimited flow messages (each a varint length then the message).
type Batch struct {
	// Data holds the messages back to back.
	Data []byte
	// Flows is the number of messages in Data.
	Flows int
	// Key is the Kafka record key for the batch (the exporter address when keyed by exporter),
	// or nil.
	Key []byte

	refs atomic.Int32
	pool *BatchPool
}

// Append adds one length-delimited message (as returned by schema.FlowMessage.Finalize).
func (b *Batch) Append(msg []byte) {
	b.Data = append(b.Data, msg...)
	b.Flows++
}

// Retain adds n references: call it once per sink before handing the batch out.
func (b *Batch) Retain(n int) { b.refs.Add(int32(n)) }

// Release drops one reference; the last one returns the batch to its pool.
func (b *Batch) Release() {
	if n := b.refs.Add(-1); n == 0 && b.pool != nil {
		b.pool.put(b)
	} else if n < 0 {
		panic("output: batch released more times than retained")
	}
}

// BatchPool recycles batches of one capacity. It is a bounded free list rather than a
// sync.Pool so that a steady state allocates nothing, deterministically (sync.Pool may drop
// entries at any GC).
type BatchPool struct {
	size int
	free chan *Batch
}

// NewBatchPool returns a pool of batches whose Data has capacity size bytes, keeping up to
// keep idle batches.
func NewBatchPool(size, keep int) *BatchPool {
	return &BatchPool{size: size, free: make(chan *Batch, keep)}
}

// Get returns an empty batch holding one reference.
func (bp *BatchPool) Get() *Batch {
	var b *Batch
	select {
	case b = <-bp.free:
	default:
		b = &Batch{Data: make([]byte, 0, bp.size), pool: bp}
	}
	b.refs.Store(1)
	return b
}

// Size is the byte capacity of the pool's batches.
func (bp *BatchPool) Size() int { return bp.size }

func (bp *BatchPool) put(b *Batch) {
	if cap(b.Data) > 4*bp.size { // a batch that grew for one huge message is not kept
		return
	}
	b.Data = b.Data[:0]
	b.Flows = 0
	b.Key = b.Key[:0]
	select {
	case bp.free <- b:
	default:
	}
}

// Sink receives batches. Send must not block: it either queues the batch (and later calls
// Release) or drops it, counts the drop, and releases it at once.
type Sink interface {
	// Name identifies the sink in metrics and logs.
	Name() string
	// Send queues a batch; it returns false when the batch was dropped.
	Send(b *Batch) bool
	// Start starts the sink's goroutines.
	Start() error
	// Stop delivers or counts everything queued, then stops.
	Stop() error
}
