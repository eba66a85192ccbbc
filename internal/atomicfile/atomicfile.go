// Package atomicfile replaces files so that a reader sees the old content or
// the new, never a mix: a temporary file in the same directory, written,
// renamed over the target. It is theloop's one way to do it — graph state,
// artifacts, the session registry, harness settings and the Stop hook's
// counters all go through it.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with data durably: temp file, write, chmod perm,
// fsync, rename, fsync of the directory. The directory must exist. The
// temporary file is removed on any failure. A directory that cannot be
// synced after the rename is reported, with the new file in place.
func Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, true)
}

// Replace is Write without the fsyncs: atomic against readers and crashes of
// the process, not against a power loss. For state that may be lost (a
// cache, a counter) on a path where every millisecond counts.
func Replace(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false)
}

// WriteKeepPrevious is Write without the directory's fsync: the new file's
// content is synced before the rename, so after a power loss path holds the
// new content or the content it replaced — never a torn or empty file. For
// a state whose loss is harmless because the one it replaces is still valid.
func WriteKeepPrevious(path string, data []byte, perm fs.FileMode) error {
	return writeSynced(path, data, perm, true, false)
}

func write(path string, data []byte, perm fs.FileMode, durable bool) error {
	return writeSynced(path, data, perm, durable, durable)
}

func writeSynced(path string, data []byte, perm fs.FileMode, syncFile, syncDir bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if syncFile {
		if err = f.Sync(); err != nil {
			return fmt.Errorf("writing %s: fsync: %w", path, err)
		}
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if syncDir {
		if serr := SyncDir(dir); serr != nil {
			// The new file is in place; only its durability across a power
			// loss is in doubt. Report it without removing anything.
			return fmt.Errorf("%s was written but its directory could not be synced: %w", path, serr)
		}
	}
	return nil
}

// SyncDir fsyncs a directory so that a rename or link in it is durable.
// Filesystems that cannot sync directories are accepted.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}
