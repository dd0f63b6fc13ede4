package rib

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// New returns the RIB component: an empty table with metrics registered on reg (nil for
// none). Start loads the snapshot; MRT files and BMP feed it afterwards.
func New(reg prometheus.Registerer, cfg Configuration) (*RIB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := NewTable(cfg)
	if err := r.registerMetrics(reg); err != nil {
		return nil, fmt.Errorf("rib metrics: %w", err)
	}
	return r, nil
}

// Start loads the snapshot file when configured and present, then saves it every
// SnapshotInterval in the background. A missing snapshot is not an error; a corrupt one is
// logged and counted, and the RIB starts empty.
func (r *RIB) Start() error {
	if r.cfg.Snapshot == "" {
		return nil
	}
	start := time.Now()
	switch err := r.LoadSnapshotFile(r.cfg.Snapshot); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		slog.Warn("RIB snapshot not loaded", "error", err)
	default:
		st := r.Stats()
		slog.Info("RIB snapshot loaded", "file", r.cfg.Snapshot, "prefixes", st.Prefixes4+st.Prefixes6,
			"routes", st.Routes, "duration", time.Since(start).Round(time.Millisecond))
	}
	r.stop = make(chan struct{})
	if r.cfg.SnapshotInterval > 0 {
		r.wg.Add(1)
		go r.saveLoop(r.cfg.SnapshotInterval)
	}
	return nil
}

func (r *RIB) saveLoop(every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.SaveSnapshotFile(r.cfg.Snapshot); err != nil {
				slog.Warn("RIB snapshot not saved", "error", err)
			}
		}
	}
}

// Stop ends the background saves and writes a last snapshot.
func (r *RIB) Stop() error {
	if r.cfg.Snapshot == "" || r.stop == nil {
		return nil
	}
	close(r.stop)
	r.wg.Wait()
	r.stop = nil
	return r.SaveSnapshotFile(r.cfg.Snapshot)
}
