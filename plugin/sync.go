package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/internal/atomicfile"
)

// ErrNotManaged reports a directory Sync or Remove will not touch: it
// exists, holds files, and theloop did not create it.
var ErrNotManaged = errors.New("directory is not theloop's")

// Change is one file a Sync writes or removes.
type Change struct {
	// Path is slash-separated, relative to the directory.
	Path string
	// Op is "add", "update" or "remove".
	Op string
}

func (c Change) String() string { return c.Op + " " + c.Path }

// Plan compares dir with tree: the files Sync would add, update and
// remove. A missing dir is empty. Symbolic links are never followed: a
// link where a file should be is replaced by the file.
func Plan(dir string, tree Tree) ([]Change, error) {
	have, err := listManaged(dir)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, p := range tree.Paths() {
		cur, ok := have[p]
		switch {
		case !ok:
			out = append(out, Change{p, "add"})
		case !bytes.Equal(cur, tree[p]):
			out = append(out, Change{p, "update"})
		}
	}
	var gone []string
	for p := range have {
		if _, ok := tree[p]; !ok {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	for _, p := range gone {
		out = append(out, Change{p, "remove"})
	}
	return out, nil
}

// Sync makes dir hold exactly tree: changed files are replaced atomically,
// files tree lacks are removed, directories left empty go. A dir that
// exists with files but without theloop's marker is refused
// (ErrNotManaged), never overwritten. Running it twice changes nothing the
// second time.
func Sync(dir string, tree Tree) ([]Change, error) {
	changes, err := Plan(dir, tree)
	if err != nil || len(changes) == 0 {
		return changes, err
	}
	for _, c := range changes {
		target := filepath.Join(dir, filepath.FromSlash(c.Path))
		if c.Op == "remove" {
			if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("removing %s: %w", target, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", filepath.Dir(target), err)
		}
		if st, err := os.Lstat(target); err == nil && !st.Mode().IsRegular() {
			if err := os.RemoveAll(target); err != nil {
				return nil, fmt.Errorf("replacing %s: %w", target, err)
			}
		}
		if err := atomicfile.Write(target, tree[c.Path], 0o644); err != nil {
			return nil, err
		}
	}
	pruneEmptyDirs(dir)
	return changes, nil
}

// Remove deletes a directory Sync wrote. A missing dir is not an error; one
// without theloop's marker is refused (ErrNotManaged).
func Remove(dir string) (bool, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if _, err := listManaged(dir); err != nil {
		return false, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("removing %s: %w", dir, err)
	}
	return true, nil
}

// maxTreeFiles and maxFileSize bound what listManaged reads: the directory
// is ours, but a user's disk can hold anything.
const (
	maxTreeFiles = 1000
	maxFileSize  = 4 << 20
)

// listManaged reads every regular file under dir (relative slash path →
// content). It refuses a non-empty dir without the marker.
func listManaged(dir string) (map[string][]byte, error) {
	have := map[string][]byte{}
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return have, nil
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: %w (it is not a directory); move it away or choose another place", dir, ErrNotManaged)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if len(have) >= maxTreeFiles {
			return fmt.Errorf("%s holds more than %d files", dir, maxTreeFiles)
		}
		if !d.Type().IsRegular() {
			have[rel] = nil // a link or device: always replaced or removed
			return nil
		}
		b, err := readBounded(p, maxFileSize)
		if err != nil {
			return err
		}
		have[rel] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := have[managedMarker]; len(have) > 0 && !ok {
		return nil, fmt.Errorf("%s: %w (no %s file); move it away so theloop can install its plugin there", dir, ErrNotManaged, managedMarker)
	}
	return have, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// pruneEmptyDirs removes directories under dir left empty by a sync.
func pruneEmptyDirs(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != dir {
			dirs = append(dirs, p)
		}
		return nil
	})
	// Deepest first.
	slices.SortFunc(dirs, func(a, b string) int {
		return strings.Count(b, string(filepath.Separator)) - strings.Count(a, string(filepath.Separator))
	})
	for _, d := range dirs {
		_ = os.Remove(d) // fails, harmlessly, when not empty
	}
}
