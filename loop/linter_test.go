package loop_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
)

// R5.4: a graph that asks for a markdown linter gets it run — a real
// program, through the command runner, from the repository root, over the
// node's artifacts — on the live path; check runs no program and says so.
func TestLintArtifactsRunsTheGraphsLinter(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("sh is not installed; the stand-in linter is a shell script")
	}
	repo := t.TempDir()
	// The linter: refuses a document holding TODO, naming file and line;
	// records how it was called.
	writeFile(t, repo, "tools/mdlint", "#!"+sh+"\necho \"$PWD $*\" > called\nshift\nif grep -n TODO \"$@\"; then exit 1; fi\n")
	require.NoError(t, os.Chmod(filepath.Join(repo, "tools", "mdlint"), 0o755))
	lint := filepath.Join(repo, "tools", "mdlint")
	src := `name: linted
start: write
nodes:
  - id: write
    produces: notes.md
    exit:
      - {hook: lint-artifacts, with: {linter: [` + lint + `, --strict]}}
  - {id: done, terminal: true}
edges:
  - {from: write, on: pass, to: done}
`
	g, err := graphfile.Load("linted.yaml", []byte(src), loop.ShippedHooks())
	require.NoError(t, err)
	writeFile(t, repo, "docs/specs/issue-3/notes.md", "# Notes\n\nTODO: finish\n")
	rt, err := loop.Open(repo, loop.Options{Graph: g, Commands: loop.Commands{Runner: run.Exec{}, Root: repo}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-3")
	require.NoError(t, err)

	claim, err := rt.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.False(t, claim.Moved)
	msgs := strings.Join(claim.Messages, "\n")
	require.Contains(t, msgs, "markdown linter "+lint+" reported problems, exit 1")
	require.Contains(t, msgs, "3:TODO: finish", "the linter's own output comes back")
	called, err := os.ReadFile(filepath.Join(repo, "called"))
	require.NoError(t, err)
	require.Equal(t, repo+" --strict docs/specs/issue-3/notes.md\n", string(called), "run from the repository root, over the artifact")

	// check runs no program: the node passes on the built-in lint alone.
	require.NoError(t, os.Remove(filepath.Join(repo, "called")))
	rep, err := rt.Status(ctx, "issue-3", true)
	require.NoError(t, err)
	nr, _ := rep.Node("write")
	require.Equal(t, graph.StatusPass, nr.Status, "%+v", nr)
	_, err = os.Stat(filepath.Join(repo, "called"))
	require.ErrorIs(t, err, os.ErrNotExist, "check started the linter")

	writeFile(t, repo, "docs/specs/issue-3/notes.md", "# Notes\n\nDone.\n")
	claim, err = rt.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.True(t, claim.Moved, "%+v", claim)
}
