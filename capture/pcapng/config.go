package pcapng

import (
	"path/filepath"
	"strings"
	"time"

	"flowzero/internal/config"
)

// Configuration says where packets go.
type Configuration struct {
	// Path of the pcapng file; "-" is stdout. A FIFO is written as is: until a reader opens it,
	// agents' frames wait (like tcpdump -w); when the reader goes away, what could not be
	// written counts as server drops and frames wait for the next reader. It may hold
	// strftime conversions (%Y %m %d %H %M %S %j %F %T...), expanded in local time at each
	// time rotation like tcpdump -G. An existing pcapng file (from before a restart) gets a
	// new section appended, after an incomplete last block is cut off; an existing file that
	// is not pcapng is refused, not overwritten.
	Path string `yaml:"path"`
	// PerAgent writes one file per agent: "{agent}" in Path is replaced by the agent's name,
	// or "-name" is inserted before the extension. With rotate-size and without max-files,
	// the agent's name must be followed by a literal ending in a non-digit (as in
	// "{agent}.pcapng"), so that one agent's numbered file cannot be another's.
	PerAgent bool `yaml:"per-agent"`
	// RotateSize (tcpdump -C, bytes), RotateInterval (-G) and MaxFiles (-W) rotate files;
	// file names are Path, then Path1, Path2... (zero-padded to MaxFiles' width when set,
	// reused as a ring like -C -W; with -G, the oldest file beyond MaxFiles is removed).
	RotateSize int64 `yaml:"rotate-size"`
	// RotateInterval starts a new file after this long (tcpdump -G); 0 disables it.
	RotateInterval time.Duration `yaml:"rotate-interval"`
	// MaxFiles is the number of files kept (tcpdump -W); 0 keeps all.
	MaxFiles int `yaml:"max-files"`
	// FlushInterval bounds how long written packets stay in memory buffers.
	FlushInterval time.Duration `yaml:"flush-interval"`
	// IdleClose, with PerAgent, closes the file of an agent disconnected this long and
	// forgets its counters and metric series, which would otherwise stay until the server
	// stops, one set per agent name ever seen; flows from its packets are exported and its
	// flow table dropped. An agent that comes back appends a new pcapng
	// section to its file (or starts the next one when the name holds a time). 0 keeps them.
	IdleClose time.Duration `yaml:"idle-close"`
}

// DefaultConfiguration returns the output's defaults.
func DefaultConfiguration() Configuration {
	return Configuration{Path: "capture.pcapng", FlushInterval: 200 * time.Millisecond, IdleClose: 5 * time.Minute}
}

// Validate checks the output configuration and names the bad key.
func (c *Configuration) Validate() error {
	if c.Path == "" {
		return config.Errorf("path", "empty")
	}
	rotating := c.RotateSize > 0 || c.RotateInterval > 0 || c.MaxFiles > 0
	if c.Path == "-" && (rotating || c.PerAgent) {
		return config.Errorf("path", "stdout cannot rotate or be per agent")
	}
	if c.RotateSize < 0 {
		return config.Errorf("rotate-size", "%d: negative", c.RotateSize)
	}
	if c.RotateInterval < 0 || (c.RotateInterval > 0 && c.RotateInterval < time.Second) {
		return config.Errorf("rotate-interval", "%v: want 0 or at least 1s", c.RotateInterval)
	}
	if c.MaxFiles < 0 || (c.MaxFiles > 0 && c.RotateSize == 0 && c.RotateInterval == 0) {
		return config.Errorf("max-files", "%d: needs rotate-size or rotate-interval", c.MaxFiles)
	}
	if c.FlushInterval <= 0 {
		return config.Errorf("flush-interval", "%v: want a positive duration", c.FlushInterval)
	}
	if c.PerAgent && c.RotateSize > 0 && c.MaxFiles == 0 {
		// The -C counter is appended to the name without padding, so a name that ends with
		// the agent's (or with a number after it) lets agent "a" 's second file, "a1", be
		// the first file of agent "a1": two writers on one file.
		if after := c.afterAgent(); after == "" || strings.HasSuffix(after, "%") || after[len(after)-1] >= '0' && after[len(after)-1] <= '9' ||
			len(after) >= 2 && after[len(after)-2] == '%' {
			return config.Errorf("path", "%q: with per-agent and rotate-size, the file counter would follow the agent name directly and could make two agents' names the same (agent \"a\" 's second file is agent \"a1\" 's first): end the path with a literal extension after the agent name (\"{agent}.pcapng\"), or set max-files", c.Path)
		}
	}
	if c.IdleClose < 0 {
		return config.Errorf("idle-close", "%v: want 0 or a positive duration", c.IdleClose)
	}
	return nil
}

// afterAgent returns what the per-agent file name template holds after the agent's name:
// the text after the last "{agent}", or the extension that NewWriter puts the name before.
func (c *Configuration) afterAgent() string {
	if i := strings.LastIndex(c.Path, "{agent}"); i >= 0 {
		return c.Path[i+len("{agent}"):]
	}
	return filepath.Ext(c.Path)
}
