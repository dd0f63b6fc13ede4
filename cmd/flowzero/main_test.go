package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "flowzero ") {
		t.Fatalf("version: code %d, out %q, err %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"no-such-command"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "no-such-command"`) {
		t.Fatalf("unknown: code %d, err %q", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "version") {
		t.Fatalf("help: code %d, out %q", code, out.String())
	}
}
