package store

import (
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"
)

// Acknowledge inserts every flow written so far and waits until the engine has them, like
// Flush, and also fails when batches were dropped for a full queue since the previous call: a
// split collector's outlet commits the Kafka offsets of the flows a sink acknowledged, so a
// drop must make it consume them again.
func (s *Sink) Acknowledge(context.Context) error {
	if err := s.Flush(); err != nil {
		return err
	}
	var m dto.Metric
	if err := s.m.droppedFull.Write(&m); err != nil {
		return err
	}
	dropped := m.GetCounter().GetValue()
	s.ackMu.Lock()
	prev := s.ackDropped
	s.ackDropped = dropped
	s.ackMu.Unlock()
	if dropped > prev {
		return fmt.Errorf("store: insert queue full, %.0f flows dropped", dropped-prev)
	}
	return nil
}
