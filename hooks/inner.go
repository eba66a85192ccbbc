package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/workitem"
)

// RepoStateKey turns "owner/repo" (or "host/owner/repo") into the directory
// key "owner__repo" (every segment, joined by "__"). It rejects, never
// sanitises: fewer than two segments, or a segment that is not a valid
// owner or repository name (workitem.ValidName: [A-Za-z0-9._-], not "." or
// "..", not starting with "-"). The store (loop.PRLoopSubPath) and
// await-inner-loops both use it, so a loop's state and the gate that waits
// for it always agree on the directory.
func RepoStateKey(repo string) (string, error) {
	parts := strings.Split(repo, "/")
	if len(parts) < 2 {
		return "", fmt.Errorf("%q is not <owner>/<repo>", repo)
	}
	for _, p := range parts {
		if !workitem.ValidName(p) {
			return "", fmt.Errorf("%q has an invalid segment %q", repo, p)
		}
	}
	return strings.Join(parts, "__"), nil
}

// innerLoop is one pull request's inner loop found on disk.
type innerLoop struct {
	label   string // "pr-16" or "octo__infra/pr-7"
	current string
}

// MaxInnerStateBytes bounds an inner loop's graph-state.json read by
// await-inner-loops. It equals loop.MaxStateBytes (loop imports hooks, so
// the number lives here too); a larger file counts as unfinished.
const MaxInnerStateBytes = 8 << 20

// findInnerLoops reads pr-loops/pr-*/graph-state.json and
// pr-loops/*/pr-*/graph-state.json; an unreadable state counts as
// unfinished.
func findInnerLoops(a graph.Artifacts) []innerLoop {
	var out []innerLoop
	for _, pattern := range []string{"pr-loops/pr-*/graph-state.json", "pr-loops/*/pr-*/graph-state.json"} {
		matches, _ := fs.Glob(a, pattern)
		for _, m := range matches {
			label := strings.TrimPrefix(path.Dir(m), "pr-loops/")
			cur := ""
			// An unreadable or oversized state (over MaxInnerStateBytes)
			// leaves cur empty: the inner loop counts as unfinished.
			if b, err := readArtifact(a, m, MaxInnerStateBytes); err == nil {
				// Only the pointer matters here: decode just that.
				var head struct {
					CurrentNode string `json:"currentNode"`
				}
				if json.Unmarshal(b, &head) == nil {
					cur = head.CurrentNode
				}
			}
			out = append(out, innerLoop{label: label, current: cur})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].label < out[j].label })
	return out
}

// awaitInnerLoops waits until every pull request's inner loop is complete
// and every repository declared in execution-log.md has one.
func awaitInnerLoops(_ context.Context, hc *graph.HookContext) graph.HookResult {
	var declared []string
	if d := loadDoc(hc.Artifacts, ExecutionLog); d.err == nil {
		if list, ok := d.fm["repos"].([]any); ok {
			for _, r := range list {
				declared = append(declared, fmString(r))
			}
		}
	} else if !errors.Is(d.err, fs.ErrNotExist) && isFile(hc.Artifacts, ExecutionLog) {
		return graph.Block(graph.Finding("execution-log.md could not be read: "+errorKind(d.err), hc.Artifacts.Path(ExecutionLog)))
	}
	keys := map[string]string{}
	for _, r := range declared {
		k, err := RepoStateKey(r)
		if err != nil {
			return graph.Block(graph.Finding("execution-log.md declares a repository the-loop cannot use: "+err.Error()+". `repos:` entries are <owner>/<repo>.", hc.Artifacts.Path(ExecutionLog)))
		}
		keys[r] = k
	}
	loops := findInnerLoops(hc.Artifacts)
	var pending []string
	for _, l := range loops {
		if l.current != "complete" {
			pending = append(pending, l.label)
		}
	}
	origin := hc.Config.String("originRepo")
	var missing []string
	originUnknown := false
	for _, r := range declared {
		has := false
		for _, l := range loops {
			if strings.HasPrefix(l.label, keys[r]+"/") {
				has = true
			}
			if !strings.Contains(l.label, "/") && origin != "" && strings.EqualFold(r, origin) {
				has = true
			}
		}
		if !has {
			if origin == "" {
				originUnknown = true
			}
			missing = append(missing, r)
		}
	}
	if len(pending) == 0 && len(missing) == 0 {
		return graph.Pass(map[string]any{"innerLoops": len(loops)})
	}
	var parts []string
	if len(pending) > 0 {
		parts = append(parts, fmt.Sprintf("waiting for %d inner loop(s) to finish: %s", len(pending), strings.Join(pending, ", ")))
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d declared repository(ies) have no inner loop yet: %s", len(missing), strings.Join(missing, ", ")))
	}
	if originUnknown {
		parts = append(parts, "the origin repository is unknown (set ticketing.github in .the-loop/harness-config.yaml), so top-level pull-request loops cannot be attributed")
	}
	note := strings.Join(parts, "; ") + " — each pull request completes its pdlc-pr-loop (" + hc.WorkItem.SpecDir + "/pr-loops/) before the work item moves past implementation"
	return graph.Wait(note)
}
