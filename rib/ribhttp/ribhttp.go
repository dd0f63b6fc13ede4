// Package ribhttp serves the RIB's batch lookup API: POST /api/v0/rib/lookup with
// {"addresses": ["192.0.2.1", "2001:db8::1", ...]} answers, for each address in order, the
// longest matching prefix and the route selected for it (origin AS, AS path, communities,
// large communities, next hop, local preference, MED and the peer it came from).
//
// # Design
//
// This is what users otherwise ask gobgpd's gRPC ListPath for, one address or a few per call
// (docs/design/rib.md compares the two with bench/ribhttp). Here a lookup is the RIB's
// lock-free trie walk and the answer is appended to one reused buffer by hand-written JSON
// encoding (numbers and addresses need no escaping), so a batch of thousands costs little
// more than the request decoding. The peer table is read once per request. The handler is mounted by the collector on its HTTP
// server, which binds where its configuration says (loopback by default).
package ribhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/rib"
	"flowzero/rib/bgp"
	"flowzero/rib/bmp"
)

// Path is where the collector mounts the handler, for every method: the handler answers
// 405 to anything but POST itself, so that it counts it (a "POST "+Path pattern would let
// the ServeMux answer instead).
const Path = "/api/v0/rib/lookup"

// Limits of one request.
const (
	MaxAddresses = 100_000
	maxBody      = 8 << 20
)

// Handler answers batch lookups on a RIB.
type Handler struct {
	table    *rib.RIB
	bufs     sync.Pool
	rejected [rejectCount]prometheus.Counter
}

// reject is why a request was refused, a label value of flowzero_rib_lookup_rejected_total.
type reject uint8

const (
	rejectMethod           reject = iota // 405
	rejectReadBody                       // 400: the body could not be read (client gone, read timeout)
	rejectBodyTooLarge                   // 413
	rejectInvalidJSON                    // 400
	rejectTooManyAddresses               // 413
	rejectCount
)

var rejectNames = [rejectCount]string{"method", "read-body", "body-too-large", "invalid-json", "too-many-addresses"}

// New returns a handler reading table, its metrics registered on r (nil: not registered).
func New(r prometheus.Registerer, table *rib.RIB) (*Handler, error) {
	h := &Handler{table: table, bufs: sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}}
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_rib_lookup_rejected_total",
		Help: "RIB lookup requests refused, by reason (method, read-body, body-too-large, invalid-json, too-many-addresses).",
	}, []string{"reason"})
	for i := range h.rejected {
		h.rejected[i] = rejected.WithLabelValues(rejectNames[i])
	}
	if r != nil {
		if err := r.Register(rejected); err != nil {
			return nil, fmt.Errorf("ribhttp: %w", err)
		}
	}
	return h, nil
}

// Register mounts the handler on mux at Path, for every method (see Path).
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle(Path, h)
}

// Request is the body of a lookup.
type Request struct {
	Addresses []string `json:"addresses"`
}

// Response is the body of an answer; each result is in the order of the request. It
// documents the format; the handler writes it without reflection.
type Response struct {
	Results []Result `json:"results"`
}

// Result is the answer for one address. Without a route, only Address and Found (false)
// are set; an address that does not parse gets Error.
type Result struct {
	Address          string   `json:"address"`
	Found            bool     `json:"found"`
	Error            string   `json:"error,omitempty"`
	Prefix           string   `json:"prefix,omitempty"`
	OriginAS         uint32   `json:"origin-as,omitempty"` // the peer's AS when the AS path is empty
	ASPath           []uint32 `json:"as-path,omitempty"`
	Communities      []string `json:"communities,omitempty"`       // "ASN:value"
	LargeCommunities []string `json:"large-communities,omitempty"` // "global:local1:local2"
	NextHop          string   `json:"next-hop,omitempty"`
	LocalPref        *uint32  `json:"local-pref,omitempty"`
	MED              *uint32  `json:"med,omitempty"`
	Peer             *Peer    `json:"peer,omitempty"`
}

// Peer is the BGP peer a route was learned from; Router and RD are set for BMP peers.
type Peer struct {
	Address string `json:"address"`
	AS      uint32 `json:"as"`
	Router  string `json:"router,omitempty"`
	RD      string `json:"rd,omitempty"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, rejectMethod, http.StatusMethodNotAllowed, "use POST with {\"addresses\": [...]}")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.refuse(w, rejectBodyTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxBody))
			return
		}
		h.refuse(w, rejectReadBody, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	addresses, ok := parseRequest(body)
	if !ok {
		// Anything but the plain shape (escapes, other keys, odd spacing...) goes through
		// the standard decoder, which also explains what is wrong.
		var req Request
		if err := json.Unmarshal(body, &req); err != nil {
			h.refuse(w, rejectInvalidJSON, http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
		addresses = req.Addresses
	}
	if len(addresses) > MaxAddresses {
		h.refuse(w, rejectTooManyAddresses, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d addresses, at most %d per request", len(addresses), MaxAddresses))
		return
	}
	bp := h.bufs.Get().(*[]byte)
	b := h.AppendResponse((*bp)[:0], addresses)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
	if cap(b) <= 16<<20 {
		*bp = b
		h.bufs.Put(bp)
	}
}

// refuse counts a refused request and answers it with code and a JSON error.
func (h *Handler) refuse(w http.ResponseWriter, why reject, code int, msg string) {
	h.rejected[why].Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(append(b, '\n'))
}

// AppendResponse appends the JSON answer for addresses to dst (the Response format).
func (h *Handler) AppendResponse(dst []byte, addresses []string) []byte {
	peers := h.table.Peers()
	dst = append(dst, `{"results":[`...)
	for i, s := range addresses {
		if i > 0 {
			dst = append(dst, ',')
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			q, _ := json.Marshal(s)
			dst = append(dst, `{"address":`...)
			dst = append(dst, q...)
			dst = append(dst, `,"found":false,"error":"not an IP address"}`...)
			continue
		}
		if a.Is4In6() {
			a = a.Unmap()
		}
		dst = append(dst, `{"address":"`...)
		dst = a.AppendTo(dst)
		rt, ok := h.table.Lookup(a)
		if !ok {
			dst = append(dst, `","found":false}`...)
			continue
		}
		dst = append(dst, `","found":true,"prefix":"`...)
		dst = rt.Prefix(a).AppendTo(dst)
		dst = append(dst, '"')
		var peer *rib.PeerInfo
		if int(rt.Peer) < len(peers) {
			peer = &peers[rt.Peer]
		}
		dst = appendRoute(dst, rt.Attrs, peer)
		if peer != nil {
			dst = appendPeer(dst, peer)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...)
}

func appendRoute(dst []byte, a *bgp.Attributes, peer *rib.PeerInfo) []byte {
	origin := a.OriginAS()
	if len(a.ASPath) == 0 && peer != nil {
		origin = peer.AS // originated in the peer's own AS (iBGP), as enrich reads it
	}
	dst = append(dst, `,"origin-as":`...)
	dst = strconv.AppendUint(dst, uint64(origin), 10)
	dst = append(dst, `,"as-path":[`...)
	for i, as := range a.ASPath {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(as), 10)
	}
	dst = append(dst, `],"communities":[`...)
	for i, c := range a.Communities {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = strconv.AppendUint(dst, uint64(c>>16), 10)
		dst = append(dst, ':')
		dst = strconv.AppendUint(dst, uint64(c&0xffff), 10)
		dst = append(dst, '"')
	}
	dst = append(dst, `],"large-communities":[`...)
	for i, c := range a.LargeCommunities {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = strconv.AppendUint(dst, uint64(c.GlobalAdmin), 10)
		dst = append(dst, ':')
		dst = strconv.AppendUint(dst, uint64(c.LocalData1), 10)
		dst = append(dst, ':')
		dst = strconv.AppendUint(dst, uint64(c.LocalData2), 10)
		dst = append(dst, '"')
	}
	dst = append(dst, ']')
	if a.NextHop.IsValid() {
		dst = append(dst, `,"next-hop":"`...)
		dst = a.NextHop.AppendTo(dst)
		dst = append(dst, '"')
	}
	if a.HasLocalPref {
		dst = append(dst, `,"local-pref":`...)
		dst = strconv.AppendUint(dst, uint64(a.LocalPref), 10)
	}
	if a.HasMED {
		dst = append(dst, `,"med":`...)
		dst = strconv.AppendUint(dst, uint64(a.MED), 10)
	}
	return dst
}

func appendPeer(dst []byte, p *rib.PeerInfo) []byte {
	dst = append(dst, `,"peer":{"address":"`...)
	dst = p.Address.AppendTo(dst)
	dst = append(dst, `","as":`...)
	dst = strconv.AppendUint(dst, uint64(p.AS), 10)
	if p.Router.IsValid() {
		dst = append(dst, `,"router":"`...)
		dst = p.Router.AppendTo(dst)
		dst = append(dst, `","rd":"`...)
		dst = append(dst, bmp.RD(p.Distinguisher).String()...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// parseRequest reads {"addresses": ["...", ...]} without the reflection of encoding/json: the
// strings are views of body (which must outlive them). It returns false for anything else,
// including strings with escapes or non-ASCII bytes, which the caller then decodes the standard way.
func parseRequest(body []byte) ([]string, bool) {
	b := skipSpace(body)
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	b = skipSpace(b[1:])
	const key = `"addresses"`
	if len(b) < len(key) || string(b[:len(key)]) != key {
		return nil, false
	}
	b = skipSpace(b[len(key):])
	if len(b) == 0 || b[0] != ':' {
		return nil, false
	}
	b = skipSpace(b[1:])
	if len(b) == 0 || b[0] != '[' {
		return nil, false
	}
	b = skipSpace(b[1:])
	out := make([]string, 0, bytes.Count(b, []byte{'"'})/2)
	if len(b) > 0 && b[0] == ']' {
		b = b[1:]
	} else {
		for {
			if len(b) == 0 || b[0] != '"' {
				return nil, false
			}
			b = b[1:]
			end := 0
			for end < len(b) && b[end] != '"' {
				if b[end] == '\\' || b[end] < 0x20 || b[end] >= 0x80 {
					return nil, false
				}
				end++
			}
			if end == len(b) {
				return nil, false
			}
			out = append(out, unsafe.String(unsafe.SliceData(b), end))
			b = skipSpace(b[end+1:])
			if len(b) == 0 {
				return nil, false
			}
			if b[0] == ']' {
				b = b[1:]
				break
			}
			if b[0] != ',' {
				return nil, false
			}
			b = skipSpace(b[1:])
		}
	}
	b = skipSpace(b)
	if len(b) == 0 || b[0] != '}' {
		return nil, false
	}
	return out, len(skipSpace(b[1:])) == 0
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
