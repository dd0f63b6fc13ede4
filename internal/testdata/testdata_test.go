package testdata

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMainCheckout(t *testing.T) {
	top := t.TempDir()
	main := filepath.Join(top, "main")
	wt := filepath.Join(top, "wt", "infra")
	gitdir := filepath.Join(main, ".git", "worktrees", "infra")
	for _, d := range []string{gitdir, wt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(gitdir, "commondir"), "../..\n")

	write(filepath.Join(wt, ".git"), "gitdir: "+gitdir+"\n")
	if got := mainCheckout(wt); got != main {
		t.Errorf("absolute gitdir: mainCheckout = %q, want %q", got, main)
	}
	rel, err := filepath.Rel(wt, gitdir)
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(wt, ".git"), "gitdir: "+rel+"\n")
	if got := mainCheckout(wt); got != main {
		t.Errorf("relative gitdir: mainCheckout = %q, want %q", got, main)
	}

	// The main checkout itself (.git is a directory), a .git file of another kind, a broken
	// link: no main checkout.
	for name, dir := range map[string]string{"main": main, "none": top} {
		if got := mainCheckout(dir); got != "" {
			t.Errorf("%s: mainCheckout = %q, want \"\"", name, got)
		}
	}
	write(filepath.Join(wt, ".git"), "something else\n")
	if got := mainCheckout(wt); got != "" {
		t.Errorf("not a gitdir line: mainCheckout = %q, want \"\"", got)
	}
	write(filepath.Join(wt, ".git"), "gitdir: "+filepath.Join(top, "gone")+"\n")
	if got := mainCheckout(wt); got != "" {
		t.Errorf("missing gitdir: mainCheckout = %q, want \"\"", got)
	}
}
