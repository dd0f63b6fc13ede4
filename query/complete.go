package query

import (
	"context"
	"fmt"
	"strings"
	"time"

	"flowzero/query/catalog"
	"flowzero/query/chsql"
	"flowzero/query/filter"
)

// Completion is one thing that may be typed at the cursor: apply replaces the bytes From..To
// of the answer.
type Completion struct {
	Label  string `json:"label"`
	Kind   string `json:"kind"` // column, operator, value or keyword
	Detail string `json:"detail,omitempty"`
	Apply  string `json:"apply"`
}

// CompleteResult is the answer of a completion.
type CompleteResult struct {
	From        int          `json:"from"`
	To          int          `json:"to"`
	Completions []Completion `json:"completions"`
}

// ValueSource proposes values of a column that begin with or contain prefix, the most
// useful first (the engine's: the most frequent in recent flows, AS names).
type ValueSource interface {
	Values(ctx context.Context, col *catalog.Column, prefix string, limit int) ([]Completion, error)
}

// MaxCompletions bounds the values a completion asks its ValueSource for.
const MaxCompletions = 50

// Complete proposes what may come at byte offset of a filter: columns, operators for a
// column, its values (fixed lists for enums, Ethernet types and protocols, the others from
// values), keywords. Values come from values, which may fail: the other proposals still
// come.
func Complete(ctx context.Context, cat *catalog.Catalog, values ValueSource, text string, offset int) CompleteResult {
	fc := filter.Complete(cat, text, offset)
	out := CompleteResult{From: fc.From, To: fc.To, Completions: []Completion{}}
	prefix := strings.ToLower(fc.Prefix)
	add := func(c Completion) { out.Completions = append(out.Completions, c) }
	if fc.Values && fc.Column != nil {
		col := fc.Column
		var fixed []string
		switch col.Kind {
		case catalog.KindEnum:
			fixed = col.Enum
		case catalog.KindEType:
			fixed = []string{"IPv4", "IPv6"}
		case catalog.KindProtocol:
			for _, p := range cat.Protocols {
				fixed = append(fixed, p.Name)
			}
		}
		for _, v := range fixed {
			if strings.HasPrefix(strings.ToLower(v), prefix) {
				add(Completion{Label: v, Kind: "value", Detail: col.Name, Apply: applyValue(col, v)})
			}
		}
		if fixed == nil && values != nil && col.Kind != catalog.KindTime {
			vs, _ := values.Values(ctx, col, fc.Prefix, MaxCompletions)
			for _, v := range vs {
				add(v)
			}
		}
	}
	if fc.Columns && !fc.Quoted {
		for _, c := range cat.Columns() {
			if c.Filter && fc.Comparable(c) && strings.HasPrefix(strings.ToLower(c.Name), prefix) {
				add(Completion{Label: c.Name, Kind: "column", Detail: c.Type, Apply: c.Name})
			}
		}
	}
	for _, op := range fc.Operators {
		if strings.HasPrefix(strings.ToLower(string(op)), prefix) {
			apply := string(op)
			if op == filter.OpIn || op == filter.OpNotIn {
				apply += " ("
			}
			add(Completion{Label: string(op), Kind: "operator", Detail: operatorDetail(op), Apply: apply})
		}
	}
	for _, kw := range fc.Keywords {
		if strings.HasPrefix(strings.ToLower(kw), prefix) {
			add(Completion{Label: kw, Kind: "keyword", Apply: kw})
		}
	}
	return out
}

func operatorDetail(op filter.Op) string {
	switch op {
	case filter.OpEq:
		return "equals (contains, for lists)"
	case filter.OpNe:
		return "differs"
	case filter.OpIn:
		return "one of a list"
	case filter.OpNotIn:
		return "none of a list"
	case filter.OpSub:
		return "inside a prefix"
	case filter.OpNotSub:
		return "outside a prefix"
	case filter.OpLike, filter.OpILike:
		return "matches a pattern (% any text, _ one character)"
	case filter.OpUnlike, filter.OpIUnlike:
		return "does not match a pattern"
	}
	return "compares"
}

// applyValue is a value as the filter language reads it back: quoted for strings and
// anything that is not one word.
func applyValue(col *catalog.Column, v string) string {
	if col.Kind == catalog.KindString || !bareWord(v) {
		return filter.Quote(v)
	}
	return v
}

func bareWord(s string) bool {
	if s == "" || strings.Contains(s, "--") || strings.Contains(s, "/*") {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '.' || c == ':' || c == '/' || c == '-' || c == '+' ||
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// Complete proposes completions for a filter, with values from the engine.
func (s *Service) Complete(ctx context.Context, text string, offset int) CompleteResult {
	return Complete(ctx, s.Catalog(ctx), engineValues{s}, text, offset)
}

// completionWindow is how far back completion looks for values.
const completionWindow = 10 * time.Minute

// engineValues proposes the values of a column with the most traffic in the flows of the
// last completionWindow (the finest aggregated table when it holds the column), and AS
// numbers from the asns dictionary by name.
type engineValues struct{ s *Service }

func (v engineValues) Values(ctx context.Context, col *catalog.Column, prefix string, limit int) ([]Completion, error) {
	s := v.s
	cat := s.Catalog(ctx)
	now := s.clock.Now()
	table := cat.Flows
	if col.Aggregated && len(cat.Aggregated) > 0 {
		table = cat.Aggregated[0]
	}
	e := exprs{cat: cat, t4: 32, t6: 128}
	x := col.Name
	var label string
	switch col.Kind {
	case catalog.KindAS:
		label = "concat('AS', toString(x))"
	case catalog.KindASPath:
		x, label = "arrayJoin("+col.Name+")", "concat('AS', toString(x))"
	case catalog.KindCommunities:
		x, label = "arrayJoin("+col.Name+")", communityText("x")
	case catalog.KindLargeCommunities:
		x, label = "arrayJoin("+col.Name+")", largeCommunityText("x")
	case catalog.KindArray:
		x = "arrayJoin(" + col.Name + ")"
		label = "toString(x)"
		if col.Elem == catalog.KindAddress {
			label = addressText("x")
		}
	default:
		label = e.display(col, "x")
	}
	detail := "''"
	if (col.Kind == catalog.KindAS || col.Kind == catalog.KindASPath) && cat.ASNames {
		detail = e.asName("x")
	}
	// What the user typed, AS13335 or 13335, matches the label's start or the detail.
	match := fmt.Sprintf("startsWith(lower(label), %s)", chsql.String(strings.ToLower(prefix)))
	if col.Kind == catalog.KindAS || col.Kind == catalog.KindASPath {
		digits := strings.TrimPrefix(strings.ToLower(prefix), "as")
		match = fmt.Sprintf("(startsWith(toString(x), %s) OR positionCaseInsensitive(detail, %s) > 0)",
			chsql.String(digits), chsql.String(prefix))
	} else if col.Kind == catalog.KindString || col.Kind == catalog.KindPrefix {
		match = fmt.Sprintf("positionCaseInsensitive(label, %s) > 0", chsql.String(prefix))
	}
	sql := fmt.Sprintf("SELECT label, detail, 1 AS rank, n FROM (\n"+
		"  SELECT %s AS x, %s AS label, %s AS detail, sum(Bytes * SamplingRate) AS n\n  FROM %s\n  WHERE %s\n  GROUP BY x\n)\n"+
		"WHERE label != '' AND %s\nORDER BY n DESC, label\nLIMIT %d",
		x, label, detail, quoteTable(cat, table), timeRange(now.Add(-completionWindow), now.Add(time.Second)), match, limit)
	if (col.Kind == catalog.KindAS || col.Kind == catalog.KindASPath) && cat.ASNames && prefix != "" {
		// And the AS numbers of the dictionary whose name holds what was typed, seen or not.
		sql += fmt.Sprintf("\nUNION ALL\nSELECT concat('AS', toString(asn)) AS label, name AS detail, 2 AS rank, 0 AS n FROM %s\n"+
			"WHERE positionCaseInsensitive(name, %s) > 0 OR startsWith(toString(asn), %s)\nORDER BY asn\nLIMIT %d",
			chsql.Table(cat.Database, "asns"), chsql.String(prefix), chsql.String(strings.TrimPrefix(strings.ToLower(prefix), "as")), limit)
	}
	sql = fmt.Sprintf("SELECT label, any(detail) FROM (\n%s\n)\nGROUP BY label\nORDER BY min(rank), max(n) DESC, label\nLIMIT %d", sql, limit)
	res, err := s.run(ctx, sql, 2, s.cfg.CompletionTimeout)
	if err != nil {
		s.log.Debug("query: completion values", "column", col.Name, "error", err)
		return nil, err
	}
	var out []Completion
	for _, row := range res.Data {
		l := cellString(row[0])
		out = append(out, Completion{Label: l, Kind: "value", Detail: cellString(row[1]), Apply: applyValue(col, l)})
	}
	return out, nil
}
