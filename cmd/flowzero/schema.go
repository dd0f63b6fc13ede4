package main

import (
	"fmt"
	"io"
	"strings"

	"flowzero/app"
	"flowzero/schema"
)

func init() {
	register("schema", "print the flow schema: .proto file (proto), ClickHouse DDL (sql), columns (columns)", runSchema)
}

func runSchema(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("schema", stderr)
	configFile := fs.String("config", "", "the collector's YAML configuration `file` (its schema: section is used)")
	table := fs.String("table", "flows", "table `name` for sql")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flowzero schema [--config FILE] proto|sql|columns\n\n"+
			"  proto    the .proto file of the flow messages (message FlowMessage)\n"+
			"  sql      the ClickHouse CREATE TABLE of the flows table\n"+
			"  columns  every column: name, field number, state, group, ClickHouse type\n\n")
		fs.PrintDefaults()
	}
	// Accept flags before or after the action.
	var action string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		action, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if action == "" && fs.NArg() > 0 {
		action = fs.Arg(0)
		if err := parseFlags(fs, fs.Args()[1:]); err != nil {
			return err
		}
	}
	if fs.NArg() > 0 || action == "" {
		fs.Usage()
		return errUsage
	}
	// The collector's file, read and checked as the collector reads it, so that the schema
	// printed is the one its flows are written with.
	acfg, err := app.Load(*configFile)
	if err != nil {
		return err
	}
	s, err := schema.New(acfg.Schema)
	if err != nil {
		return fmt.Errorf("configuration: schema.%w", err)
	}
	switch action {
	case "proto":
		_, err = io.WriteString(stdout, s.ProtoDefinition())
	case "sql":
		_, err = fmt.Fprintf(stdout, "-- flowzero schema %s\n%s;\n", s.Hash(), strings.TrimSuffix(s.ClickHouseFlowsTable(*table), "\n"))
	case "columns":
		for _, k := range schema.Keys() {
			c := schema.Lookup(k)
			state := "off"
			if s.Enabled(k) {
				state = "on"
			}
			field := "-"
			if c.OnWire() {
				field = fmt.Sprint(c.Field)
			}
			hot := ""
			if c.Hot {
				hot = " hot"
			}
			if _, err = fmt.Fprintf(stdout, "%-22s %4s %-3s %-9s %s%s\n", c.Name, field, state, c.Group, c.ClickHouseType, hot); err != nil {
				break
			}
		}
	default:
		fmt.Fprintf(stderr, "flowzero schema: unknown action %q\n", action)
		fs.Usage()
		return errUsage
	}
	return err
}
