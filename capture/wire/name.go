package wire

import (
	"fmt"
	"strings"
)

// CheckAgentName checks an agent name, which both ends do: it names the agent's pcapng
// interfaces ("agent:iface") and, with per-agent output, its files, so it holds no ':', no
// path separator, brace or space, and does not start with '.'.
func CheckAgentName(name string) error {
	if name == "" || len(name) > MaxNameLen || strings.ContainsAny(name, ":/\\ \t\n{}") || name[0] == '.' {
		return fmt.Errorf("%q: want 1 to %d characters without ':', '/', '\\', braces or spaces, not starting with '.'", name, MaxNameLen)
	}
	return nil
}
