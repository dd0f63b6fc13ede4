package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"flowzero/app"
	"flowzero/internal/config"
	"flowzero/query"
	"flowzero/schema"
	"flowzero/store"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/engine"
)

func init() {
	register("store", "create or migrate the ClickHouse tables (migrate), query the embedded engine (query)", runStore)
}

func runStore(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("store", stderr)
	configFile := fs.String("config", "", "the collector's YAML configuration `file` (its schema: and outputs.store: keys are used)")
	dryRun := fs.Bool("dry-run", false, "migrate: print the statements without running them")
	chURL := fs.String("clickhouse", "", "migrate: ClickHouse HTTP `URL` (overrides outputs.store.clickhouse.url; without it, the embedded engine)")
	format := fs.String("format", "PrettyCompactMonoBlock", "query: output `format`")
	server := fs.String("server", "", "query: the running collector's `URL` (default: from collector.http.listen), which runs the SELECT while it holds the embedded store")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n"+
			"  flowzero store migrate [--config FILE] [--dry-run] [--clickhouse URL]\n"+
			"      bring the tables, views and dictionaries to the schema (idempotent)\n"+
			"  flowzero store query [--config FILE] [--format F] [--server URL] SQL\n"+
			"      run a statement in the embedded engine's data directory; while a collector\n"+
			"      runs (and holds the directory), one SELECT through its API\n\n")
		fs.PrintDefaults()
	}
	var action string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		action, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The collector's file, read and checked as the collector reads it: the tables are those
	// its store output writes to or its Kafka output feeds.
	acfg, err := app.Load(*configFile)
	if err != nil {
		return err
	}
	s, err := schema.New(acfg.Schema)
	if err != nil {
		return fmt.Errorf("configuration: schema.%w", err)
	}
	cfg := acfg.Outputs.Store.Configuration
	// The tables an outlet inserts into remember its deduplication tokens.
	cfg.Deduplicate = acfg.Mode == app.ModeOutlet
	if *chURL != "" {
		cfg.ClickHouse.URL = *chURL
	}
	// The collector checks outputs.store only when the output is enabled; migrate uses it
	// either way (a server fed through Kafka has the store output off).
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("configuration: %w", config.Prefix("outputs.store", err))
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx := context.Background()
	switch action {
	case "migrate":
		if fs.NArg() > 0 {
			fs.Usage()
			return errUsage
		}
		if cfg.ClickHouse.URL != "" {
			return migrateServer(ctx, cfg, s, *dryRun, log, stdout)
		}
		return migrateEmbedded(ctx, cfg, s, *dryRun, log, stdout)
	case "query":
		if fs.NArg() != 1 {
			fs.Usage()
			return errUsage
		}
		// A running collector holds the data directory: it runs the statement (a SELECT).
		url := *server
		if url == "" {
			url = defaultServer(acfg)
		}
		out, err := sqlThroughCollector(ctx, url, fs.Arg(0), *format)
		if err == nil {
			_, err = stdout.Write(out)
			return err
		}
		if !notListening(err) {
			return fmt.Errorf("the collector at %s (which holds the embedded store while it runs): %w", url, err)
		}
		if !chdb.Built {
			return chdb.ErrNotBuilt
		}
		conn, err := chdb.Open(cfg.Embedded.Path, engine.Args()...)
		if err != nil {
			return err
		}
		defer conn.Close()
		out, err = conn.Query(fs.Arg(0), *format)
		if err != nil {
			return err
		}
		_, err = stdout.Write(out)
		return err
	default:
		fs.Usage()
		return errUsage
	}
}

func printSteps(w io.Writer, steps []ddl.Step, dryRun bool) {
	verb := "applied"
	if dryRun {
		verb = "to apply"
	}
	if len(steps) == 0 {
		fmt.Fprintln(w, "-- nothing to do: the database matches the schema")
		return
	}
	fmt.Fprintf(w, "-- %d statements %s\n", len(steps), verb)
	for _, st := range steps {
		fmt.Fprintf(w, "\n-- %s: %s\n%s;\n", st.Object, st.Action, strings.TrimSpace(st.SQL))
	}
}

// migrateServer applies the DDL to a ClickHouse server over HTTP. The Kafka table reads the
// .proto from the server's format_schema_path: the file is written there when
// outputs.store.format-schema-path names it, else the user is told where to put it.
func migrateServer(ctx context.Context, cfg store.Configuration, s *schema.Schema, dryRun bool, log *slog.Logger, stdout io.Writer) error {
	client, err := engine.NewHTTPClient(cfg.ClickHouse)
	if err != nil {
		return err
	}
	if cfg.Kafka.Enabled {
		if cfg.FormatSchemaPath != "" && !dryRun {
			path, err := ddl.WriteProto(cfg.FormatSchemaPath, s)
			if err != nil {
				return err
			}
			log.Info("store: .proto written for the Kafka table", "path", path)
		} else {
			fmt.Fprintf(stdout, "-- the Kafka table reads %s from the server's format_schema_path:\n"+
				"--   flowzero schema proto > /var/lib/clickhouse/format_schemas/%s\n", ddl.ProtoFileName(s), ddl.ProtoFileName(s))
		}
	}
	m := &ddl.Migrator{DDL: store.NewDDL(cfg, s, ""), Exec: client, Logger: log}
	steps, err := m.Migrate(ctx, dryRun)
	if err == nil || len(steps) > 0 {
		printSteps(stdout, steps, dryRun)
	}
	return err
}

// migrateEmbedded applies the DDL to the embedded engine's data directory. The Kafka table is
// left out: it only exists while a flowzero process holds the engine (chDB cannot reopen a
// directory holding one), so the process that consumes creates it.
//
// A dry run creates nothing: with no data directory yet, every object is to be created and
// the plan is made without the engine (opening it would create the directory); an existing
// directory is opened to read what it holds.
func migrateEmbedded(ctx context.Context, cfg store.Configuration, s *schema.Schema, dryRun bool, log *slog.Logger, stdout io.Writer) error {
	if cfg.Kafka.Enabled {
		log.Info("store: the Kafka table is created by the process that consumes, not by migrate, in embedded mode")
		cfg.Kafka.Enabled = false
	}
	dir, err := cfg.ProtoDir()
	if err != nil {
		return err
	}
	var exec engine.Executor
	if _, err := os.Stat(cfg.Embedded.Path); dryRun && errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "-- %s does not exist yet: everything is to be created\n", cfg.Embedded.Path)
		exec = engine.EmptyEngine{}
	} else {
		if !chdb.Built {
			return fmt.Errorf("%w; or give --clickhouse URL", chdb.ErrNotBuilt)
		}
		if !dryRun {
			if err := os.MkdirAll(cfg.Embedded.Path, 0o755); err != nil {
				return err
			}
			if _, err := ddl.WriteProto(dir, s); err != nil {
				return err
			}
		}
		conn, err := chdb.Open(cfg.Embedded.Path, engine.Args()...)
		if err != nil {
			return err
		}
		defer conn.Close()
		exec = engine.Embedded{Conn: conn}
	}
	m := &ddl.Migrator{DDL: store.NewDDL(cfg, s, dir), Exec: exec, Logger: log}
	steps, err := m.Migrate(ctx, dryRun)
	if err == nil || len(steps) > 0 {
		printSteps(stdout, steps, dryRun)
	}
	if err == nil && !dryRun {
		abs, _ := filepath.Abs(cfg.Embedded.Path)
		fmt.Fprintf(stdout, "-- embedded database in %s\n", abs)
	}
	return err
}

// sqlThroughCollector runs a SELECT through the query API of the collector at server
// (POST /api/v0/query/sql).
func sqlThroughCollector(ctx context.Context, server, sql, format string) ([]byte, error) {
	c := &apiClient{base: strings.TrimRight(server, "/"), http: &http.Client{Timeout: 10 * time.Minute}}
	var res query.RawSQLResult
	if _, err := c.post(ctx, "sql", query.RawSQLRequest{SQL: sql, Format: format}, &res); err != nil {
		return nil, err
	}
	return []byte(res.Output), nil
}
