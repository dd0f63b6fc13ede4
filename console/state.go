package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"flowzero/internal/config"
)

// StateVersion is the version of the Visualize state the console writes (the front end's
// STATE_VERSION in src/state/visualize.ts).
const StateVersion = 1

// ViewState is every setting of the Visualize page, as the front end keeps it in the URL and
// in saved views. Keys left out of a stored state take the values of NeutralState.
type ViewState struct {
	Version        int      `json:"version"`
	Graph          string   `json:"graph"`
	Start          string   `json:"start"`
	End            string   `json:"end"`
	Dimensions     []string `json:"dimensions"`
	Limit          int      `json:"limit"`
	TopBy          string   `json:"topBy"`
	Units          string   `json:"units"`
	Filter         string   `json:"filter"`
	Truncate4      int      `json:"truncate4"`
	Truncate6      int      `json:"truncate6"`
	Bidirectional  bool     `json:"bidirectional"`
	PreviousPeriod bool     `json:"previousPeriod"`
	Refresh        int      `json:"refresh"`
}

// Bounds of a state, the same as the front end's.
const (
	maxStateText       = 100
	maxStateFilter     = 4096
	maxStateDimensions = 10
	maxStateLimit      = 1000
)

var (
	graphTypes     = []string{"stacked", "stacked100", "lines", "grid", "sankey", "heatmap"}
	topByChoices   = []string{"avg", "max", "last", "p95"}
	unitsChoices   = []string{"l3bps", "l2bps", "pps", "fps", "inl2%", "outl2%"}
	refreshChoices = []int{0, 10, 30, 60, 300}
	dimensionRe    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
)

// NeutralState is the value of every key a state leaves out. It is part of the format: a
// change of it is a new version whose migration writes the old value explicitly.
func NeutralState() ViewState {
	return ViewState{
		Version:    StateVersion,
		Graph:      "stacked",
		Start:      "6 hours ago",
		End:        "now",
		Dimensions: []string{},
		Limit:      10,
		TopBy:      "avg",
		Units:      "l3bps",
		Truncate4:  32,
		Truncate6:  128,
	}
}

// errUnreadable marks a state that no migration can read (not an object, a newer version).
var errUnreadable = errors.New("unreadable state")

// stateMigrations[v] turns a raw state of version v into one of version v+1.
var stateMigrations = map[int]func(map[string]json.RawMessage) map[string]json.RawMessage{
	0: fromAkvorado,
}

// fromAkvorado reads Akvorado's Visualize state (version 0 here): its users keep their
// saved states. humanStart/humanEnd are what was typed, start/end the times of its last run.
func fromAkvorado(raw map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	rename := map[string]string{
		"graphType": "graph", "limitType": "topBy", "truncate-v4": "truncate4", "truncate-v6": "truncate6",
		"previousPeriod": "previousPeriod", "bidirectional": "bidirectional", "dimensions": "dimensions",
		"limit": "limit", "units": "units", "filter": "filter",
	}
	for from, to := range rename {
		if v, ok := raw[from]; ok {
			out[to] = v
		}
	}
	for key, human := range map[string]string{"start": "humanStart", "end": "humanEnd"} {
		if v, ok := raw[human]; ok {
			out[key] = v
		} else if v, ok := raw[key]; ok {
			out[key] = v
		}
	}
	return out
}

// stateVersion reads the version of a raw state: Akvorado's states carry none.
func stateVersion(raw map[string]json.RawMessage) (int, error) {
	v, ok := raw["version"]
	if !ok {
		_, graphType := raw["graphType"]
		_, humanStart := raw["humanStart"]
		if graphType || humanStart {
			return 0, nil
		}
		return StateVersion, nil
	}
	var n float64
	if err := json.Unmarshal(v, &n); err != nil || n < 0 || n != math.Trunc(n) || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return 0, fmt.Errorf("%w: version: not a version number: %s", errUnreadable, v)
	}
	// Compared before the conversion: int(1e19) is negative, which would pass for an
	// old version without a migration.
	if n > StateVersion {
		return 0, fmt.Errorf("%w: version %s comes from a newer console (this one reads up to %d)", errUnreadable, v, StateVersion)
	}
	return int(n), nil
}

// MigrateState reads a stored or posted state of any known version and returns it at
// StateVersion, every key checked: an error names the key ("state.units: ..."). A state
// of a newer version than this build knows is refused.
func MigrateState(data []byte) (ViewState, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return ViewState{}, fmt.Errorf("%w: a state is a JSON object", errUnreadable)
	}
	v, err := stateVersion(raw)
	if err != nil {
		return ViewState{}, err
	}
	for ; v < StateVersion; v++ {
		migrate := stateMigrations[v]
		if migrate == nil {
			return ViewState{}, fmt.Errorf("%w: no migration from version %d", errUnreadable, v)
		}
		raw = migrate(raw)
	}
	delete(raw, "version")
	s := NeutralState()
	// Each key is decoded on its own so that an error names it; unknown keys are refused
	// like in the configuration: a typo must not be dropped silently.
	fields := map[string]any{
		"graph": &s.Graph, "start": &s.Start, "end": &s.End, "dimensions": &s.Dimensions,
		"limit": &s.Limit, "topBy": &s.TopBy, "units": &s.Units, "filter": &s.Filter,
		"truncate4": &s.Truncate4, "truncate6": &s.Truncate6, "bidirectional": &s.Bidirectional,
		"previousPeriod": &s.PreviousPeriod, "refresh": &s.Refresh,
	}
	for key, value := range raw {
		dst, ok := fields[key]
		if !ok {
			return ViewState{}, config.Errorf("state."+key, "unknown key")
		}
		dec := json.NewDecoder(bytes.NewReader(value))
		if err := dec.Decode(dst); err != nil || bytes.Equal(bytes.TrimSpace(value), []byte("null")) {
			return ViewState{}, config.Errorf("state."+key, "wrong type: %s", value)
		}
	}
	return s, s.Validate()
}

// Validate checks every value of a state and names the first bad key.
func (s ViewState) Validate() error {
	oneOf := func(key, v string, choices []string) error {
		for _, c := range choices {
			if v == c {
				return nil
			}
		}
		return config.Errorf("state."+key, "%q is not one of %s", v, strings.Join(choices, ", "))
	}
	if err := oneOf("graph", s.Graph, graphTypes); err != nil {
		return err
	}
	for key, v := range map[string]string{"start": s.Start, "end": s.End} {
		if strings.TrimSpace(v) == "" || len(v) > maxStateText {
			return config.Errorf("state."+key, "a time of 1 to %d characters is needed", maxStateText)
		}
	}
	if len(s.Dimensions) > maxStateDimensions {
		return config.Errorf("state.dimensions", "%d dimensions, at most %d", len(s.Dimensions), maxStateDimensions)
	}
	seen := map[string]bool{}
	for _, d := range s.Dimensions {
		if !dimensionRe.MatchString(d) {
			return config.Errorf("state.dimensions", "%q is not a column name", d)
		}
		if seen[strings.ToLower(d)] {
			return config.Errorf("state.dimensions", "%q appears twice", d)
		}
		seen[strings.ToLower(d)] = true
	}
	if s.Limit < 1 || s.Limit > maxStateLimit {
		return config.Errorf("state.limit", "%d is not in 1..%d", s.Limit, maxStateLimit)
	}
	if err := oneOf("topBy", s.TopBy, topByChoices); err != nil {
		return err
	}
	if err := oneOf("units", s.Units, unitsChoices); err != nil {
		return err
	}
	if len(s.Filter) > maxStateFilter {
		return config.Errorf("state.filter", "%d bytes, at most %d", len(s.Filter), maxStateFilter)
	}
	if s.Truncate4 < 0 || s.Truncate4 > 32 {
		return config.Errorf("state.truncate4", "%d is not a prefix length in 0..32", s.Truncate4)
	}
	if s.Truncate6 < 0 || s.Truncate6 > 128 {
		return config.Errorf("state.truncate6", "%d is not a prefix length in 0..128", s.Truncate6)
	}
	for _, r := range refreshChoices {
		if s.Refresh == r {
			return nil
		}
	}
	return config.Errorf("state.refresh", "%d is not one of 0, 10, 30, 60, 300 seconds", s.Refresh)
}
