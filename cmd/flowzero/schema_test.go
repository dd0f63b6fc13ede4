package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSchemaCommand(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "flowzero.yaml")
	os.WriteFile(cfg, []byte("schema:\n  enabled: [SrcMAC]\n  disabled: [SrcGeoCity]\n"), 0o644)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("schema:\n  enabled: [SrcMak]\n"), 0o644)
	// The collector's whole file, read as the collector reads it: its other sections are
	// checked too, so a typo anywhere is named rather than ignored.
	collector := filepath.Join(t.TempDir(), "collector.yaml")
	os.WriteFile(collector, []byte("outputs:\n  file: {enabled: false}\nschema:\n  enabled: [SrcMAC]\n"), 0o644)
	typo := filepath.Join(t.TempDir(), "typo.yaml")
	os.WriteFile(typo, []byte("outptus: {}\nschema:\n  enabled: [SrcMAC]\n"), 0o644)
	schemaTypo := filepath.Join(t.TempDir(), "schema-typo.yaml")
	os.WriteFile(schemaTypo, []byte("schema:\n  enable: [SrcMAC]\n"), 0o644)

	for _, tc := range []struct {
		args      []string
		code      int
		want, not string
	}{
		{[]string{"schema", "proto"}, 0, "  bytes SrcAddr = 4;\n", "SrcMAC"},
		{[]string{"schema", "proto", "--config", cfg}, 0, "  uint64 SrcMAC = 66;\n", "SrcGeoCity"},
		{[]string{"schema", "--config", cfg, "sql"}, 0, "    SrcMAC UInt64,\n", "SrcGeoCity"},
		{[]string{"schema", "sql", "--table", "flows_raw"}, 0, "CREATE TABLE IF NOT EXISTS flows_raw\n", "SrcMAC"},
		{[]string{"schema", "columns"}, 0, "SrcMAC                   66 off L2", ""},
		{[]string{"schema", "proto", "--config", bad}, 1, `schema.enabled[0]: unknown column "SrcMak"`, ""},
		{[]string{"schema", "proto", "--config", collector}, 0, "  uint64 SrcMAC = 66;\n", ""},
		{[]string{"schema", "proto", "--config", typo}, 1, `unknown key "outptus"`, ""},
		{[]string{"schema", "proto", "--config", schemaTypo}, 1, `unknown key "enable"`, ""},
		{[]string{"schema"}, 2, "Usage: flowzero schema", ""},
		{[]string{"schema", "nope"}, 2, `unknown action "nope"`, ""},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		all := out.String() + errb.String()
		if code != tc.code || !strings.Contains(all, tc.want) || (tc.not != "" && strings.Contains(all, tc.not)) {
			t.Errorf("%v: code %d, output:\n%s", tc.args, code, all)
		}
	}
}
