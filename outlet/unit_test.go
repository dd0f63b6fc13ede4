package outlet

import (
	"strings"
	"testing"
)

// TestParsePlan: the commit metadata recording a unit's range, with or without its token
// suffix, reads back as written; anything else (another client's metadata, a damaged one)
// is no plan.
func TestParsePlan(t *testing.T) {
	for _, pl := range []plan{{first: 0, end: 2}, {first: 100, end: 250, again: "again-3w5e11264sgsf"}} {
		got, ok := parsePlan(planMetadata(pl))
		if !ok || got != pl {
			t.Errorf("parsePlan(%q) = %+v, %v; want %+v", planMetadata(pl), got, ok, pl)
		}
	}
	for _, meta := range []string{"", "flowzero-unit", "flowzero-unit 5", "flowzero-unit 5 5", "flowzero-unit 6 5",
		"flowzero-unit -1 5", "flowzero-unit 1 5 again-", "flowzero-unit 1 5 again-x!", "flowzero-unit 1 5 other",
		"flowzero-unit 1 5 again-1 more", "flowzero-units 1 5", "other 1 5", "flowzero-unit 1 5x"} {
		if pl, ok := parsePlan(meta); ok {
			t.Errorf("parsePlan(%q) = %+v, want no plan", meta, pl)
		}
	}
}

// FuzzParsePlan checks that any commit metadata (which any client of the group can write)
// gives no plan or a valid one, which planMetadata writes back as the same plan.
func FuzzParsePlan(f *testing.F) {
	for _, seed := range []string{"flowzero-unit 0 2", "flowzero-unit 100 250 again-3w5e11264sgsf",
		"flowzero-unit 1 5 again-", "flowzero-unit 6 5", " flowzero-unit\t1\n9 ", "flowzero-unit 1 5 again-zzzzzzzzzzzzzz"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, meta string) {
		pl, ok := parsePlan(meta)
		if !ok {
			if pl != (plan{}) {
				t.Fatalf("%q: no plan, but %+v", meta, pl)
			}
			return
		}
		if pl.first < 0 || pl.end <= pl.first || (pl.again != "" && !strings.HasPrefix(pl.again, "again-")) {
			t.Fatalf("%q: invalid plan %+v", meta, pl)
		}
		if back, ok := parsePlan(planMetadata(pl)); !ok || back != pl {
			t.Fatalf("%q: %+v written as %q reads back as %+v, %v", meta, pl, planMetadata(pl), back, ok)
		}
	})
}

// TestUnitAdd: a unit's time range is that of the flows added, whatever their order and
// however the counts come (one flow, or a closed unit merged, possibly empty).
func TestUnitAdd(t *testing.T) {
	var u unit
	u.add(0, 5, 5) // an empty unit merged: no flows, no time
	u.add(1, 10, 10)
	u.add(3, 4, 12)
	u.add(0, 1, 100)
	if u.flows != 4 || u.minTime != 4 || u.maxTime != 12 {
		t.Errorf("flows %d from %d to %d, want 4 from 4 to 12", u.flows, u.minTime, u.maxTime)
	}
	var z unit
	z.add(1, 0, 0)
	z.add(2, 7, 9)
	if z.flows != 3 || z.minTime != 0 || z.maxTime != 9 {
		t.Errorf("flows %d from %d to %d, want 3 from 0 to 9", z.flows, z.minTime, z.maxTime)
	}
}
