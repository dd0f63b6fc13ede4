package geoip

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Databases are the configured files, read into a Layer at start and again when one of them
// changes (its size or modification time, checked every check-interval): the new layer is
// handed to the subscriber while the old one keeps serving, so no flow waits or is dropped.
type Databases struct {
	cfg     Configuration
	log     *slog.Logger
	metrics *metrics

	mu       sync.Mutex // one load at a time
	layer    atomic.Pointer[Layer]
	stamps   []stamp // what each file looked like at the last load attempt
	onChange func(*Layer)
	failed   atomic.Pointer[error] // the last load's error; nil once a load succeeds
	stop     chan struct{}
	done     chan struct{}
}

// stamp is what a poll sees of a file.
type stamp struct {
	exists bool
	size   int64
	mtime  time.Time
}

// New returns the databases of cfg, not read yet. Metrics go to reg.
func New(reg prometheus.Registerer, cfg Configuration, logger *slog.Logger) (*Databases, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	d := &Databases{cfg: cfg, log: logger.With("component", "geoip"), stamps: make([]stamp, len(cfg.Databases))}
	d.metrics = newMetrics(reg, d)
	return d, nil
}

// Start reads the databases, calls onChange with their layer, and then checks the files
// every check-interval, calling onChange (from its own goroutine) with each new layer. A
// missing or unreadable database is an error unless optional is set.
func (d *Databases) Start(onChange func(*Layer)) error {
	d.mu.Lock()
	d.onChange = onChange
	d.mu.Unlock()
	if _, err := d.Check(); err != nil {
		return err
	}
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.poll()
	return nil
}

func (d *Databases) poll() {
	defer close(d.done)
	t := time.NewTicker(d.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			// Errors are logged and counted by Check; the old layer keeps serving.
			_, _ = d.Check()
		}
	}
}

// Stop stops checking the files.
func (d *Databases) Stop() {
	if d.stop != nil {
		close(d.stop)
		<-d.done
		d.stop = nil
	}
}

// Err returns the error of the last load, or nil when it succeeded: the previous layer, if
// any, still serves until the files read again.
func (d *Databases) Err() error {
	if p := d.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Layer returns the current layer (nil before the first load).
func (d *Databases) Layer() *Layer { return d.layer.Load() }

// Check looks at the files and, when one changed since the last attempt (or on the first
// call), reads them all into a new layer and hands it to the subscriber. It tells whether a
// new layer was made. On error the previous layer stays.
func (d *Databases) Check() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := make([]stamp, len(d.cfg.Databases))
	old := d.layer.Load()
	changed := old == nil
	for i, path := range d.cfg.Databases {
		st, err := os.Stat(path)
		if err == nil {
			now[i] = stamp{exists: true, size: st.Size(), mtime: st.ModTime()}
		}
		changed = changed || now[i] != d.stamps[i]
	}
	if !changed {
		return false, nil
	}
	d.stamps = now
	start := time.Now()
	var dbs []*Database
	for _, path := range d.cfg.Databases {
		db, err := Open(path)
		if err != nil {
			d.metrics.errors.Inc()
			// An optional file is skipped when it is missing, or unreadable at start; a file
			// that fails once loaded (being rewritten, say) keeps the previous data.
			if d.cfg.Optional && (old == nil || errors.Is(err, fs.ErrNotExist)) {
				d.log.Warn("optional GeoIP database skipped", "error", err)
				continue
			}
			err = fmt.Errorf("geoip: %w", err)
			if old != nil {
				d.log.Warn("cannot read a changed database; the previous data stays", "error", err)
			}
			d.failed.Store(&err)
			return false, err
		}
		dbs = append(dbs, db)
	}
	layer, err := NewLayer(dbs)
	if err != nil {
		d.metrics.errors.Inc()
		err = fmt.Errorf("geoip: %w", err)
		if old != nil {
			d.log.Warn("cannot read a changed database; the previous data stays", "error", err)
		}
		d.failed.Store(&err)
		return false, err
	}
	d.layer.Store(layer)
	d.failed.Store(nil)
	d.metrics.reloads.Inc()
	if layer.Invalid > 0 {
		// Once per load, not per record.
		d.metrics.invalid.Add(float64(layer.Invalid))
		d.log.Warn("GeoIP values left out: a country that is not two letters, or a state or city too long",
			"values", layer.Invalid, "max-length", MaxValueLen)
	}
	attrs := []any{"databases", len(dbs), "networks", layer.Size(), "records", layer.Records,
		"duration", time.Since(start).Round(time.Millisecond)}
	for _, db := range dbs {
		attrs = append(attrs, db.Path, db.Type+" ("+db.Layout.String()+")")
	}
	d.log.Info("GeoIP databases loaded", attrs...)
	if d.onChange != nil {
		d.onChange(layer)
	}
	return true, nil
}
