package snmp

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"time"

	"flowzero/internal/atomicfile"
)

// persistFormat names the cache file format: a JSON object with the exporters' sysNames and
// interfaces, and when each was last polled.
const persistFormat = "flowzero-snmp-cache/1"

// maxPersistSize bounds the cache file read at start (about 200 bytes per interface).
const maxPersistSize = 256 << 20

var errNotExist = fs.ErrNotExist

type persistFile struct {
	Format    string            `json:"format"`
	Saved     time.Time         `json:"saved"`
	Exporters []persistExporter `json:"exporters"`
}

type persistExporter struct {
	Exporter   string             `json:"exporter"`
	Name       string             `json:"name"`
	NamePolled bool               `json:"name-polled"`
	Interfaces []persistInterface `json:"interfaces"`
}

type persistInterface struct {
	Index       uint32    `json:"index"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Speed       uint32    `json:"speed"`
	Found       bool      `json:"found"`
	Polled      time.Time `json:"polled"`
}

// Save writes the cache to path atomically and durably (a temporary file synced, renamed
// over it, then the directory synced).
func (c *Cache) Save(path string) (err error) {
	defer func() {
		if err != nil {
			c.metrics.saveErrors.Inc()
		}
	}()
	out := persistFile{Format: persistFormat, Saved: c.clock.Now().UTC()}
	c.mu.Lock()
	for a, e := range c.exporters {
		if len(e.entries) == 0 && !e.namePolled {
			continue
		}
		pe := persistExporter{Exporter: a.String(), Name: e.sysName, NamePolled: e.namePolled}
		for index, en := range e.entries {
			pe.Interfaces = append(pe.Interfaces, persistInterface{
				Index: index, Name: en.iface.Name, Description: en.iface.Description,
				Speed: en.iface.Speed, Found: en.found, Polled: en.polled.UTC(),
			})
		}
		slices.SortFunc(pe.Interfaces, func(a, b persistInterface) int { return cmp.Compare(a.Index, b.Index) })
		out.Exporters = append(out.Exporters, pe)
	}
	c.dirty = false
	c.mu.Unlock()
	slices.SortFunc(out.Exporters, func(a, b persistExporter) int {
		return netip.MustParseAddr(a.Exporter).Compare(netip.MustParseAddr(b.Exporter))
	})
	defer func() {
		if err != nil {
			c.mu.Lock()
			c.dirty = true // try again at the next check
			c.mu.Unlock()
		}
	}()
	data, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return err
	}
	if err = atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("snmp: saving the cache: %w", err)
	}
	return nil
}

// Load reads a file written by Save into the cache and returns how many interfaces it
// added. Entries that do not validate are skipped, counted, and the first one is named in
// the error returned with what was loaded. An interface is considered used at load time,
// and is polled again when its answer is older than cache-refresh.
func (c *Cache) Load(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() > maxPersistSize {
		c.metrics.loadErrors.Inc()
		return 0, fmt.Errorf("%s: larger than %d bytes", path, maxPersistSize)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return 0, err
	}
	n, err := c.load(data)
	if err != nil {
		return n, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// maxLoggedBadEntries bounds the lines logged for the bad entries of one cache file.
const maxLoggedBadEntries = 10

// load reads the file's format first, then each exporter and interface on its own, so that
// one bad entry costs only itself.
func (c *Cache) load(data []byte) (int, error) {
	var head struct {
		Format    json.RawMessage `json:"format"`
		Exporters json.RawMessage `json:"exporters"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		c.metrics.loadErrors.Inc()
		return 0, err
	}
	var format string
	if err := json.Unmarshal(head.Format, &format); err != nil || format != persistFormat {
		c.metrics.loadErrors.Inc()
		got := string(head.Format)
		switch {
		case got == "":
			got = "missing"
		case len(got) > 64:
			got = got[:64] + "..."
		}
		return 0, fmt.Errorf("format %s, want %q", got, persistFormat)
	}
	var exporters []json.RawMessage
	if len(head.Exporters) > 0 {
		if err := json.Unmarshal(head.Exporters, &exporters); err != nil {
			c.metrics.loadErrors.Inc()
			return 0, fmt.Errorf("exporters: not a list")
		}
	}
	now := c.clock.Now()
	var first error
	skipped := 0
	bad := func(err error) {
		c.metrics.loadErrors.Inc()
		if first == nil {
			first = err
		}
		if skipped++; skipped <= maxLoggedBadEntries {
			c.log.Warn("SNMP cache file: entry skipped", "error", err)
		}
	}
	loaded := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, raw := range exporters {
		var pe struct {
			Exporter   string            `json:"exporter"`
			Name       string            `json:"name"`
			NamePolled bool              `json:"name-polled"`
			Interfaces []json.RawMessage `json:"interfaces"`
		}
		if err := json.Unmarshal(raw, &pe); err != nil {
			bad(fmt.Errorf("exporters[%d]: %v", i, err))
			continue
		}
		a, err := netip.ParseAddr(pe.Exporter)
		if err != nil || a.Zone() != "" {
			bad(fmt.Errorf("exporters[%d].exporter: not an address: %q", i, pe.Exporter))
			continue
		}
		e := c.exporter(a.Unmap())
		if e == nil {
			bad(fmt.Errorf("exporters[%d]: more than %d exporters", i, maxExporters))
			break
		}
		if pe.NamePolled && !e.namePolled {
			e.sysName, e.namePolled = clean(pe.Name), true
		}
		for j, raw := range pe.Interfaces {
			var pi persistInterface
			if err := json.Unmarshal(raw, &pi); err != nil {
				bad(fmt.Errorf("exporters[%d].interfaces[%d]: %v", i, j, err))
				continue
			}
			switch {
			case pi.Polled.After(now.Add(time.Minute)):
				// A clock moved back, or a bad file: due for a refresh.
				pi.Polled = now.Add(-c.cfg.CacheRefresh)
			case pi.Polled.IsZero():
				bad(fmt.Errorf("exporters[%d].interfaces[%d].polled: missing", i, j))
				continue
			}
			if _, ok := e.entries[pi.Index]; ok {
				continue // polled since start, or listed twice
			}
			e.entries[pi.Index] = &entry{
				iface: Interface{Name: clean(pi.Name), Description: clean(pi.Description), Speed: pi.Speed},
				found: pi.Found, polled: pi.Polled, used: now,
			}
			c.entries++
			c.metrics.entries.Inc()
			loaded++
		}
	}
	if skipped > maxLoggedBadEntries {
		c.log.Warn("SNMP cache file: more entries skipped", "not-logged", skipped-maxLoggedBadEntries)
	}
	c.metrics.loads.Inc()
	return loaded, first
}
