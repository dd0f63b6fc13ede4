//go:build !linux

package schema

import "time"

// threadCPUTime falls back to wall-clock time where there is no thread CPU clock.
func threadCPUTime() int64 { return time.Now().UnixNano() }
