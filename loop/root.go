package loop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// ErrNoSuchWorkItem: a work item id that names no spec directory in the
// repository.
var ErrNoSuchWorkItem = errors.New("no such work item")

// FindRoot walks up from dir, as git does, to the repository root: the
// nearest directory holding .git (a directory in a clone, a file in a
// worktree) or theloop's harness config (.the-loop/harness-config.yaml, or
// the legacy .the-loop/config.yaml). A bare .the-loop directory is not
// enough: the operator's own ~/.the-loop (CLI config, state root) must not
// make the home directory a repository. The result is absolute with
// symbolic links resolved; ok is false when no directory at or above dir
// qualifies. FindRoot reads directory entries only and runs no program.
func FindRoot(dir string) (root string, ok bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for d := abs; ; {
		if isRoot(d) {
			return d, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", false
		}
		d = parent
	}
}

func isRoot(d string) bool {
	if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
		return true
	}
	for _, rel := range []string{HarnessConfigFile, LegacyHarnessConfigFile} {
		if st, err := os.Stat(filepath.Join(d, filepath.FromSlash(rel))); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// ResolveRoot is the repository a command works on: explicit (--repo) when
// given, which must be an existing directory and is used as is; else the
// root found by FindRoot from cwd. Both failures wrap ErrRepoNotFound and
// say how to fix them.
func ResolveRoot(explicit, cwd string) (string, error) {
	if explicit != "" {
		abs, err := filepath.Abs(explicit)
		if err != nil {
			return "", fmt.Errorf("%w: --repo %s: %v", ErrRepoNotFound, explicit, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return "", fmt.Errorf("%w: --repo %s is not a directory; pass the repository's root", ErrRepoNotFound, explicit)
		}
		return abs, nil
	}
	root, ok := FindRoot(cwd)
	if !ok {
		return "", fmt.Errorf("%w: no .git or %s in %s or any directory above it; run this inside your repository or pass --repo DIR", ErrRepoNotFound, HarnessConfigFile, cwd)
	}
	return root, nil
}

// SpecRoot is the absolute directory holding the work items' spec
// directories.
func (r *Repo) SpecRoot() string {
	dir := r.SpecDir
	if dir == "" {
		dir = DefaultSpecDir
	}
	return filepath.Join(r.Root, filepath.FromSlash(dir))
}

// WorkItems lists the repository's work items: the directories under the
// spec directory whose names are valid ids, sorted. A missing spec
// directory is no work items, not an error.
func (r *Repo) WorkItems() ([]string, error) {
	entries, err := os.ReadDir(r.SpecRoot())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && ValidateWorkItemID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// RequireWorkItem checks that id is a valid id naming an existing spec
// directory. An unknown id is ErrNoSuchWorkItem, with the nearest known ids
// (or all of them, when few) in the message, so a typo never silently
// addresses a new, empty work item.
func (r *Repo) RequireWorkItem(id string) error {
	if err := ValidateWorkItemID(id); err != nil {
		return err
	}
	st, err := os.Lstat(filepath.Join(r.SpecRoot(), id))
	if err == nil && st.IsDir() {
		return nil
	}
	display := path.Join(r.SpecDir, id)
	if r.SpecDir == "" {
		display = path.Join(DefaultSpecDir, id)
	}
	if err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is a symbolic link; theloop follows no link out of the spec directory: make it a directory", ErrUnsafePath, display)
	}
	known, _ := r.WorkItems()
	msg := fmt.Sprintf("%v: %s (no directory %s in %s)", ErrNoSuchWorkItem, id, display, r.Root)
	switch near := Nearest(id, known); {
	case len(known) == 0:
		msg += "; the repository has no work items yet"
	case len(near) > 0:
		msg += "; did you mean " + strings.Join(near, " or ") + "?"
	case len(known) <= 10:
		msg += "; known work items: " + strings.Join(known, ", ")
	default:
		msg += fmt.Sprintf("; %d work items are known (loopctl check --all lists them)", len(known))
	}
	return &noSuchWorkItem{msg: msg}
}

type noSuchWorkItem struct{ msg string }

func (e *noSuchWorkItem) Error() string { return e.msg }
func (e *noSuchWorkItem) Is(target error) bool {
	return target == ErrNoSuchWorkItem
}

// Nearest returns the candidates closest to name by edit distance — at
// most three, each within a third of name's length (and at least 2) edits —
// nearest first, ties in the candidates' order.
func Nearest(name string, candidates []string) []string {
	limit := max(2, len([]rune(name))/3)
	type scored struct {
		s string
		d int
	}
	var hits []scored
	for _, c := range candidates {
		if d := editDistance(name, c); d <= limit && c != name {
			hits = append(hits, scored{c, d})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].d < hits[j].d })
	var out []string
	for i := 0; i < len(hits) && i < 3; i++ {
		out = append(out, hits[i].s)
	}
	return out
}

// editDistance is the Levenshtein distance over runes, bounded to short
// inputs (ids and node names) by its callers.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 256 || len(rb) > 256 {
		return max(len(ra), len(rb))
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
