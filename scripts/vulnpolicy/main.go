// Command vulnpolicy reads govulncheck's JSON output (-format json) on its standard input,
// prints the findings grouped by module, and exits with status 1 when the code calls a known
// vulnerability of a required module (a dependency that go get can upgrade).
//
// Findings in the standard library are printed with the Go release that fixes them but do not
// fail the run unless -stdlib=fail: they are fixed by the machine's Go toolchain, not by the
// project's go.mod. Vulnerabilities of a module that the code imports or requires without
// calling the vulnerable symbols are listed and do not fail the run, as govulncheck itself
// reports them ("your code doesn't appear to call these vulnerabilities").
//
//	govulncheck -db file:///path -format json ./... | go run ./scripts/vulnpolicy
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	stdlib := flag.String("stdlib", "warn", "what a called vulnerability of the standard library does: warn or fail")
	flag.Parse()
	if *stdlib != "warn" && *stdlib != "fail" {
		fmt.Fprintf(os.Stderr, "vulnpolicy: -stdlib=%q: want warn or fail\n", *stdlib)
		os.Exit(2)
	}
	failed, err := run(os.Stdin, os.Stdout, *stdlib == "fail")
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulnpolicy:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// message is one value of govulncheck's JSON stream (golang.org/x/vuln/scan's protocol): a
// config, a progress note, an SBOM, an OSV entry or a finding.
type message struct {
	Config *struct {
		ScannerVersion string `json:"scanner_version"`
		DB             string `json:"db"`
		GoVersion      string `json:"go_version"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string  `json:"osv"`
		FixedVersion string  `json:"fixed_version"`
		Trace        []frame `json:"trace"`
	} `json:"finding"`
}

// frame is one step of a finding's trace: the first is the vulnerable module, package or
// symbol, the last the caller in the scanned code.
type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	} `json:"position"`
}

// level says how close the scanned code comes to a vulnerability, as govulncheck's scan
// levels do.
type level int

const (
	required level = iota // the module is in the build list
	imported              // a vulnerable package is imported
	called                // a vulnerable symbol is reachable from the code
)

// vuln is what is known of one OSV entry in one module.
type vuln struct {
	id, module, version, fixed string
	level                      level
	example                    string // for a called one: where the code reaches it
}

const stdlibModule = "stdlib"

func run(r io.Reader, w io.Writer, stdlibFails bool) (failed bool, err error) {
	summaries := map[string]string{}
	vulns := map[[2]string]*vuln{} // (id, module)
	goVersion, sawConfig := "", false
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return false, fmt.Errorf("reading govulncheck's JSON output at byte %d: %w", dec.InputOffset(), err)
		}
		switch {
		case m.Config != nil:
			sawConfig = true
			goVersion = m.Config.GoVersion
			fmt.Fprintf(w, "govulncheck %s, database %s, %s\n", m.Config.ScannerVersion, m.Config.DB, m.Config.GoVersion)
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			f := m.Finding
			top := f.Trace[0]
			lv := required
			if top.Function != "" {
				lv = called
			} else if top.Package != "" {
				lv = imported
			}
			key := [2]string{f.OSV, top.Module}
			v := vulns[key]
			if v == nil {
				v = &vuln{id: f.OSV, module: top.Module, version: top.Version, fixed: f.FixedVersion, level: lv}
				vulns[key] = v
			}
			if lv > v.level {
				v.level = lv
			}
			if lv == called && v.example == "" {
				v.example = describeCall(f.Trace)
			}
		}
	}
	if !sawConfig {
		return false, errors.New("no config message: is this govulncheck -format json output?")
	}

	list := make([]*vuln, 0, len(vulns))
	for _, v := range vulns {
		list = append(list, v)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if (a.module == stdlibModule) != (b.module == stdlibModule) {
			return b.module == stdlibModule // dependencies first
		}
		if a.level != b.level {
			return a.level > b.level
		}
		if a.module != b.module {
			return a.module < b.module
		}
		return a.id < b.id
	})

	var depCalled, stdCalled, others int
	for _, v := range list {
		switch {
		case v.level == called && v.module == stdlibModule:
			stdCalled++
		case v.level == called:
			depCalled++
		default:
			others++
		}
	}
	for _, v := range list {
		if v.level != called {
			continue
		}
		where := v.module + "@" + v.version
		verdict := "FAIL"
		if v.module == stdlibModule {
			where = goVersion
			if !stdlibFails {
				verdict = "warning"
			}
		}
		fmt.Fprintf(w, "%s: %s in %s, fixed in %s: %s\n    called from %s\n",
			verdict, v.id, where, fixedName(v), summaries[v.id], v.example)
	}
	for _, v := range list {
		if v.level == called || v.module == stdlibModule {
			continue // the standard library's are only counted: a newer Go fixes them with the rest
		}
		how := "required"
		if v.level == imported {
			how = "imported"
		}
		fmt.Fprintf(w, "not called (%s): %s in %s@%s, fixed in %s: %s\n", how, v.id, v.module, v.version, fixedName(v), summaries[v.id])
	}
	fmt.Fprintf(w, "govulncheck: %d called in dependencies, %d called in the standard library, %d not called\n", depCalled, stdCalled, others)
	if stdCalled > 0 && !stdlibFails {
		fmt.Fprintf(w, "govulncheck: the standard library's findings are fixed by a newer Go toolchain than %s, not by go.mod: warned, not failed\n", goVersion)
	}
	return depCalled > 0 || (stdlibFails && stdCalled > 0), nil
}

// fixedName is the release that fixes v: "go1.26.10" for the standard library (govulncheck
// gives it as v1.26.10), the module version otherwise, or "no release yet".
func fixedName(v *vuln) string {
	switch {
	case v.fixed == "":
		return "no release yet"
	case v.module == stdlibModule:
		return "go" + strings.TrimPrefix(v.fixed, "v")
	}
	return v.fixed
}

// describeCall names the scanned code's frame of a trace (its last frame) and the vulnerable
// symbol it reaches (the first).
func describeCall(trace []frame) string {
	sym := func(f frame) string {
		name := f.Function
		if f.Receiver != "" {
			name = strings.TrimPrefix(f.Receiver, "*") + "." + name
		}
		return f.Package + "." + name
	}
	caller := trace[len(trace)-1]
	pos := "?"
	if caller.Position != nil {
		pos = fmt.Sprintf("%s:%d", caller.Position.Filename, caller.Position.Line)
	}
	return fmt.Sprintf("%s (%s), reaching %s", pos, sym(caller), sym(trace[0]))
}
