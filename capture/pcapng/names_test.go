package pcapng

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestAgentNameNotExpanded: the agent name is put into the path as it is, even where the
// path goes through strftime: "x%D" adds no '/' and "y%Y" does not name the file of "y2026".
func TestAgentNameNotExpanded(t *testing.T) {
	cfg := Configuration{Path: "/data/capture.pcapng", PerAgent: true, RotateInterval: time.Hour}
	now := time.Date(2026, 5, 6, 0, 0, 0, 0, time.Local)
	if name := NewWriter(cfg, Options{Agent: "x%D"}).fileName(now); name != "/data/capture-x%D.pcapng" {
		t.Errorf("agent x%%D: file %q", name)
	}
	cfg.Path = "/data/%Y/{agent}.pcapng"
	a, b := NewWriter(cfg, Options{Agent: "y%Y"}).fileName(now), NewWriter(cfg, Options{Agent: "y2026"}).fileName(now)
	if a != "/data/2026/y%Y.pcapng" || b != "/data/2026/y2026.pcapng" {
		t.Errorf("agents y%%Y and y2026: files %q and %q", a, b)
	}
}

// TestCounterCannotReachAgentName: with per-agent output and rotate-size, the file counter
// follows the name; a path where it would follow the agent's name directly (agent "a" 's
// second file "a1" is agent "a1" 's first) is refused, naming the key.
func TestCounterCannotReachAgentName(t *testing.T) {
	for _, path := range []string{"/data/{agent}", "/data/capture", "/data/{agent}.pcap2", "/data/{agent}-%H"} {
		c := Configuration{Path: path, PerAgent: true, RotateSize: 1 << 20, FlushInterval: time.Second}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "path") {
			t.Errorf("%s: %v, want an error naming path", path, err)
		}
	}
	for _, c := range []Configuration{
		{Path: "/data/{agent}.pcapng", PerAgent: true, RotateSize: 1 << 20},
		{Path: "/data/capture.pcapng", PerAgent: true, RotateSize: 1 << 20},
		{Path: "/data/{agent}", PerAgent: true, RotateSize: 1 << 20, MaxFiles: 10}, // fixed width
		{Path: "/data/{agent}", PerAgent: true, RotateInterval: time.Hour},         // no counter
		{Path: "/data/capture", RotateSize: 1 << 20},                               // one writer
	} {
		c.FlushInterval = time.Second
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	// The accepted form: agents "a" and "a1" never share a name.
	cfg := Configuration{Path: "/data/{agent}.pcapng", PerAgent: true, RotateSize: 1 << 20}
	a := NewWriter(cfg, Options{Agent: "a"})
	a.count = 1
	if n1, n2 := a.fileName(time.Time{}), NewWriter(cfg, Options{Agent: "a1"}).fileName(time.Time{}); n1 == n2 {
		t.Errorf("agents a and a1 share %s", n1)
	}
}

// TestAddInterfaceNameTooLong: an if_name beyond an option's 16-bit length is refused, not
// written with a wrapped length.
func TestAddInterfaceNameTooLong(t *testing.T) {
	o := NewWriter(Configuration{Path: t.TempDir() + "/out.pcapng"}, Options{})
	id, err := o.AddInterface(Interface{Agent: "raw", Name: strings.Repeat("e", 65533), LinkType: 1})
	if !errors.Is(err, ErrInterfaceName) || id != -1 {
		t.Fatalf("AddInterface: %d, %v; want -1, ErrInterfaceName", id, err)
	}
	if id, err := o.AddInterface(Interface{Agent: "raw", Name: strings.Repeat("e", 65530), LinkType: 1}); err != nil || id != 0 {
		t.Fatalf("AddInterface of the longest name: %d, %v", id, err)
	}
}
