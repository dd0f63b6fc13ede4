//go:build !unix

package pcapng

import "os"

// SetBlocking does nothing where there are no FIFOs and O_NONBLOCK does not apply to files.
func SetBlocking(*os.File) error { return nil }

// Pollable returns f: without Unix pipes, there is no blocking pipe to turn into a pollable one.
func Pollable(f *os.File) *os.File { return f }
