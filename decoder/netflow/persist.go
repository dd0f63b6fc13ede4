package netflow

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"flowzero/internal/atomicfile"
)

// persistFormat names the templates file format (see the package documentation).
const persistFormat = "flowzero-netflow-templates/1"

type persistFile struct {
	Format   string           `json:"format"`
	Saved    time.Time        `json:"saved"`
	Sessions []persistSession `json:"sessions"`
}

type persistSession struct {
	Exporter  string            `json:"exporter"`
	Templates []persistTemplate `json:"templates"`
	Samplers  []persistSampler  `json:"samplers,omitempty"`
}

type persistTemplate struct {
	Version uint16 `json:"version"`
	Domain  uint32 `json:"domain"`
	Options bool   `json:"options"`
	// Record is the template record exactly as the exporter sent it (RFC 3954 §5.2/§6.1
	// or RFC 7011 §3.4.1/§3.4.2), in hexadecimal.
	Record string `json:"record"`
}

type persistSampler struct {
	Version uint16 `json:"version"`
	Domain  uint32 `json:"domain"`
	Sampler uint64 `json:"sampler"`
	Rate    uint64 `json:"rate"`
}

type persistState struct {
	stop chan struct{}
	done sync.WaitGroup
	// saveFailed is set when a save fails after marking the sessions saved, so that dirty
	// reports a change and the next periodic save tries again.
	saveFailed atomic.Bool
	// onError is told of each failed periodic save, for the component running the decoder
	// to log (decoders do not log).
	onError func(error)
}

// OnSaveError sets a function told of each failed periodic save of the templates file
// (failures are also counted); call it before Start.
func (d *Decoder) OnSaveError(fn func(error)) {
	d.persist.onError = fn
}

// Start loads the templates file, when configured, and saves it periodically while
// templates change.
func (d *Decoder) Start() error {
	if d.cfg.TemplatesFile == "" {
		return nil
	}
	if err := d.LoadTemplates(d.cfg.TemplatesFile); err != nil && !os.IsNotExist(err) {
		return err
	}
	d.persist.stop = make(chan struct{})
	d.persist.done.Add(1)
	go func() {
		defer d.persist.done.Done()
		t := time.NewTicker(d.cfg.TemplatesSaveInterval)
		defer t.Stop()
		for {
			select {
			case <-d.persist.stop:
				return
			case <-t.C:
				if !d.dirty() {
					continue
				}
				// A failed save is retried at the next tick and at Stop.
				if err := d.SaveTemplates(d.cfg.TemplatesFile); err != nil && d.persist.onError != nil {
					d.persist.onError(err)
				}
			}
		}
	}()
	return nil
}

// Stop stops the periodic save and saves the templates one last time.
func (d *Decoder) Stop() error {
	if d.cfg.TemplatesFile == "" || d.persist.stop == nil {
		return nil
	}
	close(d.persist.stop)
	d.persist.done.Wait()
	d.persist.stop = nil
	return d.SaveTemplates(d.cfg.TemplatesFile)
}

// dirty reports whether a periodic save is due: a session changed, or the last save failed.
func (d *Decoder) dirty() bool {
	if d.persist.saveFailed.Load() {
		return true
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, e := range d.exporters {
		e.mu.Lock()
		dirty := e.dirty
		e.mu.Unlock()
		if dirty {
			return true
		}
	}
	return false
}

// SaveTemplates writes every session's templates and learned sampling rates to path
// (atomically: a temporary file renamed over it). A failure is counted, and the decoder
// stays marked as changed so that the next periodic save tries again.
func (d *Decoder) SaveTemplates(path string) (err error) {
	// Cleared before the sessions are read, not after the write: a save that started
	// earlier and fails later must leave it set.
	d.persist.saveFailed.Store(false)
	defer func() {
		if err != nil {
			d.metrics.saveErrors.Inc()
			d.persist.saveFailed.Store(true)
		}
	}()
	out := persistFile{Format: persistFormat, Saved: time.Now().UTC()}
	d.mu.RLock()
	for ap, e := range d.exporters {
		e.mu.Lock()
		s := persistSession{Exporter: ap.String()}
		for k, t := range e.templates {
			s.Templates = append(s.Templates, persistTemplate{
				Version: k.version, Domain: k.domain, Options: t.options,
				Record: hex.EncodeToString(t.wire),
			})
		}
		for k, rate := range e.samplers {
			s.Samplers = append(s.Samplers, persistSampler{Version: k.version, Domain: k.domain, Sampler: k.id, Rate: rate})
		}
		e.dirty = false
		e.mu.Unlock()
		sort.Slice(s.Templates, func(i, j int) bool { return s.Templates[i].Record < s.Templates[j].Record })
		sort.Slice(s.Samplers, func(i, j int) bool {
			a, b := s.Samplers[i], s.Samplers[j]
			if a.Domain != b.Domain {
				return a.Domain < b.Domain
			}
			return a.Sampler < b.Sampler
		})
		out.Sessions = append(out.Sessions, s)
	}
	d.mu.RUnlock()
	sort.Slice(out.Sessions, func(i, j int) bool { return out.Sessions[i].Exporter < out.Sessions[j].Exporter })
	data, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".netflow-templates-*")
	if err != nil {
		return fmt.Errorf("netflow: saving templates: %w", err)
	}
	// The data is synced before the rename and the directory after it, so that a crash
	// leaves the old file or the new one. The directory must exist: it is not created.
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(path))
	} else {
		os.Remove(tmp.Name())
	}
	if err != nil {
		return fmt.Errorf("netflow: saving templates: %w", err)
	}
	return nil
}

// LoadTemplates reads a file written by SaveTemplates. Each template record goes through the
// same parser as a template set received from the network, so a bad file cannot install a
// template that the wire could not.
func (d *Decoder) LoadTemplates(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return d.loadTemplates(data, path)
}

// loadTemplates loads the content of a templates file; path is for the errors.
func (d *Decoder) loadTemplates(data []byte, path string) error {
	var in persistFile
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("netflow: templates file %s: %w", path, err)
	}
	if in.Format != persistFormat {
		return fmt.Errorf("netflow: templates file %s: format %q, want %q", path, in.Format, persistFormat)
	}
	for _, s := range in.Sessions {
		ap, err := netip.ParseAddrPort(s.Exporter)
		if err != nil {
			return fmt.Errorf("netflow: templates file %s: %w", path, err)
		}
		// A session saved had templates: it is established, and idle until it sends again.
		e, err := d.session(ap, 0)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.unproven.remove(e)
		e.established.Store(true)
		d.mu.Unlock()
		e.mu.Lock()
		for _, t := range s.Templates {
			rec, err := hex.DecodeString(t.Record)
			if err != nil || (t.Version != 9 && t.Version != 10) {
				e.mu.Unlock()
				return fmt.Errorf("netflow: templates file %s: bad template record for %s", path, s.Exporter)
			}
			c := decodeContext{d: d, e: e, version: t.Version, domain: t.Domain}
			setID := uint16(v9TemplateSetID)
			switch {
			case t.Version == 9 && t.Options:
				setID = v9OptionsTemplateSetID
			case t.Version == 10 && t.Options:
				setID = ipfixOptionsSetID
			case t.Version == 10:
				setID = ipfixTemplateSetID
			}
			_ = c.templateSet(setID, rec, t.Options) // errors are counted
		}
		for _, sm := range s.Samplers {
			if sm.Rate == 0 {
				continue
			}
			k := samplerKey{sm.Version, sm.Domain, sm.Sampler}
			if !putBounded(e.samplers, k, sm.Rate, d.cfg.MaxSamplersPerExporter) {
				e.m.errors[reasonTooManySamplers].Inc()
			}
		}
		e.dirty = false
		e.mu.Unlock()
	}
	return nil
}
