package main

import (
	"strings"
	"testing"
)

// The messages below have the shape govulncheck v1.9.0 printed for this repository with
// -format json (trimmed to the fields read).
const (
	config    = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck","scanner_version":"v1.9.0","db":"file:///db","go_version":"go1.26.8","scan_level":"symbol"}}`
	osvStdlib = `{"osv":{"id":"GO-2026-6809","summary":"Distrust compromised intermediate certificates in crypto/x509"}}`
	osvNet    = `{"osv":{"id":"GO-2026-6603","summary":"Request smuggling in golang.org/x/net/http2"}}`
	// A vulnerable x/net module in the build list, no vulnerable symbol reached.
	netRequired = `{"finding":{"osv":"GO-2026-6603","fixed_version":"v0.60.0","trace":[{"module":"golang.org/x/net","version":"v0.59.0"}]}}`
	netImported = `{"finding":{"osv":"GO-2026-6603","fixed_version":"v0.60.0","trace":[{"module":"golang.org/x/net","version":"v0.59.0","package":"golang.org/x/net/http2"}]}}`
	// The same entry reached from the scanned code.
	netCalled = `{"finding":{"osv":"GO-2026-6603","fixed_version":"v0.60.0","trace":[` +
		`{"module":"golang.org/x/net","version":"v0.59.0","package":"golang.org/x/net/http2","function":"ReadFrame","receiver":"*Framer","position":{"filename":"http2/frame.go","line":500}},` +
		`{"module":"flowzero","package":"flowzero/store","function":"Query","receiver":"*Client","position":{"filename":"store/clickhouse.go","line":120}}]}}`
	stdlibCalled = `{"finding":{"osv":"GO-2026-6809","fixed_version":"v1.26.10","trace":[` +
		`{"module":"stdlib","version":"v1.26.8","package":"crypto/x509","function":"Verify","receiver":"*Certificate","position":{"filename":"src/crypto/x509/verify.go","line":800}},` +
		`{"module":"flowzero","package":"flowzero/capture","function":"Dial","receiver":"*Agent","position":{"filename":"capture/agent.go","line":90}}]}}`
)

func runOn(t *testing.T, stdlibFails bool, msgs ...string) (bool, string) {
	t.Helper()
	var out strings.Builder
	failed, err := run(strings.NewReader(strings.Join(msgs, "\n")), &out, stdlibFails)
	if err != nil {
		t.Fatal(err)
	}
	return failed, out.String()
}

func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stdlibFails bool
		msgs        []string
		fails       bool
		want        []string
	}{
		{
			name:  "dependency-required-only",
			msgs:  []string{config, osvNet, netRequired},
			want:  []string{"not called (required): GO-2026-6603 in golang.org/x/net@v0.59.0, fixed in v0.60.0: Request smuggling", "0 called in dependencies, 0 called in the standard library, 1 not called"},
			fails: false,
		},
		{
			name:  "dependency-imported",
			msgs:  []string{config, osvNet, netRequired, netImported},
			want:  []string{"not called (imported): GO-2026-6603"},
			fails: false,
		},
		{
			name:  "dependency-called",
			msgs:  []string{config, osvNet, netRequired, netImported, netCalled},
			want:  []string{"FAIL: GO-2026-6603 in golang.org/x/net@v0.59.0, fixed in v0.60.0", "called from store/clickhouse.go:120 (flowzero/store.Client.Query), reaching golang.org/x/net/http2.Framer.ReadFrame", "1 called in dependencies"},
			fails: true,
		},
		{
			name:  "stdlib-called-warns",
			msgs:  []string{config, osvStdlib, stdlibCalled},
			want:  []string{"warning: GO-2026-6809 in go1.26.8, fixed in go1.26.10: Distrust", "capture/agent.go:90", "newer Go toolchain than go1.26.8"},
			fails: false,
		},
		{
			name:        "stdlib-called-fails-when-asked",
			stdlibFails: true,
			msgs:        []string{config, osvStdlib, stdlibCalled},
			want:        []string{"FAIL: GO-2026-6809 in go1.26.8"},
			fails:       true,
		},
		{
			name: "nothing-found",
			msgs: []string{config},
			want: []string{"govulncheck v1.9.0, database file:///db, go1.26.8", "0 called in dependencies, 0 called in the standard library, 0 not called"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failed, out := runOn(t, tc.stdlibFails, tc.msgs...)
			if failed != tc.fails {
				t.Errorf("failed = %v, want %v; output:\n%s", failed, tc.fails, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestPolicyBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"empty":     "",
		"no-config": netRequired,
		"truncated": config + "\n" + netCalled[:40],
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			if _, err := run(strings.NewReader(in), &out, false); err == nil {
				t.Fatalf("no error for %q", in)
			}
		})
	}
}
