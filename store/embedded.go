package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/engine"
	"flowzero/store/native"
)

// NewDDL returns the DDL of the configuration's tables for schema s (see ddl.New): with
// embedded.pre-aggregate and no server, the sink groups the finest resolution itself when
// its pre-aggregation can compute every dimension (native.Aggregable).
func NewDDL(cfg Configuration, s *schema.Schema, protoDir string) *ddl.DDL {
	var aggregable ddl.Aggregable
	if cfg.Embedded.PreAggregate && cfg.ClickHouse.URL == "" {
		aggregable = func(dims []*schema.Column, interval time.Duration) error {
			return native.Aggregable(s, dims, interval)
		}
	}
	return ddl.New(cfg.Configuration, s, protoDir, aggregable)
}

// embeddedArgs are the settings of every connection to the embedded engine.
func embeddedArgs(cfg Configuration) []string {
	args := engine.Args()
	if cfg.Embedded.MaxThreads > 0 {
		args = append(args, fmt.Sprintf("--max_threads=%d", cfg.Embedded.MaxThreads))
	}
	return args
}

// OpenEmbedded opens the embedded engine on cfg.Embedded.Path, writes the .proto where the
// engine reads it and migrates the database to the schema. The caller closes the connection.
func OpenEmbedded(ctx context.Context, cfg Configuration, s *schema.Schema, log *slog.Logger) (*chdb.Conn, *ddl.DDL, error) {
	if err := os.MkdirAll(cfg.Embedded.Path, 0o755); err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	dir, err := cfg.ProtoDir()
	if err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	if _, err := ddl.WriteProto(dir, s); err != nil {
		return nil, nil, err
	}
	conn, err := chdb.Open(cfg.Embedded.Path, embeddedArgs(cfg)...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	d := NewDDL(cfg, s, dir)
	m := &ddl.Migrator{DDL: d, Exec: engine.Embedded{Conn: conn}, Logger: log}
	if _, err := m.Migrate(ctx, false); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, d, nil
}
