package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"flowzero/internal/config"
)

// pathKind is what the collector does with a configured path.
type pathKind int

const (
	// writeDir is a directory the collector writes files in; created when missing.
	writeDir pathKind = iota
	// writeFile is a file the collector saves (written aside in its directory, then
	// renamed over it), and may read at start: its directory must exist.
	writeFile
	// writeUnder is a path template (strftime conversions, {agent}) whose files the
	// collector creates: the directory before the first conversion must exist.
	writeUnder
	// readFile is a file the collector reads at start.
	readFile
)

// configuredPath is a path of the configuration and its key.
type configuredPath struct {
	key  string
	path string
	kind pathKind
}

// paths lists every path the configuration names, for the parts it enables.
func (c *Configuration) paths() []configuredPath {
	var out []configuredPath
	add := func(key, path string, kind pathKind) {
		if path != "" {
			out = append(out, configuredPath{key, path, kind})
		}
	}
	if c.Outputs.File.Enabled {
		add("outputs.file.directory", c.Outputs.File.Directory, writeDir)
	}
	if c.Outputs.Store.Enabled && c.Outputs.Store.ClickHouse.URL == "" {
		add("outputs.store.embedded.path", c.Outputs.Store.Embedded.Path, writeDir)
	}
	add("netflow.templates-file", c.NetFlow.TemplatesFile, writeFile)
	add("routing.rib.snapshot", c.Routing.RIB.Snapshot, writeFile)
	for i, f := range c.Routing.MRT {
		add(fmt.Sprintf("routing.mrt[%d]", i), f, readFile)
	}
	if c.Capture.Enabled {
		if p := c.Capture.Server.Output.Path; p != "-" {
			add("capture.server.output.path", p, writeUnder)
		}
		if tls := c.Capture.Server.TLS; tls.Enable {
			add("capture.server.tls.cert", tls.Cert, readFile)
			add("capture.server.tls.key", tls.Key, readFile)
			add("capture.server.tls.client-ca", tls.ClientCA, readFile)
		}
	}
	return out
}

// CheckPaths checks that every path the configuration names can be used, before anything
// starts, and names the key of each that cannot: output directories are created (and a
// file is created and removed in them), the directories of the files the collector saves
// must exist and take a file, the files it reads must open. With create false (flowzero
// collect --check) nothing is created or written: the nearest existing directory must be
// writable (access(2): permissions, a read-only file system, the immutable attribute).
func (c *Configuration) CheckPaths(create bool) error {
	var errs []error
	for _, p := range c.paths() {
		if err := checkPath(p, create); err != nil {
			errs = append(errs, config.Errorf(p.key, "%v", err))
		}
	}
	return errors.Join(errs...)
}

func checkPath(p configuredPath, create bool) error {
	switch p.kind {
	case writeDir:
		if !create {
			return writableDir(p.path, true)
		}
		if err := os.MkdirAll(p.path, 0o755); err != nil {
			return fmt.Errorf("cannot create the directory: %w", err)
		}
		return probe(p.path)
	case writeFile, writeUnder:
		dir := filepath.Dir(p.path)
		if p.kind == writeUnder {
			dir = staticDir(p.path)
		}
		if err := writableDir(dir, false); err != nil {
			return err
		}
		if create {
			if err := probe(dir); err != nil {
				return err
			}
		}
		if p.kind == writeUnder {
			return nil // the file (a FIFO, maybe) is the capture server's to open
		}
		st, err := os.Stat(p.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil
		case err != nil:
			return err
		case st.IsDir():
			return fmt.Errorf("%s is a directory, not a file", p.path)
		}
		if !create {
			return access(p.path)
		}
		f, err := os.OpenFile(p.path, os.O_WRONLY, 0) // neither created nor truncated
		if err != nil {
			return fmt.Errorf("cannot write the file: %w", err)
		}
		return f.Close()
	case readFile:
		f, err := os.Open(p.path)
		if err != nil {
			return fmt.Errorf("cannot read the file: %w", err)
		}
		return f.Close()
	}
	return nil
}

// writableDir checks that dir is a writable directory; with missingOK, a missing one is
// fine when its nearest existing ancestor is (it will be created).
func writableDir(dir string, missingOK bool) error {
	d := dir
	for {
		st, err := os.Stat(d)
		switch {
		case err == nil && !st.IsDir():
			return fmt.Errorf("%s is not a directory", d)
		case err == nil:
			return access(d)
		case errors.Is(err, os.ErrNotExist) && missingOK && filepath.Dir(d) != d:
			d = filepath.Dir(d)
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("the directory %s does not exist: create it, or correct the path", dir)
		default:
			return err
		}
	}
}

// access checks write permission as the kernel would grant it, without writing.
func access(path string) error {
	if err := unix.Access(path, unix.W_OK); err != nil {
		return fmt.Errorf("%s is not writable: %w", path, err)
	}
	return nil
}

// probe creates and removes a file in dir: what root may still be refused (a read-only
// file system, an immutable directory, a full disk's inodes) shows there.
func probe(dir string) error {
	f, err := os.CreateTemp(dir, ".flowzero-write-check-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the probe's name says nothing to the reader
		}
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// staticDir is the directory of a path template before its first conversion (% or {).
func staticDir(path string) string {
	if i := strings.IndexAny(path, "%{"); i >= 0 {
		path = path[:i]
		if !strings.HasSuffix(path, string(filepath.Separator)) {
			return filepath.Dir(path)
		}
		return filepath.Clean(path)
	}
	return filepath.Dir(path)
}
