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
	"strconv"
	"strings"
	"sync"
	"time"

	"flowzero/internal/atomicfile"
	"flowzero/internal/health"
	"flowzero/internal/lograte"
)

// source fetches one network source, keeps its last good answer on disk and hands its
// entries over when they change.
type source struct {
	name     string
	cfg      SourceConfiguration
	client   *http.Client
	log      *slog.Logger
	metrics  *sourceMetrics
	health   *health.State
	logLimit *lograte.Limiter // failed fetches and skipped entries
	onChange func(name string, entries []Entry)

	mu       sync.Mutex // one fetch at a time
	last     [sha256.Size]byte
	entries  int  // in use
	unsaved  bool // the last answer applied is not on disk yet
	failures int  // fetches failed in a row
	stop     chan struct{}
	done     chan struct{}
}

const (
	// failuresDegraded is how many fetches in a row must fail for /healthz to report the
	// source degraded: one may fail on a blip.
	failuresDegraded = 3
	// maxRedirects bounds the redirects a fetch follows.
	maxRedirects = 5
	// maxEntryBytes bounds one entry of a JSON answer: a larger one is skipped, so that
	// decoding an entry takes little memory whatever the answer.
	maxEntryBytes = 64 << 10
	// maxSkipDepth bounds the nesting of the JSON values skipped around the entries.
	maxSkipDepth = 1000
)

// errBodyTooLarge is an answer past max-size.
var errBodyTooLarge = errors.New("answer larger than max-size")

// warn logs a problem of the source, at most a few times a minute.
func (s *source) warn(msg string, args ...any) {
	ok, suppressed := s.logLimit.Allow(time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	s.log.Warn(msg, args...)
}

// checkRedirect follows a redirect to the source's own host only, with the same scheme or
// from http to https: Go's client copies the configured headers, tokens included, onto each
// redirect.
func (s *source) checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case len(via) > maxRedirects:
		return fmt.Errorf("network source %s: more than %d redirects", s.name, maxRedirects)
	case req.URL.Host != first.Host:
		return fmt.Errorf("network source %s: redirect to another host (%s) refused: the source's headers would follow it", s.name, req.URL.Host)
	case req.URL.Scheme != first.Scheme && !(first.Scheme == "http" && req.URL.Scheme == "https"):
		return fmt.Errorf("network source %s: redirect from %s to %s refused", s.name, first.Scheme, req.URL.Scheme)
	}
	return nil
}

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
// stay; after failuresDegraded errors in a row, the source is degraded in /healthz until a
// fetch succeeds.
func (s *source) refresh(ctx context.Context) error {
	b, err := s.fetch(ctx)
	if err == nil {
		err = s.apply(b, true)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.metrics.errors.Inc()
		err = fmt.Errorf("network source %s: %w", s.name, err)
		if s.failures++; s.failures >= failuresDegraded {
			s.health.Set("source "+s.name, fmt.Sprintf("%v (%d fetches failed in a row; the previous entries stay)", err, s.failures))
		}
		return err
	}
	s.failures = 0
	s.health.Clear("source " + s.name)
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
// (and keeps it on disk when save is set; a copy that could not be written is written again
// at the next answer, even an unchanged one). An answer without entries is refused while
// the source has some: a glitch of the server must not erase them.
func (s *source) apply(b []byte, save bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := sha256.Sum256(b)
	if sum == s.last {
		if save && s.unsaved {
			s.save(b)
		}
		return nil
	}
	entries, skipped, err := parseSource(&s.cfg, b)
	if err != nil {
		return err
	}
	if len(entries) == 0 && s.entries > 0 {
		return fmt.Errorf("the answer has no entry, the source has %d: refused (remove the source from the configuration to drop its entries)", s.entries)
	}
	if skipped.n > 0 {
		s.metrics.invalid.Add(float64(skipped.n))
		s.warn("network source entries skipped", "skipped", skipped.n, "first", skipped.first)
	}
	if save {
		s.save(b)
	}
	s.last = sum
	s.entries = len(entries)
	s.metrics.updates.Inc()
	s.metrics.entries.Set(float64(len(entries)))
	s.onChange(s.name, entries)
	return nil
}

// save writes the cached copy; while it cannot, the source is degraded in /healthz.
// Enrichment goes on with the new data either way; a restart would use the older copy.
func (s *source) save(b []byte) {
	if err := atomicfile.WriteFile(s.cfg.CacheFile, b); err != nil {
		s.unsaved = true
		s.metrics.errors.Inc()
		s.health.Set("cache "+s.name, fmt.Sprintf("network source %s: cannot write its cached copy: %v", s.name, err))
		s.warn("cannot keep a copy of a network source", "file", s.cfg.CacheFile, "error", err)
		return
	}
	s.unsaved = false
	s.health.Clear("cache " + s.name)
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
				s.warn("network source not refreshed; the previous entries stay", "error", err)
			}
		}
	}
}

// redacted is a URL for logs and errors (see redactURL).
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return redactURL(u)
	}
	return "(unparsable URL)"
}

// redactURL is u without its password and fragment, and with its query values replaced:
// tokens often ride in the query ("?token=...").
func redactURL(u *url.URL) string {
	r := *u
	if r.RawQuery != "" {
		q := r.Query()
		for _, vs := range q {
			for i := range vs {
				vs[i] = "xxxxx"
			}
		}
		r.RawQuery = q.Encode()
	}
	r.Fragment, r.RawFragment = "", ""
	return r.Redacted()
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

// jsonParser reads the entries of a JSON answer while decoding it, one entry at a time, so
// that the memory it takes stays near the answer's size whatever the answer holds.
type jsonParser struct {
	cfg     *SourceConfiguration
	dec     *json.Decoder
	item    *json.Decoder // decodes each entry from itemSrc
	itemSrc *bytes.Reader
	paths   map[string]bool // the entries paths
	found   int             // entries paths present in the answer
	entries *[]Entry
	skip    *skipped
	total   int
}

func parseJSON(cfg *SourceConfiguration, b []byte, entries *[]Entry, skip *skipped) (int, error) {
	p := &jsonParser{cfg: cfg, dec: json.NewDecoder(bytes.NewReader(b)), paths: map[string]bool{},
		entries: entries, skip: skip}
	p.dec.UseNumber()
	p.itemSrc = bytes.NewReader(nil)
	p.item = json.NewDecoder(p.itemSrc)
	p.item.UseNumber()
	paths := cfg.Entries
	if len(paths) == 0 {
		paths = []string{""}
	}
	for _, path := range paths {
		p.paths[path] = true
	}
	if err := p.value(""); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return p.total, fmt.Errorf("JSON: %w", err)
	}
	if rest := bytes.TrimLeft(b[p.dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return p.total, fmt.Errorf("JSON: data after the document, at byte %d", len(b)-len(rest))
	}
	if p.found == 0 {
		// An error message served with status 200, say: not an empty list.
		return p.total, fmt.Errorf("JSON: no entries path (%s) in the answer", strings.Join(paths, ", "))
	}
	return p.total, nil
}

// value reads the value at path: the entries when path is an entries path, the keys leading
// to one when it is an object on the way, and skips it otherwise.
func (p *jsonParser) value(path string) error {
	if p.paths[path] {
		return p.array(path)
	}
	if !p.onTheWay(path) {
		return p.skipValue()
	}
	tok, err := p.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
	case json.Delim('['):
		return p.skipRest()
	default:
		return nil
	}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if path != "" {
			key = path + "." + key
		}
		if err := p.value(key); err != nil {
			return err
		}
	}
	_, err = p.dec.Token()
	return err
}

// onTheWay tells whether path leads to an entries path.
func (p *jsonParser) onTheWay(path string) bool {
	for want := range p.paths {
		if path == "" || strings.HasPrefix(want, path+".") {
			return true
		}
	}
	return false
}

// skipValue skips the next value.
func (p *jsonParser) skipValue() error {
	tok, err := p.dec.Token()
	if err != nil {
		return err
	}
	if tok == json.Delim('{') || tok == json.Delim('[') {
		return p.skipRest()
	}
	return nil
}

// skipRest skips the rest of an object or array whose opening token was read. Its nesting
// is bounded: the decoder keeps a word per level.
func (p *jsonParser) skipRest() error {
	depth := 1
	for depth > 0 {
		tok, err := p.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > maxSkipDepth {
				return fmt.Errorf("nested deeper than %d levels at byte %d", maxSkipDepth, p.dec.InputOffset())
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// array reads the entries of an entries path.
func (p *jsonParser) array(path string) error {
	tok, err := p.dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('[') {
		return fmt.Errorf("%s is not an array", describePath(path))
	}
	p.found++
	for i := 0; p.dec.More(); i++ {
		if p.total++; p.total > p.cfg.MaxEntries {
			return fmt.Errorf("more than max-entries (%d) entries", p.cfg.MaxEntries)
		}
		where := func() string { return fmt.Sprintf("%s[%d]", describePath(path), i) }
		var raw json.RawMessage
		if err := p.dec.Decode(&raw); err != nil {
			return err
		}
		if len(raw) > maxEntryBytes {
			p.skip.add(where(), fmt.Errorf("%d bytes, more than %d", len(raw), maxEntryBytes))
			continue
		}
		// raw is one whole value: the decoder ends each Decode at its end, ready for the next.
		var item any
		p.itemSrc.Reset(raw)
		if err := p.item.Decode(&item); err != nil {
			return err
		}
		obj, ok := item.(map[string]any)
		if !ok {
			p.skip.add(where(), errors.New("not an object"))
			continue
		}
		e, err := entryOf(p.cfg, func(names FieldNames) (string, bool) {
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
			p.skip.add(where(), err)
			continue
		}
		*p.entries = append(*p.entries, e)
	}
	_, err = p.dec.Token()
	return err
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
			// A stray quote makes the reader take the following lines as one field: the
			// lines after it cannot be trusted.
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return total, fmt.Errorf("CSV: record starting at line %d: %w", pe.StartLine, pe.Err)
			}
			return total, fmt.Errorf("CSV: %w", err)
		}
		if total++; total > cfg.MaxEntries {
			return total, fmt.Errorf("CSV: more than max-entries (%d) entries", cfg.MaxEntries)
		}
		line, _ := r.FieldPos(0)
		for _, f := range rec {
			if strings.ContainsAny(f, "\r\n") {
				// A quoted field over several lines: most likely a quote left open.
				return total, fmt.Errorf("CSV: record starting at line %d: a field holds a line break", line)
			}
		}
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
