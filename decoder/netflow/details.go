package netflow

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// SessionDetails describes the state kept for one exporter transport session (address and
// source port), as served by the collector's /api/v0/exporters.
type SessionDetails struct {
	Exporter   string    `json:"exporter"`
	SourcePort uint16    `json:"source-port"`
	LastPacket time.Time `json:"last-packet"`
	// Domains are the (version, observation domain) pairs that have templates, sampling
	// rates or pending data sets.
	Domains []DomainDetails `json:"domains"`
	// PendingSets and PendingBytes are the data sets kept until their template arrives.
	PendingSets  int `json:"pending-sets"`
	PendingBytes int `json:"pending-bytes"`
}

// DomainDetails is the state of one observation domain (NetFlow v9 source ID) of a session.
type DomainDetails struct {
	Version           uint16 `json:"version"`
	ObservationDomain uint32 `json:"observation-domain"`
	// SystemInitMs is the systemInitTimeMilliseconds (IE 160) announced by options records,
	// as sent (a number: an exporter may send a value no time format can hold).
	SystemInitMs  uint64                `json:"system-init-ms,omitempty"`
	Templates     []TemplateDetails     `json:"templates"`
	SamplingRates []SamplingRateDetails `json:"sampling-rates"`
	Pending       []PendingDetails      `json:"pending,omitempty"`
}

// TemplateDetails describes one template.
type TemplateDetails struct {
	ID uint16 `json:"id"`
	// Kind is "data" or "options".
	Kind string `json:"kind"`
	// ScopeFields is the number of scope fields at the start of an options template.
	ScopeFields int `json:"scope-fields,omitempty"`
	// RecordLength is the length of a data record, -1 when a field has a variable length.
	RecordLength int            `json:"record-length"`
	Fields       []FieldDetails `json:"fields"`
	// Received is when the template record was last received (absent when it was loaded
	// from the templates file and not received since); LastUsed when a data set was last
	// decoded with it.
	Received *time.Time `json:"received,omitempty"`
	LastUsed *time.Time `json:"last-used,omitempty"`
}

// FieldDetails is one field specifier of a template.
type FieldDetails struct {
	IE         uint16 `json:"ie"`
	Enterprise uint32 `json:"enterprise,omitempty"`
	// Name is the IANA name of the information element, when known.
	Name string `json:"name,omitempty"`
	// Length is the field length; 65535 means variable length (RFC 7011 §7).
	Length uint16 `json:"length"`
	// Scope marks the scope fields of an options template. In NetFlow v9 their type is a
	// scope type (RFC 3954 §6.1: 1 System, 2 Interface, 3 Line Card, 4 Cache, 5 Template),
	// not an information element.
	Scope bool `json:"scope,omitempty"`
}

// SamplingRateDetails is a sampling rate learned from options data records; sampler ID 0
// is the rate of the whole observation domain.
type SamplingRateDetails struct {
	SamplerID uint64 `json:"sampler-id"`
	Rate      uint64 `json:"rate"`
}

// PendingDetails is a data set waiting for its template.
type PendingDetails struct {
	TemplateID uint16    `json:"template-id"`
	Bytes      int       `json:"bytes"`
	Received   time.Time `json:"received"`
}

// ExporterDetails returns the state kept for every session of the exporter address (a
// []SessionDetails sorted by source port), or nil when there is none. It takes each
// session's lock in turn, as a datagram being decoded does; it is meant for the HTTP API,
// not for a hot path.
func (d *Decoder) ExporterDetails(addr netip.Addr) any {
	addr = addr.Unmap()
	d.mu.RLock()
	var sessions []*exporter
	for ap, e := range d.exporters {
		if ap.Addr().Unmap() == addr {
			sessions = append(sessions, e)
		}
	}
	d.mu.RUnlock()
	if len(sessions) == 0 {
		return nil
	}
	out := make([]SessionDetails, 0, len(sessions))
	for _, e := range sessions {
		out = append(out, e.details())
	}
	slices.SortFunc(out, func(a, b SessionDetails) int { return cmp.Compare(a.SourcePort, b.SourcePort) })
	return out
}

// details snapshots a session under its lock.
func (e *exporter) details() SessionDetails {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := SessionDetails{
		Exporter:     e.addr.String(),
		SourcePort:   e.addr.Port(),
		LastPacket:   time.Unix(e.lastSeen.Load(), 0).UTC(),
		PendingSets:  len(e.pending),
		PendingBytes: e.pendingBytes,
	}
	type domainKey struct {
		version uint16
		domain  uint32
	}
	domains := map[domainKey]*DomainDetails{}
	domain := func(version uint16, id uint32) *DomainDetails {
		k := domainKey{version, id}
		if dd := domains[k]; dd != nil {
			return dd
		}
		dd := &DomainDetails{Version: version, ObservationDomain: id, Templates: []TemplateDetails{}, SamplingRates: []SamplingRateDetails{}}
		dd.SystemInitMs = e.sysInit[id]
		domains[k] = dd
		return dd
	}
	for k, t := range e.templates {
		dd := domain(k.version, k.domain)
		dd.Templates = append(dd.Templates, t.details(k))
	}
	for k, rate := range e.samplers {
		dd := domain(k.version, k.domain)
		dd.SamplingRates = append(dd.SamplingRates, SamplingRateDetails{SamplerID: k.id, Rate: rate})
	}
	for i := range e.pending {
		p := &e.pending[i]
		dd := domain(p.key.version, p.key.domain)
		dd.Pending = append(dd.Pending, PendingDetails{TemplateID: p.key.id, Bytes: len(p.data), Received: jsonTime(p.recv)})
	}
	s.Domains = make([]DomainDetails, 0, len(domains))
	for _, dd := range domains {
		slices.SortFunc(dd.Templates, func(a, b TemplateDetails) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(dd.SamplingRates, func(a, b SamplingRateDetails) int { return cmp.Compare(a.SamplerID, b.SamplerID) })
		s.Domains = append(s.Domains, *dd)
	}
	slices.SortFunc(s.Domains, func(a, b DomainDetails) int {
		return cmp.Or(cmp.Compare(a.Version, b.Version), cmp.Compare(a.ObservationDomain, b.ObservationDomain))
	})
	return s
}

// details describes a template, reading its field list back from the record as received.
func (t *template) details(k templateKey) TemplateDetails {
	td := TemplateDetails{ID: k.id, Kind: "data", RecordLength: t.fixedLen, Fields: []FieldDetails{}}
	if t.options {
		td.Kind = "options"
	}
	td.Received, td.LastUsed = unixTime(t.received), unixTime(t.used)
	// Record headers: see templateSet (RFC 3954 §5.2/§6.1, RFC 7011 §3.4.1/§3.4.2).
	w := t.wire
	var hdr int
	switch {
	case !t.options:
		hdr = 4
	case k.version == 9:
		hdr = 6
		if len(w) >= 6 {
			td.ScopeFields = int(binary.BigEndian.Uint16(w[2:])) / 4
		}
	default:
		hdr = 6
		if len(w) >= 6 {
			td.ScopeFields = int(binary.BigEndian.Uint16(w[4:]))
		}
	}
	if len(w) < hdr {
		return td
	}
	p := w[hdr:]
	for i := range t.fields {
		if len(p) < 4 {
			break
		}
		f := FieldDetails{IE: binary.BigEndian.Uint16(p), Length: binary.BigEndian.Uint16(p[2:])}
		p = p[4:]
		if k.version == 10 && f.IE&0x8000 != 0 {
			if len(p) < 4 {
				break
			}
			f.IE &= 0x7fff
			f.Enterprise = binary.BigEndian.Uint32(p)
			p = p[4:]
		}
		f.Scope = i < td.ScopeFields
		if f.Scope && k.version == 9 {
			if int(f.IE) < len(v9ScopeNames) {
				f.Name = v9ScopeNames[f.IE]
			}
		} else {
			f.Name = ieName(f.Enterprise, f.IE)
		}
		td.Fields = append(td.Fields, f)
	}
	return td
}

// unixTime returns the time of unix seconds, nil when unset or beyond what JSON can hold
// (the receive time comes from the caller, which may replay odd captures).
func unixTime(sec int64) *time.Time {
	if sec <= 0 || sec > 253402300799 { // 9999-12-31T23:59:59Z
		return nil
	}
	t := time.Unix(sec, 0).UTC()
	return &t
}

// jsonTime returns t in UTC, or the zero time when JSON cannot hold its year.
func jsonTime(t time.Time) time.Time {
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}
	}
	return t.UTC()
}

// v9ScopeNames are the NetFlow v9 scope field types (RFC 3954 §6.1).
var v9ScopeNames = [...]string{1: "System", 2: "Interface", 3: "Line Card", 4: "Cache", 5: "Template"}

// ieName returns the IANA name of an information element, or of its RFC 5103 reverse
// counterpart, "" when unknown.
func ieName(pen uint32, ie uint16) string {
	switch pen {
	case 0:
		if int(ie) < len(ianaNames) {
			return ianaNames[ie]
		}
	case penReverse:
		if int(ie) < len(ianaNames) && ianaNames[ie] != "" {
			n := ianaNames[ie]
			return "reverse" + strings.ToUpper(n[:1]) + n[1:]
		}
	case penJuniper:
		if ie == 137 {
			return "juniperCommonPropertiesId"
		}
	}
	return ""
}
