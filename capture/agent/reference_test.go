package agent

import (
	"os"
	"path/filepath"
	"testing"

	"flowzero/internal/confdoc"
)

const referencePath = "../../docs/capture-agent.md"

// TestConfigurationReference keeps docs/capture-agent.md, the reference of the agent's
// configuration file, equal to what the code says.
func TestConfigurationReference(t *testing.T) {
	root, _ := filepath.Abs("../..")
	entries, err := confdoc.Generate(DefaultConfiguration(), root, "flowzero")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Description == "" && e.Type != "section" {
			t.Errorf("configuration key %s has no doc comment: document the field", e.Key)
		}
	}
	got := confdoc.Markdown("Capture agent configuration reference",
		"`flowzero capture agent -config FILE` reads one YAML file; a key that is absent takes the\n"+
			"default below (`name` defaults to the host name), and one of `live.interfaces` and\n"+
			"`replay.files` must be set. Unknown keys are errors that name the key and its line. The\n"+
			"command's flags (`flowzero capture agent -h`) override the file.\n\n"+
			"This page is generated from the code (`UPDATE=1 go test ./capture/agent -run TestConfigurationReference`).",
		entries)
	if os.Getenv("UPDATE") != "" {
		if err := os.WriteFile(referencePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil || string(want) != got {
		t.Fatalf("docs/capture-agent.md is stale: run UPDATE=1 go test ./capture/agent -run TestConfigurationReference (%v)", err)
	}
}
