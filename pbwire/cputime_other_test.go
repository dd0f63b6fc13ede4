//go:build !linux

package pbwire

import "time"

// threadCPUTime falls back to wall-clock time where no thread CPU clock is available.
func threadCPUTime() int64 { return time.Now().UnixNano() }
