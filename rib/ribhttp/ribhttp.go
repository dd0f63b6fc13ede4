// Package ribhttp serves the RIB's batch lookup API: POST /api/v0/rib/lookup with
// {"addresses": ["192.0.2.1", "2001:db8::1", ...]} answers, for each address in order, the
// longest matching prefix and the route selected for it (origin AS, AS path, communities,
// large communities, next hop, local preference, MED and the peer it came from).
//
// # Design
//
// This is what users otherwise ask gobgpd's gRPC ListPath for, one address or a few per call
// (docs/design/rib.md compares the two with bench/ribhttp). Here a lookup is the RIB's
// lock-free trie walk and the answer is appended to a reused buffer by hand-written JSON
// encoding (numbers and addresses need no escaping), so a batch of thousands costs little
// more than the request decoding. The peer table is read once per request.
//
// Memory is bounded per request: the body (at most 8 MiB and MaxAddresses addresses) is
// read into a pooled buffer, the addresses are looked up as they are read from it (no list
// of them on the plain fast path), and the answer is written out every 32 KiB instead of
// being built whole (about 280 bytes per found address). The handler is mounted by the
// collector on its HTTP server, which binds where its configuration says (loopback by
// default) and bounds the API requests served at once (collector.http.max-concurrent-requests).
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
	bodies   sync.Pool // *bytes.Buffer: request bodies
	bufs     sync.Pool // *[]byte: answers, written out in chunks of flushAt
	rejected [rejectCount]prometheus.Counter
}

// flushAt is the size at which an answer's buffer is written to the client: an answer is
// streamed, so that its memory does not grow with the number of addresses (a 100,000-address
// answer is about 20 MB of JSON).
const flushAt = 32 << 10

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
	h := &Handler{table: table,
		bodies: sync.Pool{New: func() any { return new(bytes.Buffer) }},
		bufs:   sync.Pool{New: func() any { b := make([]byte, 0, flushAt+4<<10); return &b }}}
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
	if r.ContentLength > maxBody {
		h.refuse(w, rejectBodyTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxBody))
		return
	}
	buf := h.bodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxBody+bytes.MinRead {
			h.bodies.Put(buf)
		}
	}()
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBody)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.refuse(w, rejectBodyTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxBody))
			return
		}
		h.refuse(w, rejectReadBody, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	body := buf.Bytes()
	// The fast path reads the addresses from the body as they are looked up, without a
	// list of them; a first pass checks the shape and counts them.
	count, fast := scanRequest(body, nil)
	var addresses []string
	if !fast {
		// Anything but the plain shape (escapes, other keys, odd spacing...) goes through
		// the standard decoder, which also explains what is wrong.
		var req Request
		if err := json.Unmarshal(body, &req); err != nil {
			h.refuse(w, rejectInvalidJSON, http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
		addresses, count = req.Addresses, len(req.Addresses)
	}
	if count > MaxAddresses {
		h.refuse(w, rejectTooManyAddresses, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d addresses, at most %d per request", count, MaxAddresses))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	bp := h.bufs.Get().(*[]byte)
	out := answer{h: h, w: w, peers: h.table.Peers(), buf: (*bp)[:0]}
	out.buf = append(out.buf, `{"results":[`...)
	if fast {
		scanRequest(body, out.add)
	} else {
		for _, a := range addresses {
			out.add(a)
		}
	}
	out.buf = append(out.buf, "]}\n"...)
	w.Write(out.buf)
	if cap(out.buf) <= 4*flushAt {
		*bp = out.buf
		h.bufs.Put(bp)
	}
}

// answer streams the results of one request: each is appended to buf, which is written to
// the client whenever it holds flushAt bytes.
type answer struct {
	h     *Handler
	w     io.Writer
	peers []rib.PeerInfo
	buf   []byte
	n     int
}

func (a *answer) add(address string) {
	if a.n > 0 {
		a.buf = append(a.buf, ',')
	}
	a.n++
	a.buf = a.h.appendResult(a.buf, address, a.peers)
	if len(a.buf) >= flushAt {
		a.w.Write(a.buf) // a client gone fails the later writes too: nothing to do
		a.buf = a.buf[:0]
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
		dst = h.appendResult(dst, s, peers)
	}
	return append(dst, "]}\n"...)
}

// appendResult appends the JSON result for one address (a Result).
func (h *Handler) appendResult(dst []byte, s string, peers []rib.PeerInfo) []byte {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		q, _ := json.Marshal(s)
		dst = append(dst, `{"address":`...)
		dst = append(dst, q...)
		return append(dst, `,"found":false,"error":"not an IP address"}`...)
	}
	if a.Is4In6() {
		a = a.Unmap()
	}
	dst = append(dst, `{"address":"`...)
	dst = a.AppendTo(dst)
	rt, ok := h.table.Lookup(a)
	if !ok {
		return append(dst, `","found":false}`...)
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
	return append(dst, '}')
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

// scanRequest reads {"addresses": ["...", ...]} without the reflection of encoding/json,
// calling fn (when not nil) with each address, a view of body (valid while body is), and
// returns how many there are. It returns false for anything else, including strings with
// escapes or non-ASCII bytes, which the caller then decodes the standard way: call it with a
// nil fn first, as it may call fn before it finds the body is not of this shape.
func scanRequest(body []byte, fn func(string)) (int, bool) {
	b := skipSpace(body)
	if len(b) == 0 || b[0] != '{' {
		return 0, false
	}
	b = skipSpace(b[1:])
	const key = `"addresses"`
	if len(b) < len(key) || string(b[:len(key)]) != key {
		return 0, false
	}
	b = skipSpace(b[len(key):])
	if len(b) == 0 || b[0] != ':' {
		return 0, false
	}
	b = skipSpace(b[1:])
	if len(b) == 0 || b[0] != '[' {
		return 0, false
	}
	b = skipSpace(b[1:])
	n := 0
	if len(b) > 0 && b[0] == ']' {
		b = b[1:]
	} else {
		for {
			if len(b) == 0 || b[0] != '"' {
				return 0, false
			}
			b = b[1:]
			end := 0
			for end < len(b) && b[end] != '"' {
				if b[end] == '\\' || b[end] < 0x20 || b[end] >= 0x80 {
					return 0, false
				}
				end++
			}
			if end == len(b) {
				return 0, false
			}
			if fn != nil {
				fn(unsafe.String(unsafe.SliceData(b), end))
			}
			n++
			b = skipSpace(b[end+1:])
			if len(b) == 0 {
				return 0, false
			}
			if b[0] == ']' {
				b = b[1:]
				break
			}
			if b[0] != ',' {
				return 0, false
			}
			b = skipSpace(b[1:])
		}
	}
	b = skipSpace(b)
	if len(b) == 0 || b[0] != '}' {
		return 0, false
	}
	return n, len(skipSpace(b[1:])) == 0
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
