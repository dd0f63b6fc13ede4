package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRotateIntervalFlag checks -G: whole seconds as tcpdump takes them, or a Go duration.
func TestRotateIntervalFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"60": time.Minute, "0": 0, "3600": time.Hour, "1m": time.Minute, "90s": 90 * time.Second} {
		var d time.Duration
		if err := (secondsOrDuration{&d}).Set(in); err != nil || d != want {
			t.Errorf("-G %s: %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"abc", "1.5", "-5", "99999999999999", ""} {
		var d time.Duration
		if err := (secondsOrDuration{&d}).Set(bad); err == nil {
			t.Errorf("-G %q accepted as %v", bad, d)
		}
	}
	// Through the command: the flag parser names the flag, Validate the key.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"capture", "server", "-G", "abc"}, 2, `invalid value "abc" for flag -G: "abc": want whole seconds (3600) or a duration (1h)`},
		{[]string{"capture", "server", "-G", "500ms"}, 1, "output.rotate-interval: 500ms: want 0 or at least 1s"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q; want code %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
