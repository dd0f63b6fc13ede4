// Package jsonl prints encoded flows as JSON, one object per line, by decoding the protobuf
// bytes back with the schema: what is printed is exactly what was sent. It serves the stdout
// sink and `flowzero decode`. Keys are the schema's column names; addresses are text; times
// (DateTime columns) are RFC 3339 in UTC, or Unix milliseconds with TimesAsMillis; enums
// print their names; MAC addresses print as aa:bb:cc:dd:ee:ff; repeated columns are arrays.
package jsonl

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"flowzero/schema"
)

// Formatter turns encoded flow messages into JSON lines.
type Formatter struct {
	s             *schema.Schema
	only          map[schema.ColumnKey]bool
	TimesAsMillis bool

	// scratch, reused between messages
	vals  map[schema.ColumnKey][]any
	order []*schema.Column
}

// New returns a formatter printing every column present in a message, or only the columns
// named in columns (unknown names are an error naming them).
func New(s *schema.Schema, columns []string) (*Formatter, error) {
	f := &Formatter{s: s, vals: map[schema.ColumnKey][]any{}}
	if len(columns) > 0 {
		f.only = map[schema.ColumnKey]bool{}
		for _, name := range columns {
			k, ok := schema.ColumnByName(name)
			if !ok {
				return nil, fmt.Errorf("unknown column %q", name)
			}
			f.only[k] = true
		}
	}
	return f, nil
}

// Append decodes one message (without its length prefix) and appends its JSON object and a
// newline to dst.
func (f *Formatter) Append(dst []byte, msg []byte) ([]byte, error) {
	clear(f.vals)
	f.order = f.order[:0]
	err := f.s.DecodeMessage(msg, func(c *schema.Column, v any) {
		if f.only != nil && !f.only[c.Key] {
			return
		}
		if _, seen := f.vals[c.Key]; !seen {
			f.order = append(f.order, c)
		}
		f.vals[c.Key] = append(f.vals[c.Key], v)
	})
	if err != nil {
		return dst, err
	}
	// Column table order (the schema's), not wire order, so lines are stable and readable.
	sort.SliceStable(f.order, func(i, j int) bool { return f.order[i].Key < f.order[j].Key })
	dst = append(dst, '{')
	for i, c := range f.order {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, c.Name)
		dst = append(dst, ':')
		vs := f.vals[c.Key]
		if c.Kind.Repeated() {
			dst = append(dst, '[')
			for j, v := range vs {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = f.appendValue(dst, c, v)
			}
			dst = append(dst, ']')
		} else {
			dst = f.appendValue(dst, c, vs[len(vs)-1]) // protobuf: the last one wins
		}
	}
	return append(dst, '}', '\n'), nil
}

func (f *Formatter) appendValue(dst []byte, c *schema.Column, v any) []byte {
	switch x := v.(type) {
	case uint64:
		switch {
		case c.Kind == schema.KindEnum:
			return strconv.AppendQuote(dst, c.EnumName(x))
		case c.Kind == schema.KindMAC:
			var b strings.Builder
			for i := 5; i >= 0; i-- {
				fmt.Fprintf(&b, "%02x", byte(x>>(8*i)))
				if i > 0 {
					b.WriteByte(':')
				}
			}
			return strconv.AppendQuote(dst, b.String())
		case strings.HasPrefix(c.ClickHouseType, "DateTime"):
			if f.TimesAsMillis {
				return strconv.AppendUint(dst, x*1000, 10)
			}
			return strconv.AppendQuote(dst, time.Unix(int64(x), 0).UTC().Format(time.RFC3339))
		}
		return strconv.AppendUint(dst, x, 10)
	case string:
		return strconv.AppendQuote(dst, x)
	case []byte:
		b, _ := json.Marshal(x) // base64, as protobuf's JSON mapping does
		return append(dst, b...)
	case netip.Addr:
		return strconv.AppendQuote(dst, x.String())
	case schema.LargeCommunity:
		return strconv.AppendQuote(dst, fmt.Sprintf("%d:%d:%d", x.ASN, x.LocalData1, x.LocalData2))
	}
	b, _ := json.Marshal(v)
	return append(dst, b...)
}
