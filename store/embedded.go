package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"flowzero/schema"
	"flowzero/store/chdb"
)

// ProtoDir returns where ClickHouse reads the schema's .proto: format-schema-path, or for
// the embedded engine <embedded.path>/format_schemas, made absolute.
func (c Configuration) ProtoDir() (string, error) {
	dir := c.FormatSchemaPath
	if dir == "" {
		dir = filepath.Join(c.Embedded.Path, "format_schemas")
	}
	return filepath.Abs(dir)
}

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

// EngineArgs are the settings every connection to the embedded engine needs: the schema may
// use LowCardinality(IPv6) for addresses with few values (exporters, next hops), which
// ClickHouse only creates when asked.
func EngineArgs() []string {
	return []string{"--allow_suspicious_low_cardinality_types=1"}
}

// OpenEmbedded opens the embedded engine on cfg.Embedded.Path, writes the .proto where the
// engine reads it and migrates the database to the schema. The caller closes the connection.
func OpenEmbedded(ctx context.Context, cfg Configuration, s *schema.Schema, log *slog.Logger) (*chdb.Conn, *DDL, error) {
	if err := os.MkdirAll(cfg.Embedded.Path, 0o755); err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	dir, err := cfg.ProtoDir()
	if err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	if _, err := WriteProto(dir, s); err != nil {
		return nil, nil, err
	}
	args := EngineArgs()
	if cfg.Embedded.MaxThreads > 0 {
		args = append(args, fmt.Sprintf("--max_threads=%d", cfg.Embedded.MaxThreads))
	}
	conn, err := chdb.Open(cfg.Embedded.Path, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	ddl := NewDDL(cfg, s, dir)
	m := &Migrator{DDL: ddl, Exec: Embedded{Conn: conn}, Logger: log}
	if _, err := m.Migrate(ctx, false); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ddl, nil
}
