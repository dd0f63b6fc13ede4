package outlet

import "testing"

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
