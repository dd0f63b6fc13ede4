package console

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"flowzero/internal/config"
)

// statesFixture is testdata/states.json, whose cases the front end runs too
// (console/frontend/src/state/visualize.test.ts).
type statesFixture struct {
	Current    int             `json:"current"`
	Neutral    json.RawMessage `json:"neutral"`
	Migrations []struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		Want  json.RawMessage `json:"want"`
	} `json:"migrations"`
	Invalid []struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		Key   string          `json:"key"`
	} `json:"invalid"`
	Unreadable []struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"unreadable"`
}

func readStatesFixture(t *testing.T) statesFixture {
	t.Helper()
	data, err := os.ReadFile("testdata/states.json")
	if err != nil {
		t.Fatal(err)
	}
	var f statesFixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// sameJSON compares two JSON documents as values.
func sameJSON(t *testing.T, got any, want json.RawMessage) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var gv, wv any
	json.Unmarshal(g, &gv)
	if err := json.Unmarshal(want, &wv); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(gv)
	wb, _ := json.Marshal(wv)
	if string(gb) != string(wb) {
		t.Errorf("got  %s\nwant %s", gb, wb)
	}
}

func TestStatesFixture(t *testing.T) {
	f := readStatesFixture(t)
	if f.Current != StateVersion {
		t.Fatalf("states.json is at version %d, StateVersion is %d", f.Current, StateVersion)
	}
	t.Run("neutral", func(t *testing.T) {
		sameJSON(t, NeutralState(), f.Neutral)
		// Every key of the front end's state is a field here, and no other.
		var keys map[string]any
		json.Unmarshal(f.Neutral, &keys)
		got, _ := json.Marshal(NeutralState())
		var gotKeys map[string]any
		json.Unmarshal(got, &gotKeys)
		if len(keys) != len(gotKeys) {
			t.Errorf("%d keys in states.json, %d in ViewState", len(keys), len(gotKeys))
		}
	})
	for _, c := range f.Migrations {
		t.Run("migration/"+c.Name, func(t *testing.T) {
			s, err := MigrateState(c.Input)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, s, c.Want)
		})
	}
	for _, c := range f.Invalid {
		t.Run("invalid/"+c.Name, func(t *testing.T) {
			_, err := MigrateState(c.Input)
			var ke *config.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("MigrateState(%s) = %v, want an error naming state.%s", c.Input, err, c.Key)
			}
			if ke.Key != "state."+c.Key {
				t.Errorf("error names %s, want state.%s (%v)", ke.Key, c.Key, err)
			}
		})
	}
	for _, c := range f.Unreadable {
		t.Run("unreadable/"+c.Name, func(t *testing.T) {
			if _, err := MigrateState(c.Input); !errors.Is(err, errUnreadable) {
				t.Errorf("MigrateState(%s) = %v, want errUnreadable", c.Input, err)
			}
		})
	}
}

// TestMigrateStateVersionBounds: a version past StateVersion, however large, is a newer
// console's (int(1e19) overflowed to a negative number and called a missing migration,
// panicking the views handler and console.New); negative and fractional ones are not
// versions.
func TestMigrateStateVersionBounds(t *testing.T) {
	for _, v := range []string{"1e300", "1e19", "9223372036854775808", "18446744073709551616", "2", "-1", "1.5", "-0.5", `"1"`, "null"} {
		input := []byte(`{"version": ` + v + `}`)
		if _, err := MigrateState(input); !errors.Is(err, errUnreadable) {
			t.Errorf("MigrateState(%s) = %v, want errUnreadable", input, err)
		}
	}
	if _, err := MigrateState([]byte(`{"version": 1e300}`)); err == nil || !strings.Contains(err.Error(), "newer console") {
		t.Errorf("version 1e300: %v, want a newer console's", err)
	}
}

func TestMigrateStateStrict(t *testing.T) {
	for _, c := range []struct {
		input, want string
	}{
		{`{"version": 1, "grpah": "lines"}`, "state.grpah: unknown key"},
		{`{"version": 1, "dimensions": ["SrcAS", "srcas"]}`, `state.dimensions: "srcas" appears twice`},
		{`{"version": 1, "dimensions": null}`, "state.dimensions: wrong type: null"},
		{`{"version": 1, "filter": "` + strings.Repeat("x", maxStateFilter+1) + `"}`, "state.filter: 4097 bytes, at most 4096"},
		{`{"version": 1, "dimensions": ["A","B","C","D","E","F","G","H","I","J","K"]}`, "state.dimensions: 11 dimensions, at most 10"},
		{`{"version": 1.5}`, "version: not a version number: 1.5"},
	} {
		_, err := MigrateState([]byte(c.input))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("MigrateState(%.60s) = %v, want %q", c.input, err, c.want)
		}
	}
}
