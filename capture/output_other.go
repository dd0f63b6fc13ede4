//go:build !unix

package capture

import "os"

// setBlocking does nothing where there are no FIFOs and O_NONBLOCK does not apply to files.
func setBlocking(*os.File) error { return nil }

// pollable returns f: without Unix pipes, there is no blocking pipe to turn into a pollable one.
func pollable(f *os.File) *os.File { return f }
