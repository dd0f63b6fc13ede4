package ddl

import (
	"fmt"
	"os"
	"path/filepath"

	"flowzero/schema"
)

// ProtoFileName is the name of the schema's .proto file: flows-<hash>.proto.
func ProtoFileName(s *schema.Schema) string { return "flows-" + s.Hash() + ".proto" }

// WriteProto writes the schema's .proto into dir (created if needed) and returns its path.
// The file name holds the schema hash, so files of other schemas are left alone.
func WriteProto(dir string, s *schema.Schema) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	path := filepath.Join(dir, ProtoFileName(s))
	if cur, err := os.ReadFile(path); err == nil && string(cur) == s.ProtoDefinition() {
		return path, nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.ProtoDefinition()), 0o644); err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	return path, nil
}
