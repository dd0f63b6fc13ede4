package console

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"flowzero/internal/testutil"
)

// FuzzMigrateState: any bytes posted as a state either fail with an error or give a valid
// state that reads back unchanged (migration is idempotent and keeps nothing unchecked).
func FuzzMigrateState(f *testing.F) {
	fx, err := os.ReadFile("testdata/states.json")
	if err != nil {
		f.Fatal(err)
	}
	var cases struct {
		Neutral    json.RawMessage
		Migrations []struct{ Input json.RawMessage }
		Invalid    []struct{ Input json.RawMessage }
		Unreadable []struct{ Input json.RawMessage }
	}
	if err := json.Unmarshal(fx, &cases); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(cases.Neutral))
	for _, c := range cases.Migrations {
		f.Add([]byte(c.Input))
	}
	for _, c := range cases.Invalid {
		f.Add([]byte(c.Input))
	}
	for _, c := range cases.Unreadable {
		f.Add([]byte(c.Input))
	}
	// Versions past int's range (int(1e19) was negative: a migration that does not exist).
	for _, v := range []string{"1e300", "1e19", "9223372036854775808", "-1", "2"} {
		f.Add([]byte(`{"version": ` + v + `}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := MigrateState(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("MigrateState(%q) gave an invalid state: %v", data, err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := MigrateState(b)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("state %s does not read back: %+v, %v", b, again, err)
		}
	})
}

// FuzzViewsFile: a views file of any content is refused or read; what is read is written
// back and read again the same, unreadable records included.
func FuzzViewsFile(f *testing.F) {
	f.Add([]byte(`{"format": 1, "views": []}`))
	f.Add([]byte(`{"format": 1, "views": [{"id": "a", "name": "n", "owner": "o", "version": 0, "state": {"graphType": "lines"}}, {"id": "b"}]}`))
	f.Add([]byte(`{"format": 2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "views.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, _, err := openViewStore(path, testutil.Clock())
		if err != nil {
			return
		}
		s.mu.Lock()
		err = s.save(s.views)
		s.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := openViewStore(path, testutil.Clock())
		if err != nil {
			t.Fatalf("a file written by save is refused: %v", err)
		}
		if len(again.views) != len(s.views) || len(again.unreadable) != len(s.unreadable) {
			t.Fatalf("read %d views and %d unreadable, then %d and %d", len(s.views), len(s.unreadable), len(again.views), len(again.unreadable))
		}
		for i := range s.views {
			a, b := s.views[i], again.views[i]
			if a.ID != b.ID || a.Name != b.Name || !reflect.DeepEqual(a.State, b.State) {
				t.Fatalf("view %d changed: %+v then %+v", i, a, b)
			}
		}
	})
}
