package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
)

const templatesDir = "skills/the-loop/templates/"

// fill is what an agent does with a template: every TODO(the-loop):
// placeholder replaced by its own words (here: the guidance text itself),
// every box ticked once its work is done.
func fill(t *testing.T, name string) string {
	t.Helper()
	text := string(mustRead(templatesDir + name))
	require.Contains(t, text, "TODO(the-loop):", "%s marks what to fill", name)
	text = strings.ReplaceAll(text, "TODO(the-loop): ", "")
	text = strings.ReplaceAll(text, "- [ ]", "- [x]")
	text = strings.ReplaceAll(text, "issue-<n>", "issue-7")
	require.NotContains(t, text, "TODO(the-loop)")
	return text
}

// TestTemplatesPassTheirNodes: an artifact started from each template and
// filled in passes its node's real exit chain in the shipped work-item
// loop — the item is forced to the node, the artifacts are written, and
// the node is claimed. The templates without a node of their own
// (decision, pull request briefing) pass the artifact lint.
func TestTemplatesPassTheirNodes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		node      string
		templates []string // written in order; the last is the node's own
	}{
		{"brainstorming", []string{"brainstorm.md"}},
		{"requirements-definition", []string{"requirements.md"}},
		{"requirements-definition", []string{"bugfix.md"}},
		{"design", []string{"requirements.md", "design.md"}},
		{"design", []string{"bugfix.md", "design.md"}},
		{"design-critic-review", []string{"execution-log.md"}},
		{"test-planning", []string{"testing-plan.md"}},
		{"tasks-breakdown", []string{"tasks.md"}},
		{"verification", []string{"execution-log.md"}},
		{"self-review", []string{"execution-log.md"}},
		{"critic-review", []string{"execution-log.md"}},
		{"security-review", []string{"execution-log.md"}},
		{"evidence", []string{"execution-log.md"}},
		{"capability-docs", []string{"execution-log.md"}},
		{"reviewer-briefing", []string{"execution-log.md"}},
	} {
		t.Run(tc.node+"/"+strings.Join(tc.templates, "+"), func(t *testing.T) {
			repo := t.TempDir()
			dir := filepath.Join(repo, "docs", "specs", "issue-7")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for _, name := range tc.templates {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(fill(t, name)), 0o644))
			}
			claim := claimAt(t, repo, tc.node)
			require.Equal(t, graph.StatusPass, claim.Status, "%s from %v: %v", tc.node, tc.templates, claim.Messages)
			require.True(t, claim.Moved)
		})
	}

	// Copied as it is, each template blocks its node: the finding names
	// the file, the line, the placeholder and the fix.
	for _, tc := range []struct{ node, name string }{
		{"brainstorming", "brainstorm.md"}, {"requirements-definition", "requirements.md"}, {"requirements-definition", "bugfix.md"},
		{"test-planning", "testing-plan.md"}, {"tasks-breakdown", "tasks.md"}, {"verification", "execution-log.md"},
	} {
		t.Run("as shipped/"+tc.node+"/"+tc.name, func(t *testing.T) {
			raw := string(mustRead(templatesDir + tc.name))
			repo := t.TempDir()
			dir := filepath.Join(repo, "docs", "specs", "issue-7")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.name), []byte(raw), 0o644))
			claim := claimAt(t, repo, tc.node)
			require.Equal(t, graph.StatusBlock, claim.Status, "%s copied as it is must not pass %s", tc.name, tc.node)
			line := 0
			for i, l := range strings.Split(raw, "\n") {
				if strings.Contains(l, "TODO(the-loop)") {
					line = i + 1
					break
				}
			}
			msgs := strings.Join(claim.Messages, "\n")
			require.Contains(t, msgs, fmt.Sprintf("line %d still holds the template's placeholder \"TODO(the-loop)", line), msgs)
			require.Contains(t, msgs, "docs/specs/issue-7/"+tc.name)
			require.Contains(t, msgs, "replace it with your own words")
		})
	}

	// Unfilled, the node's own artifact must not pass where its sections
	// are checked: an empty section is a finding.
	repo := t.TempDir()
	dir := filepath.Join(repo, "docs", "specs", "issue-7")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	empty := strings.ReplaceAll(string(mustRead(templatesDir+"tasks.md")), "- [ ] 1. TODO(the-loop): a task small enough for one commit (cites R1)\n- [ ] 2. TODO(the-loop): the next one; say which task it depends on\n", "")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tasks.md"), []byte(empty), 0o644))
	rt, err := loop.Open(repo, loop.Options{WorkItem: "issue-7"})
	require.NoError(t, err)
	_, err = rt.Force(ctx, "issue-7", graph.ForceRequest{To: "tasks-breakdown", Reason: "the template test starts here"})
	require.NoError(t, err)
	claim, err := rt.Complete(ctx, "issue-7", "tasks-breakdown", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusBlock, claim.Status, "a template whose section is left empty blocks")

	for _, name := range []string{"decision.md", "pr-briefing.md"} {
		t.Run(name, func(t *testing.T) {
			src := "name: lint\nstart: write\nnodes:\n  - id: write\n    produces: " + name + "\n    exit: [lint-artifacts]\n  - {id: done, terminal: true}\nedges:\n  - {from: write, on: pass, to: done}\n"
			g, err := graphfile.Load("lint.yaml", []byte(src), loop.ShippedHooks())
			require.NoError(t, err)
			repo := t.TempDir()
			dir := filepath.Join(repo, "docs", "specs", "issue-7")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(fill(t, name)), 0o644))
			rt, err := loop.Open(repo, loop.Options{Graph: g, WorkItem: "issue-7"})
			require.NoError(t, err)
			_, err = rt.Start(ctx, "issue-7")
			require.NoError(t, err)
			claim, err := rt.Complete(ctx, "issue-7", "write", "agent")
			require.NoError(t, err)
			require.Equal(t, graph.StatusPass, claim.Status, "%v", claim.Messages)

			// As shipped, lint-artifacts refuses it.
			repo = t.TempDir()
			dir = filepath.Join(repo, "docs", "specs", "issue-7")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), mustRead(templatesDir+name), 0o644))
			rt, err = loop.Open(repo, loop.Options{Graph: g, WorkItem: "issue-7"})
			require.NoError(t, err)
			_, err = rt.Start(ctx, "issue-7")
			require.NoError(t, err)
			claim, err = rt.Complete(ctx, "issue-7", "write", "agent")
			require.NoError(t, err)
			require.Equal(t, graph.StatusBlock, claim.Status)
			require.Contains(t, strings.Join(claim.Messages, "\n"), "still holds the template's placeholder")
		})
	}
}

// claimAt forces issue-7 of repo to node in the shipped work-item loop
// and claims it.
func claimAt(t *testing.T, repo, node string) *graph.Claim {
	t.Helper()
	ctx := context.Background()
	rt, err := loop.Open(repo, loop.Options{WorkItem: "issue-7"})
	require.NoError(t, err)
	_, err = rt.Force(ctx, "issue-7", graph.ForceRequest{To: node, Reason: "the template test starts here"})
	require.NoError(t, err)
	claim, err := rt.Complete(ctx, "issue-7", node, "agent")
	require.NoError(t, err)
	return claim
}

// TestTemplatePlaceholdersAreMarked: every placeholder of a template —
// issue-<n>, <trigger>, any <…> — sits on a line the marker the hooks
// refuse (TODO(the-loop)) marks, so that no template can be copied with a
// gap the hooks do not see.
func TestTemplatePlaceholdersAreMarked(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(Name, filepath.FromSlash(templatesDir)))
	require.NoError(t, err)
	angle := regexp.MustCompile(`<[a-z][^<>]*>`)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "webhook-") {
			continue
		}
		for i, l := range strings.Split(string(mustRead(templatesDir+e.Name())), "\n") {
			if angle.MatchString(l) && !strings.Contains(l, hooks.PlaceholderMarker) {
				t.Errorf("%s:%d: %q holds a placeholder on a line without %s", e.Name(), i+1, l, hooks.PlaceholderMarker)
			}
		}
	}
}

// TestEveryTemplateIsNamed: the skill and the writing guide name every
// template the plugin ships, and none they name is missing.
func TestEveryTemplateIsNamed(t *testing.T) {
	guide := string(mustRead("skills/the-loop/reference/writing.md"))
	entries, err := os.ReadDir(filepath.Join(Name, filepath.FromSlash(templatesDir)))
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "webhook-") {
			continue // the daemon's prompts
		}
		n++
		require.Contains(t, guide, "`"+e.Name()+"`", "writing.md must name templates/%s", e.Name())
	}
	require.Equal(t, 9, n)
}
