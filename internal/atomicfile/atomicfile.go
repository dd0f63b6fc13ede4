// Package atomicfile replaces files so that a crash or a failed write leaves the old copy or
// the new one, never an empty or partial file.
package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with what write writes. The data goes to a temporary file in the same
// directory (created when missing), synced before it is renamed over path; the directory is
// synced after, so that the rename survives a crash. When anything fails, path is left as it
// was and the temporary file is removed.
func Write(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if e := tmp.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return SyncDir(dir)
}

// WriteFile replaces path with b, as Write does.
func WriteFile(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// SyncDir makes a rename in dir durable; a filesystem that cannot sync a directory (EINVAL)
// is taken as having nothing to sync.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if e := d.Close(); err == nil {
		err = e
	}
	if errors.Is(err, syscall.EINVAL) {
		return nil
	}
	return err
}
