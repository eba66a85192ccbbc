package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/run"
)

// ErrDiffUnavailable is wrapped by ChangedWorkItems when the diff cannot be
// computed. Callers fail closed: a check that could not tell what changed
// has checked nothing.
var ErrDiffUnavailable = errors.New("the changed work items cannot be computed")

// ChangedItems is what ChangedWorkItems found.
type ChangedItems struct {
	// Present are the touched work items whose directory exists at HEAD,
	// sorted: the ones to check.
	Present []string
	// Deleted are touched work items whose directory no longer exists.
	Deleted []string
}

// ChangedWorkItems lists the work items with a file under
// <spec dir>/<id>/ that differs between base and HEAD — `git diff
// --name-only base...HEAD`, i.e. the changes HEAD made since it diverged
// from base, as a pull request shows them (docs/graph.md §5.5). git runs as a
// subprocess through runner (nil: run.Exec); any failure — no git, not a
// repository, an unknown revision — returns an error wrapping
// ErrDiffUnavailable.
func (r *Repo) ChangedWorkItems(ctx context.Context, runner run.Runner, base string) (ChangedItems, error) {
	base = strings.TrimSpace(base)
	if base == "" || strings.HasPrefix(base, "-") || strings.ContainsAny(base, " \t\r\n\x00") || strings.Contains(base, "..") {
		return ChangedItems{}, fmt.Errorf("%w: %q is not a git revision (write a branch, tag or commit such as origin/main)", ErrDiffUnavailable, base)
	}
	if runner == nil {
		runner = run.Exec{}
	}
	c := run.Git("-C", r.Root, "diff", "--no-ext-diff", "--no-textconv", "--relative", "--name-only", "--no-renames", "-z", base+"...HEAD", "--")
	c.Timeout = time.Minute
	res, err := runner.Run(ctx, c)
	if err != nil {
		return ChangedItems{}, fmt.Errorf("%w: git diff %s...HEAD in %s: %v", ErrDiffUnavailable, base, r.Root, err)
	}
	specDir := r.SpecDir
	if specDir == "" {
		specDir = DefaultSpecDir
	}
	prefix := strings.Trim(path.Clean(filepath.ToSlash(specDir)), "/") + "/"
	seen := map[string]bool{}
	var out ChangedItems
	for _, p := range bytes.Split(res.Stdout, []byte{0}) {
		rest, ok := strings.CutPrefix(string(p), prefix)
		if !ok {
			continue
		}
		id, _, inDir := strings.Cut(rest, "/")
		if !inDir || seen[id] || ValidateWorkItemID(id) != nil {
			continue
		}
		seen[id] = true
		// Only a directory that is really gone is "deleted"; anything else
		// (a symbolic link, a file, an unreadable entry) is left for the
		// check to refuse.
		if _, err := os.Lstat(filepath.Join(r.SpecRoot(), id)); errors.Is(err, fs.ErrNotExist) {
			out.Deleted = append(out.Deleted, id)
		} else {
			out.Present = append(out.Present, id)
		}
	}
	sort.Strings(out.Present)
	sort.Strings(out.Deleted)
	return out, nil
}
