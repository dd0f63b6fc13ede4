package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unwritableDir returns an existing directory this process cannot create files in, even as
// root: immutable (chattr +i, removed at the end of the test), or read-only by its mode for
// another user.
func unwritableDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "unwritable")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return dir
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("running as root, and chattr +i does not work here (%v: %s): no directory root cannot write", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	if f, err := os.CreateTemp(dir, "x"); err == nil {
		f.Close()
		t.Skip("an immutable directory takes files here")
	}
	return dir
}

// TestPathsCheckedAtStart: every path the configuration names is checked before anything
// starts, and an unusable one is refused with its key: an existing directory that is not
// writable, a directory under a regular file, a saved file whose directory is missing, a
// file to read that is not there. flowzero collect --check (CheckPaths without creating)
// refuses the same. A missing output directory is created.
func TestPathsCheckedAtStart(t *testing.T) {
	tmp := t.TempDir()
	regular := filepath.Join(tmp, "regular")
	os.WriteFile(regular, []byte("x"), 0o644)
	locked := unwritableDir(t)
	for _, c := range []struct {
		name   string
		mutate func(*Configuration)
		want   string
	}{
		{"output directory not writable", func(c *Configuration) { c.Outputs.File.Directory = locked },
			"outputs.file.directory: " + locked + " is not writable"},
		{"output directory under a file", func(c *Configuration) { c.Outputs.File.Directory = filepath.Join(regular, "flows") },
			"outputs.file.directory: "},
		{"templates file in a missing directory", func(c *Configuration) {
			c.NetFlow.TemplatesFile = filepath.Join(tmp, "missing", "templates.json")
		}, "netflow.templates-file: the directory " + filepath.Join(tmp, "missing") + " does not exist"},
		{"snapshot in a missing directory", func(c *Configuration) { c.Routing.RIB.Snapshot = filepath.Join(tmp, "missing", "rib.snapshot") },
			"routing.rib.snapshot: the directory " + filepath.Join(tmp, "missing") + " does not exist"},
		{"snapshot in an unwritable directory", func(c *Configuration) { c.Routing.RIB.Snapshot = filepath.Join(locked, "rib.snapshot") },
			"routing.rib.snapshot: " + locked + " is not writable"},
		{"templates file that is a directory", func(c *Configuration) { c.NetFlow.TemplatesFile = tmp },
			"netflow.templates-file: " + tmp + " is a directory"},
		{"MRT dump missing", func(c *Configuration) { c.Routing.MRT = []string{filepath.Join(tmp, "rib.mrt.gz")} },
			"routing.mrt[0]: cannot read the file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t)
			c.mutate(&cfg)
			if err := cfg.CheckPaths(false); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("--check: %v, want an error containing %q", err, c.want)
			}
			a, err := New(cfg, testDeps())
			if err != nil {
				t.Fatal(err)
			}
			err = a.Start()
			if err == nil {
				a.Stop()
				t.Fatalf("started")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("start: %v, want an error containing %q", err, c.want)
			}
			if a.Collector() != nil {
				t.Error("the collector was created before the paths were checked")
			}
		})
	}
	// What is missing and can be made is made.
	cfg := testConfig(t)
	cfg.Outputs.File.Directory = filepath.Join(tmp, "new", "flows")
	cfg.NetFlow.TemplatesFile = filepath.Join(tmp, "templates.json")
	if err := cfg.CheckPaths(false); err != nil {
		t.Fatalf("--check: %v", err)
	}
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	if st, err := os.Stat(cfg.Outputs.File.Directory); err != nil || !st.IsDir() {
		t.Errorf("output directory not created: %v", err)
	}
}
