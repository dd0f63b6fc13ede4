// Command flowzero is the network telemetry pipeline: collector, decoders, RIB, storage,
// capture forwarder and query tools in one binary. Each subcommand lives in its own file and
// registers itself with register().
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand. run receives the arguments after the subcommand's name and
// writes its normal output to stdout; it returns an error for a non-zero exit.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

// register adds a subcommand; called from init() in each subcommand's file.
func register(name, summary string, run func(args []string, stdout, stderr io.Writer) error) {
	if _, dup := commands[name]; dup {
		panic("flowzero: subcommand registered twice: " + name)
	}
	commands[name] = command{name: name, summary: summary, run: run}
}

// errUsage is returned by a subcommand whose arguments are wrong, after it printed its usage.
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintf(w, "flowzero — network flow collector and telemetry pipeline\n\nUsage: flowzero <command> [arguments]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'flowzero <command> -h' for a command's flags.\n")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "flowzero: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, errUsage) {
			return 2
		}
		fmt.Fprintf(stderr, "flowzero %s: %s\n", cmd.name, strings.TrimSpace(err.Error()))
		return 1
	}
	return 0
}

// newFlagSet returns a flag set for a subcommand that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("flowzero "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args, mapping a parse failure to errUsage (the flag package already
// printed the message and the usage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}
