package outlet

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"flowzero/output"
)

// acknowledgeSink waits until the batches sent to s so far are delivered, and says whether some
// were not. The usual sinks are adapted by the methods they have: Acknowledger; Flush() error
// (a store without Acknowledge: its inserts are done, the error is the first failed one);
// Flush(ctx) error with Counts (the Kafka output: the producer's buffer is empty, and no
// flow was dropped since the previous call); Flush() (the file output: the file has them).
// Other sinks (stdout, summary) have nothing to wait for.
func (o *Outlet) acknowledgeSink(ctx context.Context, sink output.Sink) error {
	switch s := sink.(type) {
	case Acknowledger:
		return s.Acknowledge(ctx)
	case interface{ Flush() error }:
		return s.Flush()
	case interface {
		Flush(context.Context) error
		Counts() (sent, delivered, dropped int64)
	}:
		if err := s.Flush(ctx); err != nil {
			return err
		}
		_, _, dropped := s.Counts()
		prev, seen := o.lastDropped[sink]
		o.lastDropped[sink] = dropped
		if !seen {
			prev = o.droppedAtStart[sink]
		}
		if dropped > prev {
			return fmt.Errorf("%d flows dropped", dropped-prev)
		}
	case interface{ Flush() }:
		s.Flush()
	}
	return nil
}

func kerrOf(code int16) error { return kerr.ErrorForCode(code) }
