package filter

import (
	"fmt"
	"strings"
	"testing"
)

func TestComplete(t *testing.T) {
	cat := testCatalog(t)
	for _, c := range []struct {
		text string // | marks the cursor
		want string
	}{
		{"|", "0-0 '' columns keywords=NOT"},
		{"Src|", "0-3 'Src' columns keywords=NOT"},
		{"SrcAS |", "6-6 '' column=SrcAS operators==,!=,<,<=,>,>=,IN,NOTIN"},
		{"SrcAS I|", "6-7 'I' column=SrcAS operators==,!=,<,<=,>,>=,IN,NOTIN"},
		{"SrcAS <|", "6-7 '<' column=SrcAS operators==,!=,<,<=,>,>=,IN,NOTIN"},
		{"SrcAS = |", "8-8 '' columns column=SrcAS op== values"},
		{"SrcAS = AS133|", "8-13 'AS133' columns column=SrcAS op== values"},
		{"SrcAS = AS13335 |", "16-16 '' keywords=AND,OR"},
		{"SrcAS = AS13335 A|", "16-17 'A' keywords=AND,OR"},
		{"SrcAS = AS13335 AND |", "20-20 '' columns keywords=NOT"},
		{"SrcAS = AS13335 AND (Dst|", "21-24 'Dst' columns keywords=NOT"},
		{"(SrcAS = 1 |", "11-11 '' keywords=AND,OR"},
		{"InIfBoundary = ext|", "15-18 'ext' columns column=InIfBoundary op== values"},
		{`InIfDescription LIKE "tra|`, "21-25 'tra' quoted column=InIfDescription op=LIKE values"},
		{"Proto IN (TCP, |", "15-15 '' column=Proto op=IN values"},
		{"Proto IN (|", "10-10 '' column=Proto op=IN values"},
		{"SrcAS = 1 -- comment |", "21-21 ''"},
		{"SrcAS = 1 -- comment\n|", "21-21 '' keywords=AND,OR"},
		{"SrcAS = 1 /* |", "13-13 ''"},
		{"Foo = 1 AND |", "12-12 ''"},
		{"SrcAS = 1 AND |Dst = 2", "14-14 '' columns keywords=NOT"},
		{"Src|AS = 1", "0-3 'Src' columns keywords=NOT"},
		{"DstASPath = |", "12-12 '' column=DstASPath op== values"},
	} {
		offset := strings.IndexByte(c.text, '|')
		text := strings.Replace(c.text, "|", "", 1)
		ctx := Complete(cat, text, offset)
		got := fmt.Sprintf("%d-%d '%s'", ctx.From, ctx.To, ctx.Prefix)
		if ctx.Quoted {
			got += " quoted"
		}
		if ctx.Columns {
			got += " columns"
		}
		if ctx.Keywords != nil {
			got += " keywords=" + strings.Join(ctx.Keywords, ",")
		}
		if ctx.Column != nil {
			got += " column=" + ctx.Column.Name
		}
		if ctx.Operators != nil {
			got += " operators=" + strings.Join(opStrings(ctx.Operators), ",")
		}
		if ctx.Op != "" {
			got += " op=" + string(ctx.Op)
		}
		if ctx.Values {
			got += " values"
		}
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.text, got, c.want)
		}
	}
	ctx := Complete(cat, "SrcPort < ", 10)
	if !ctx.Comparable(cat.Column("DstPort")) || !ctx.Comparable(cat.Column("IPTTL")) || ctx.Comparable(cat.Column("SrcAS")) || ctx.Comparable(cat.Column("SrcPort")) {
		t.Error("SrcPort < compares with ports and numbers")
	}
	ctx = Complete(cat, "SrcAddr = ", 10)
	if !ctx.Comparable(cat.Column("DstAddr")) || ctx.Comparable(cat.Column("SrcAS")) {
		t.Error("SrcAddr = compares with addresses")
	}
}

// FuzzComplete checks that completion never panics and returns a range inside the text.
func FuzzComplete(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, len(s)/2)
	}
	cat := testCatalog(f)
	f.Fuzz(func(t *testing.T, text string, offset int) {
		ctx := Complete(cat, text, offset)
		if ctx.From < 0 || ctx.From > ctx.To || ctx.To > len(text) {
			t.Fatalf("range %d-%d for %d bytes", ctx.From, ctx.To, len(text))
		}
	})
}
