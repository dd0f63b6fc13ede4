package wire

import (
	"fmt"
	"strings"
)

// CheckAgentName checks an agent name, which both ends do: it names the agent's pcapng
// interfaces ("agent:iface") and, with per-agent output, its files, so it holds no ':', no
// path separator, brace or space, and does not start with '.'. It holds no '%' either: the
// server's file names go through strftime with rotate-interval, and a conversion in a name
// would make two agents share a file or put a '/' into its name.
func CheckAgentName(name string) error {
	if name == "" || len(name) > MaxNameLen || strings.ContainsAny(name, ":/\\ \t\n{}%") || name[0] == '.' {
		return fmt.Errorf("%q: want 1 to %d characters without ':', '/', '\\', '%%', braces or spaces, not starting with '.'", name, MaxNameLen)
	}
	return nil
}

// CheckInterfaceName checks an announced interface name: at most MaxNameLen bytes (the
// server's pcapng if_name option "agent:iface" must fit its 16-bit length), without control
// characters (0x00-0x1f, 0x7f), which no capture interface has and which would garble the
// interface lists of tshark and Wireshark.
func CheckInterfaceName(name []byte) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("%d bytes, want at most %d", len(name), MaxNameLen)
	}
	for i, c := range name {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("control character 0x%02x at byte %d", c, i)
		}
	}
	return nil
}

// InterfaceName returns name made acceptable to CheckInterfaceName: cut to MaxNameLen bytes,
// control characters replaced by '?'. The agent uses it for names it does not choose (those
// of a replayed file's interfaces).
func InterfaceName(name string) string {
	if len(name) > MaxNameLen {
		name = name[:MaxNameLen]
	}
	b := []byte(name)
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			b[i] = '?' // byte by byte: invalid UTF-8 stays as it is, within MaxNameLen
		}
	}
	return string(b)
}
