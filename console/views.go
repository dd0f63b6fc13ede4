package console

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"flowzero/internal/atomicfile"
	"flowzero/internal/clock"
)

// View is a saved Visualize state, as the API answers it. State is always at StateVersion
// (migrated when read); Version is that version.
type View struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Owner   string    `json:"owner"`
	Shared  bool      `json:"shared"`
	Version int       `json:"version"`
	State   ViewState `json:"state"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Bounds of the saved views.
const (
	maxViewName     = 100
	maxViewsPerUser = 500
	maxViews        = 10_000
	maxViewBody     = 64 << 10
)

// viewsFormat is the format of the views file: {"format": 1, "views": [records]}. A record
// holds its state as it was saved, with the state's version; records are migrated when the
// file is read, and written back at the current version with the next change.
const viewsFormat = 1

type viewsFile struct {
	Format int               `json:"format"`
	Views  []json.RawMessage `json:"views"`
}

// viewRecord is a view in the file: its state stays raw until migrated.
type viewRecord struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Owner   string          `json:"owner"`
	Shared  bool            `json:"shared"`
	Version int             `json:"version"`
	State   json.RawMessage `json:"state"`
	Created time.Time       `json:"created"`
	Updated time.Time       `json:"updated"`
}

// viewStore holds the saved views in memory and in one JSON file, rewritten whole and
// atomically (a temporary file renamed over it) on each change: views are few and change
// at a person's pace.
type viewStore struct {
	path  string
	clock clock.Clock
	// perUser and total bound the views (maxViewsPerUser, maxViews; lowered by tests).
	perUser, total int

	mu    sync.Mutex
	views []View // in creation order
	// unreadable are records no migration reads (edited by hand, written by a newer build):
	// left out of the API, written back as they are so that nothing is lost.
	unreadable []json.RawMessage
}

// errViewsFile is a views file that cannot be used; the console refuses to start rather
// than overwrite it.
var errViewsFile = errors.New("saved views file")

// openViewStore reads the views file (absent: no views yet).
func openViewStore(path string, c clock.Clock) (*viewStore, []string, error) {
	s := &viewStore{path: path, clock: clock.Or(c), perUser: maxViewsPerUser, total: maxViews}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w %s: %v", errViewsFile, path, err)
	}
	var f viewsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("%w %s: not JSON (%v); fix or move it away", errViewsFile, path, err)
	}
	switch {
	case f.Format == 0:
		return nil, nil, fmt.Errorf("%w %s: no \"format\": not a views file", errViewsFile, path)
	case f.Format > viewsFormat:
		return nil, nil, fmt.Errorf("%w %s: format %d was written by a newer flowzero (this one reads %d)", errViewsFile, path, f.Format, viewsFormat)
	}
	var warnings []string
	for i, raw := range f.Views {
		v, err := readRecord(raw)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("views[%d]: %v (kept in the file, not served)", i, err))
			s.unreadable = append(s.unreadable, raw)
			continue
		}
		s.views = append(s.views, v)
	}
	return s, warnings, nil
}

// readRecord decodes a record of the file and migrates its state.
func readRecord(raw json.RawMessage) (View, error) {
	var r viewRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return View{}, err
	}
	if r.ID == "" || r.Owner == "" || r.Name == "" {
		return View{}, errors.New("id, name and owner are needed")
	}
	state := r.State
	// The record's version is the state's when the state does not say (it always does
	// when written by this package).
	var probe map[string]json.RawMessage
	if json.Unmarshal(state, &probe) == nil && probe != nil {
		if _, ok := probe["version"]; !ok && r.Version != 0 {
			probe["version"], _ = json.Marshal(r.Version)
			state, _ = json.Marshal(probe)
		}
	}
	s, err := MigrateState(state)
	if err != nil {
		return View{}, fmt.Errorf("view %s: %w", r.ID, err)
	}
	return View{ID: r.ID, Name: r.Name, Owner: r.Owner, Shared: r.Shared, Version: StateVersion, State: s, Created: r.Created, Updated: r.Updated}, nil
}

// save writes the views file atomically. The caller holds mu.
func (s *viewStore) save(views []View) error {
	f := viewsFile{Format: viewsFormat}
	for _, v := range views {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		f.Views = append(f.Views, b)
	}
	f.Views = append(f.Views, s.unreadable...)
	if f.Views == nil {
		f.Views = []json.RawMessage{}
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(s.path, append(data, '\n'))
}

// visible tells if user may read v: their own views and the shared ones.
func visible(v *View, login string) bool { return v.Owner == login || v.Shared }

// list returns the views user may read, their own first, then by name.
func (s *viewStore) list(login string) []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []View{}
	for i := range s.views {
		if visible(&s.views[i], login) {
			out = append(out, s.views[i])
		}
	}
	slices.SortStableFunc(out, func(a, b View) int {
		if (a.Owner == login) != (b.Owner == login) {
			if a.Owner == login {
				return -1
			}
			return 1
		}
		return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	})
	return out
}

// get returns a view user may read.
func (s *viewStore) get(login, id string) (View, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.views {
		if s.views[i].ID == id && visible(&s.views[i], login) {
			return s.views[i], true
		}
	}
	return View{}, false
}

var (
	errTooManyViews = errors.New("too many views")
	errNotFound     = errors.New("no such view")
	errNotOwner     = errors.New("only its owner deletes a view")
)

// put saves a view of user under name: a view of theirs of the same name is replaced (same
// id), otherwise a new one is created. created tells which.
func (s *viewStore) put(login, name string, shared bool, state ViewState) (v View, created bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now().UTC().Truncate(time.Millisecond)
	views := slices.Clone(s.views)
	idx := slices.IndexFunc(views, func(v View) bool { return v.Owner == login && v.Name == name })
	if idx >= 0 {
		views[idx].Shared, views[idx].State, views[idx].Updated = shared, state, now
		v = views[idx]
	} else {
		mine := 0
		for i := range views {
			if views[i].Owner == login {
				mine++
			}
		}
		if mine >= s.perUser {
			return View{}, false, fmt.Errorf("%w: %d saved views per user at most; delete some", errTooManyViews, s.perUser)
		}
		if len(views)+len(s.unreadable) >= s.total {
			return View{}, false, fmt.Errorf("%w: %d saved views at most", errTooManyViews, s.total)
		}
		v = View{ID: newID(), Name: name, Owner: login, Shared: shared, Version: StateVersion, State: state, Created: now, Updated: now}
		views = append(views, v)
		created = true
	}
	if err := s.save(views); err != nil {
		return View{}, false, err
	}
	s.views = views
	return v, created, nil
}

// remove deletes a view of user.
func (s *viewStore) remove(login, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := slices.IndexFunc(s.views, func(v View) bool { return v.ID == id })
	if idx < 0 || !visible(&s.views[idx], login) {
		return errNotFound
	}
	if s.views[idx].Owner != login {
		return errNotOwner
	}
	views := slices.Delete(slices.Clone(s.views), idx, idx+1)
	if err := s.save(views); err != nil {
		return err
	}
	s.views = views
	return nil
}

func (s *viewStore) counts() (views, unreadable int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.views), len(s.unreadable)
}

// newID returns 13 random base32 characters (64 bits): short in a link, never guessed.
func newID() string {
	var b [8]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// viewRequest is the body of POST /api/v0/console/views.
type viewRequest struct {
	Name   string          `json:"name"`
	Shared bool            `json:"shared"`
	State  json.RawMessage `json:"state"`
}

// checkViewName trims a name and checks it.
func checkViewName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > maxViewName {
		return "", fmt.Errorf("name: 1 to %d bytes", maxViewName)
	}
	if !printable(name) {
		return "", errors.New("name: printable text only")
	}
	return name, nil
}
