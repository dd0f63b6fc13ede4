package networks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// source fetches one network source, keeps its last good answer on disk and hands its
// entries over when they change.
type source struct {
	name     string
	cfg      SourceConfiguration
	client   *http.Client
	log      *slog.Logger
	metrics  *sourceMetrics
	onChange func(name string, entries []Entry)

	mu   sync.Mutex // one fetch at a time
	last [sha256.Size]byte
	stop chan struct{}
	done chan struct{}
}

// errBodyTooLarge is an answer past max-size.
var errBodyTooLarge = errors.New("answer larger than max-size")

// loadCache reads the last good answer kept on disk; it tells whether there was one.
func (s *source) loadCache() bool {
	b, err := os.ReadFile(s.cfg.CacheFile)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err == nil {
		err = s.apply(b, false)
	}
	if err != nil {
		s.metrics.errors.Inc()
		s.log.Warn("cannot use the cached copy of a network source", "file", s.cfg.CacheFile, "error", err)
		return false
	}
	s.log.Info("network source read from its cached copy", "file", s.cfg.CacheFile)
	return true
}

// refresh fetches the source and applies a changed answer. On error the previous entries
// stay.
func (s *source) refresh(ctx context.Context) error {
	b, err := s.fetch(ctx)
	if err == nil {
		err = s.apply(b, true)
	}
	if err != nil {
		s.metrics.errors.Inc()
		return fmt.Errorf("network source %s: %w", s.name, err)
	}
	return nil
}

// fetch GETs the URL within the timeout and reads at most max-size bytes.
func (s *source) fetch(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range s.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// The error quotes the URL, which may hold credentials: say it without them.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap()
		}
		return nil, fmt.Errorf("GET %s: %w", redacted(s.cfg.URL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s: HTTP status %s", redacted(s.cfg.URL), resp.Status)
	}
	if resp.ContentLength > s.cfg.MaxSize {
		return nil, fmt.Errorf("GET %s: %w (%d bytes announced, max-size %d)", redacted(s.cfg.URL), errBodyTooLarge, resp.ContentLength, s.cfg.MaxSize)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the answer: %w", redacted(s.cfg.URL), err)
	}
	if int64(len(b)) > s.cfg.MaxSize {
		return nil, fmt.Errorf("GET %s: %w (max-size %d)", redacted(s.cfg.URL), errBodyTooLarge, s.cfg.MaxSize)
	}
	return b, nil
}

// apply parses an answer and, when it differs from the last one, hands its entries over
// (and keeps it on disk when save is set).
func (s *source) apply(b []byte, save bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := sha256.Sum256(b)
	if sum == s.last {
		return nil
	}
	entries, skipped, err := parseSource(&s.cfg, b)
	if err != nil {
		return err
	}
	if skipped.n > 0 {
		s.metrics.invalid.Add(float64(skipped.n))
		s.log.Warn("network source entries skipped", "skipped", skipped.n, "first", skipped.first)
	}
	if save {
		if err := writeFileAtomic(s.cfg.CacheFile, b); err != nil {
			// Enrichment goes on with the new data; a restart would use the older copy.
			s.metrics.errors.Inc()
			s.log.Warn("cannot keep a copy of a network source", "file", s.cfg.CacheFile, "error", err)
		}
	}
	s.last = sum
	s.metrics.updates.Inc()
	s.metrics.entries.Set(float64(len(entries)))
	s.onChange(s.name, entries)
	return nil
}

// run refreshes the source every interval until stopped.
func (s *source) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := s.refresh(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("network source not refreshed; the previous entries stay", "error", err)
			}
		}
	}
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if e := tmp.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// redacted is a URL without its password, for logs and errors.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// skipped counts the entries of an answer left out, with the first reason.
type skipped struct {
	n     int
	first string
}

func (s *skipped) add(where string, err error) {
	if s.n == 0 {
		s.first = where + ": " + err.Error()
	}
	s.n++
}

// parseSource reads the entries of an answer. Entries that cannot be read are skipped and
// counted; an answer in which none is valid, but some were given, is refused (a wrong field
// mapping, a changed format) rather than applied as an empty list.
func parseSource(cfg *SourceConfiguration, b []byte) ([]Entry, skipped, error) {
	var entries []Entry
	var skip skipped
	var total int
	var err error
	switch cfg.Format {
	case FormatCSV:
		total, err = parseCSV(cfg, b, &entries, &skip)
	default:
		total, err = parseJSON(cfg, b, &entries, &skip)
	}
	if err != nil {
		return nil, skip, err
	}
	if total > 0 && len(entries) == 0 {
		return nil, skip, fmt.Errorf("none of the %d entries is valid (%s)", total, skip.first)
	}
	return entries, skip, nil
}

// record reads one attribute's field of an entry.
type record func(names FieldNames) (string, bool)

// entryOf builds an entry from a record through the field mapping.
func entryOf(cfg *SourceConfiguration, get record) (Entry, error) {
	e := Entry{Attrs: cfg.Values}
	v, ok := get(cfg.Fields.Prefix)
	if !ok {
		return e, fmt.Errorf("no prefix field %q", strings.Join(cfg.Fields.Prefix, "|"))
	}
	p, err := parsePrefix(v)
	if err != nil {
		return e, fmt.Errorf("prefix: %w", err)
	}
	e.Prefix = p
	if v, ok := get(cfg.Fields.VRF); ok && v != "" {
		id, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return e, fmt.Errorf("vrf: %q is not a VRF ID", v)
		}
		e.VRF = uint32(id)
	}
	str := func(dst *string, names FieldNames) {
		if v, ok := get(names); ok && v != "" {
			*dst = v
		}
	}
	a := &e.Attrs
	str(&a.Name, cfg.Fields.Name)
	str(&a.Role, cfg.Fields.Role)
	str(&a.Site, cfg.Fields.Site)
	str(&a.Region, cfg.Fields.Region)
	str(&a.Tenant, cfg.Fields.Tenant)
	str(&a.Country, cfg.Fields.Country)
	str(&a.State, cfg.Fields.State)
	str(&a.City, cfg.Fields.City)
	a.Country = strings.ToUpper(a.Country)
	if v, ok := get(cfg.Fields.ASN); ok && v != "" {
		digits := strings.TrimPrefix(strings.ToUpper(v), "AS")
		as, err := strconv.ParseUint(digits, 10, 32)
		if err != nil {
			return e, fmt.Errorf("asn: %q is not an AS number", v)
		}
		a.ASN = uint32(as)
	}
	if err := a.validate(); err != nil {
		return e, err
	}
	return e, nil
}

func parseJSON(cfg *SourceConfiguration, b []byte, entries *[]Entry, skip *skipped) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return 0, fmt.Errorf("JSON: %w", err)
	}
	paths := cfg.Entries
	if len(paths) == 0 {
		paths = []string{""}
	}
	total := 0
	for _, path := range paths {
		v, ok := walk(doc, path)
		if !ok {
			// AWS's answer has both lists, others may have one: a missing list is empty.
			continue
		}
		list, ok := v.([]any)
		if !ok {
			return total, fmt.Errorf("%s is not an array", describePath(path))
		}
		for i, item := range list {
			total++
			where := fmt.Sprintf("%s[%d]", describePath(path), i)
			obj, ok := item.(map[string]any)
			if !ok {
				skip.add(where, errors.New("not an object"))
				continue
			}
			e, err := entryOf(cfg, func(names FieldNames) (string, bool) {
				for _, n := range names {
					if v, ok := walk(obj, n); ok {
						if s, ok := scalar(v); ok {
							return s, true
						}
					}
				}
				return "", false
			})
			if err != nil {
				skip.add(where, err)
				continue
			}
			*entries = append(*entries, e)
		}
	}
	return total, nil
}

func describePath(path string) string {
	if path == "" {
		return "the answer"
	}
	return path
}

// walk follows a dotted path into nested objects ("" is v itself).
func walk(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for part := range strings.SplitSeq(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return v, true
}

// scalar is a JSON string or number as text.
func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return strings.TrimSpace(v), true
	case json.Number:
		return v.String(), true
	}
	return "", false
}

func parseCSV(cfg *SourceConfiguration, b []byte, entries *[]Entry, skip *skipped) (int, error) {
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	r.ReuseRecord = true
	header, err := r.Read()
	if err == io.EOF {
		return 0, errors.New("CSV: empty answer, no header line")
	}
	if err != nil {
		return 0, fmt.Errorf("CSV header: %w", err)
	}
	columns := map[string]int{}
	for i, h := range header {
		columns[strings.TrimSpace(h)] = i
	}
	for _, n := range cfg.Fields.Prefix {
		if _, ok := columns[n]; ok {
			goto found
		}
	}
	return 0, fmt.Errorf("CSV header has no prefix column %q", strings.Join(cfg.Fields.Prefix, "|"))
found:
	total := 0
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return total, fmt.Errorf("CSV: %w", err)
			}
			total++
			skip.add(fmt.Sprintf("line %d", pe.Line), pe.Err)
			continue
		}
		total++
		line, _ := r.FieldPos(0)
		e, err := entryOf(cfg, func(names FieldNames) (string, bool) {
			for _, n := range names {
				if i, ok := columns[n]; ok && i < len(rec) {
					return strings.TrimSpace(rec[i]), true
				}
			}
			return "", false
		})
		if err != nil {
			skip.add(fmt.Sprintf("line %d", line), err)
			continue
		}
		*entries = append(*entries, e)
	}
	return total, nil
}
