// Package testdata locates the project's shared real captures (../shared/testdata relative to
// the repository root) so that tests read them in place and skip cleanly when they are absent.
package testdata

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	rootDir  string
)

// Root returns the absolute path of the shared test data folder, or "" when it cannot be
// found: ../shared/testdata beside the repository, or beside the main checkout when the
// repository is a git worktree of it (git worktree add). FLOWZERO_TESTDATA overrides the lookup.
func Root() string {
	rootOnce.Do(func() {
		if d := os.Getenv("FLOWZERO_TESTDATA"); d != "" {
			rootDir = d
			return
		}
		dir, err := os.Getwd()
		if err != nil {
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				// bench/ is a module of its own: keep climbing to the project's root.
				if _, err := os.Stat(filepath.Join(dir, "..", "go.mod")); err != nil {
					for _, top := range []string{dir, mainCheckout(dir)} {
						if top == "" {
							continue
						}
						cand := filepath.Join(top, "..", "shared", "testdata")
						if st, err := os.Stat(cand); err == nil && st.IsDir() {
							rootDir, _ = filepath.Abs(cand)
							return
						}
					}
					return
				}
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				return
			}
			dir = parent
		}
	})
	return rootDir
}

// mainCheckout returns the root of the main checkout when dir is a linked git worktree (its
// .git is a file "gitdir: MAIN/.git/worktrees/NAME", whose commondir file leads to MAIN/.git),
// or "".
func mainCheckout(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "" // a directory (the main checkout itself) or no git at all
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return ""
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(dir, gitdir)
	}
	common, err := os.ReadFile(filepath.Join(gitdir, "commondir"))
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(common))
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitdir, c)
	}
	return filepath.Dir(filepath.Clean(c))
}

// Path returns the absolute path of a file under the shared test data folder, for example
// Path(t, "netflow", "data.pcap"). The test is skipped with a clear message when the folder
// is absent; it fails when the folder exists but the file does not.
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	root := Root()
	if root == "" {
		tb.Skip("shared test data not found (expected ../shared/testdata next to the repository, or FLOWZERO_TESTDATA)")
	}
	p := filepath.Join(append([]string{root}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("test data %s: %v", p, err)
	}
	return p
}

// Glob returns the files matching pattern under the shared test data folder, sorted, skipping
// the test when the folder is absent.
func Glob(tb testing.TB, pattern string) []string {
	tb.Helper()
	root := Root()
	if root == "" {
		tb.Skip("shared test data not found (expected ../shared/testdata next to the repository, or FLOWZERO_TESTDATA)")
	}
	m, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil {
		tb.Fatalf("glob %s: %v", pattern, err)
	}
	return m
}

// AllCaptures returns every .pcap file under the shared test data folder, in walk order,
// skipping the test when the folder is absent and failing when it holds suspiciously few.
func AllCaptures(tb testing.TB) []string {
	tb.Helper()
	root := Root()
	if root == "" {
		tb.Skip("shared test data not found (expected ../shared/testdata next to the repository, or FLOWZERO_TESTDATA)")
	}
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".pcap") {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(out) < 10 {
		tb.Fatalf("only %d captures under %s", len(out), root)
	}
	return out
}
