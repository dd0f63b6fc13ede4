// Package flowtest decodes finalized FlowMessages back into column values, so that decoder
// tests compare what really goes on the wire, not the FlowMessage's internal state. It reads
// the protobuf with pbwire's reader and the schema's column list, independently of the
// FlowMessage encoder. It is meant for tests only.
package flowtest

import (
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strings"

	"flowzero/pbwire"
	"flowzero/schema"
)

// Flow maps column names to decoded values: uint64 for numeric, enum and MAC columns,
// netip.Addr (IPv4 unmapped) for addresses, string for strings and bytes, []uint32, []uint64
// and []netip.Addr for arrays.
type Flow map[string]any

// Decode decodes one length-delimited message as returned by FlowMessage.Finalize, through
// the schema's own decoder (Schema.DecodeMessage). It fails on a column written twice that is
// not repeated and on a column the schema does not enable.
func Decode(s *schema.Schema, framed []byte) (Flow, error) {
	msg, rest, err := pbwire.SplitDelimited(framed)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the message", len(rest))
	}
	flow := Flow{}
	var problems []string
	err = s.DecodeMessage(msg, func(c *schema.Column, v any) {
		if !s.Enabled(c.Key) {
			problems = append(problems, "disabled column "+c.Name+" written")
		}
		if _, dup := flow[c.Name]; dup && !c.Kind.Repeated() {
			problems = append(problems, "column "+c.Name+" written twice")
		}
		switch c.Kind {
		case schema.KindArrayUint32:
			vs, _ := flow[c.Name].([]uint32)
			flow[c.Name] = append(vs, uint32(v.(uint64)))
		case schema.KindArrayUint64:
			vs, _ := flow[c.Name].([]uint64)
			flow[c.Name] = append(vs, v.(uint64))
		case schema.KindArrayIP:
			vs, _ := flow[c.Name].([]netip.Addr)
			flow[c.Name] = append(vs, v.(netip.Addr))
		case schema.KindArrayLargeCommunity:
			vs, _ := flow[c.Name].([]schema.LargeCommunity)
			flow[c.Name] = append(vs, v.(schema.LargeCommunity))
		case schema.KindBytes:
			flow[c.Name] = string(v.([]byte))
		default:
			flow[c.Name] = v
		}
	})
	if err != nil {
		return nil, err
	}
	if problems != nil {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return flow, nil
}

// Diff compares a decoded flow with the expected one and describes every difference, or
// returns "". For brevity, want may use int for numbers, strings for addresses ("192.0.2.1")
// and []int for arrays; a column absent from want must be absent from got.
func Diff(got, want Flow) string {
	var out []string
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		g, gok := got[k]
		w, wok := want[k]
		switch {
		case !wok:
			out = append(out, fmt.Sprintf("%s: unexpected %v", k, g))
		case !gok:
			out = append(out, fmt.Sprintf("%s: missing, want %v", k, w))
		default:
			w = normalize(w, g)
			if !reflect.DeepEqual(g, w) {
				out = append(out, fmt.Sprintf("%s: got %v, want %v", k, g, w))
			}
		}
	}
	return strings.Join(out, "\n")
}

// Normalize converts a short-hand expected value (see Diff) to the type of the decoded one.
func Normalize(w, g any) any {
	return normalize(w, g)
}

func normalize(w, g any) any {
	switch g.(type) {
	case uint64:
		switch v := w.(type) {
		case int:
			return uint64(v)
		case uint32:
			return uint64(v)
		}
	case netip.Addr:
		if v, ok := w.(string); ok {
			if a, err := netip.ParseAddr(v); err == nil {
				return a
			}
		}
	case []uint32:
		if v, ok := w.([]int); ok {
			out := make([]uint32, len(v))
			for i, x := range v {
				out[i] = uint32(x)
			}
			return out
		}
	case []netip.Addr:
		if v, ok := w.([]string); ok {
			out := make([]netip.Addr, len(v))
			for i, x := range v {
				out[i], _ = netip.ParseAddr(x)
			}
			return out
		}
	}
	return w
}

// AllColumns returns a schema with every column enabled.
func AllColumns() (*schema.Schema, error) {
	var cfg schema.Configuration
	for k := schema.ColumnKey(1); k < schema.ColumnLast; k++ {
		if c := schema.Lookup(k); c != nil && !c.Default {
			cfg.Enabled = append(cfg.Enabled, c.Name)
		}
	}
	return schema.New(cfg)
}

// SubsetOf reports whether every finalized flow of got is one of want, each at most as often:
// what a decoder may emit from a cut or corrupted copy of a datagram that gave want.
func SubsetOf(got, want []string) bool {
	n := map[string]int{}
	for _, f := range want {
		n[f]++
	}
	for _, f := range got {
		if n[f]--; n[f] < 0 {
			return false
		}
	}
	return true
}
