//go:build !unix

package capture

import "os"

// setBlocking does nothing where there are no FIFOs and O_NONBLOCK does not apply to files.
func setBlocking(*os.File) error { return nil }
