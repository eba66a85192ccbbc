package main

import (
	"errors"
	"io/fs"
	"os"
)

// prepareDemoDir makes dir ready for a demo: it must not exist yet, or be an
// empty directory. The demo initialises a git repository there and commits
// everything in it, so it never runs inside an existing repository or over
// anybody's files.
func prepareDemoDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return failWith(exitRefused, "loopctl demo: --dir %s: %v; name a new or empty directory", dir, err)
	case len(entries) > 0:
		return failWith(exitRefused, "loopctl demo: --dir %s is not empty; the demo creates its own git repository and commits everything in it, so it only runs in a new or empty directory (omit --dir for a temporary one)", dir)
	}
	return nil
}
