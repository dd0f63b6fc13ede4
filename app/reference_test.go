package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flowzero/internal/confdoc"
)

const referencePath = "../docs/configuration.md"

func reference(t *testing.T) string {
	root, _ := filepath.Abs("..")
	entries, err := confdoc.Generate(DefaultConfiguration(), root, "flowzero")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Description == "" && e.Type != "section" {
			t.Errorf("configuration key %s has no doc comment: document the field", e.Key)
		}
	}
	return confdoc.Markdown("Configuration reference",
		"`flowzero collect --config FILE` reads one YAML file; every key is optional and takes the\n"+
			"default below when absent. Unknown keys are errors that name the key and its line.\n"+
			"`flowzero collect --check --config FILE` validates a file without starting.\n"+
			"SIGHUP or `POST /api/v0/reload` re-reads the file and applies `collector.exporters`,\n"+
			"`collector.batch-interval` and the classifier rules (`enrich.exporter-classifiers`,\n"+
			"`enrich.interface-classifiers`, which reclassify every cached exporter and interface) at\n"+
			"once; a file that does not validate (a rule that does not compile: the error names it and\n"+
			"the position in it) changes nothing. Changes of the listeners, the HTTP server, the batch\n"+
			"size, and rules added to a collector started without rules, SNMP or\n"+
			"drop-unknown-interfaces are reported as needing a restart; other keys are read at start.\n"+
			"The reload request must carry the header `X-Flowzero-Request: 1`, which no web page can\n"+
			"send cross-site (`curl -X POST -H 'X-Flowzero-Request: 1' http://127.0.0.1:8080/api/v0/reload`).\n\n"+
			"This page is generated from the code (`UPDATE=1 go test ./app -run TestConfigurationReference`).",
		entries)
}

// TestConfigurationReference keeps docs/configuration.md equal to what the code says.
func TestConfigurationReference(t *testing.T) {
	got := reference(t)
	if os.Getenv("UPDATE") != "" {
		if err := os.MkdirAll(filepath.Dir(referencePath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(referencePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil || string(want) != got {
		t.Fatalf("docs/configuration.md is stale: run UPDATE=1 go test ./app -run TestConfigurationReference (%v)", err)
	}
	if !strings.Contains(got, "`collector.listeners[].protocol`") {
		t.Fatal("reference misses nested list keys")
	}
}
