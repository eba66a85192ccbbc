package main

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}

// O4: `check --changed BASE` checks exactly the work items a branch touched
// (real git), passes with a note when none, and fails closed when the diff
// cannot be computed.
func TestCheckChangedChecksTheTouchedWorkItems(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := newRepo(t) // issue-42
	write(t, repo, "docs/specs/issue-7/requirements.md", "# R\n")
	write(t, repo, "docs/specs/issue-9/requirements.md", "# R\n")
	gitIn(t, repo, "init", "-q", "-b", "main")
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "base")
	gitIn(t, repo, "checkout", "-qb", "feature")
	f, io := testFactory(t, repo, nil)

	// Nothing touched yet: a pass, with a note.
	require.Equal(t, exitOK, Main([]string{"loopctl", "check", "--changed", "main", "--recompute"}, f), io.err.String())
	require.Contains(t, io.out.String(), "nothing to check")

	write(t, repo, "docs/specs/issue-42/design.md", "# D\n")
	write(t, repo, "docs/specs/issue-9/requirements.md", "# R2\n")
	write(t, repo, "README.md", "outside the spec directory\n")
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "touch two work items")
	gitIn(t, repo, "rm", "-rq", "docs/specs/issue-7")
	gitIn(t, repo, "commit", "-qm", "drop one")

	io.out.Reset()
	io.err.Reset()
	code := Main([]string{"loopctl", "check", "--changed", "main", "--recompute", "--format", "json"}, f)
	require.Equal(t, exitFailed, code, "both wait at phase-selection: not ok")
	var reps []graph.Report
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &reps), io.out.String())
	var ids []string
	for _, r := range reps {
		ids = append(ids, r.WorkItem)
	}
	require.Equal(t, []string{"issue-42", "issue-9"}, ids, "issue-7 (deleted) and the README are not checked")
	require.Contains(t, io.err.String(), "work item issue-7 was deleted between main and HEAD")

	// Fail closed: an unknown base, a revision that is an option, no repository.
	for _, base := range []string{"no-such-branch", "--output=/tmp/x", "main..HEAD"} {
		io.out.Reset()
		io.err.Reset()
		require.Equal(t, exitFailed, Main([]string{"loopctl", "check", "--changed", base, "--recompute"}, f), base)
		require.Contains(t, io.err.String(), "the changed work items cannot be computed", base)
		require.Contains(t, io.err.String(), "nothing was checked", base)
	}
	plain := newRepo(t)
	f2, io2 := testFactory(t, plain, nil)
	require.Equal(t, exitFailed, Main([]string{"loopctl", "check", "--changed", "main"}, f2))
	require.Contains(t, io2.err.String(), "the changed work items cannot be computed")

	// Usage.
	require.Equal(t, exitRefused, Main([]string{"loopctl", "check", "--changed", "main", "--all"}, f))
	require.Equal(t, exitRefused, Main([]string{"loopctl", "check", "issue-42", "--changed", "main"}, f))
	require.Equal(t, exitRefused, Main([]string{"loopctl", "check", "--changed", ""}, f))
}

// examples/github-actions/loop-check.yml's command line runs as written
// (BASE substituted) against a real git repository whose base branch lists
// a trusted key.
func TestGitHubActionsExampleRunsCheckChanged(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "github-actions", "loop-check.yml"))
	require.NoError(t, err)
	var wf struct {
		On   map[string]any `yaml:"on"`
		Jobs map[string]struct {
			Steps []struct {
				Run string            `yaml:"run"`
				Env map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal(src, &wf))
	require.Contains(t, wf.On, "pull_request")
	var line string
	for _, step := range wf.Jobs["loop-check"].Steps {
		if strings.HasPrefix(step.Run, "loopctl check") {
			line = step.Run
			require.Equal(t, "origin/${{ github.base_ref }}", step.Env["BASE"], "the base ref reaches the script through the environment")
		}
	}
	require.NotEmpty(t, line, "the workflow runs loopctl check")
	argv := strings.Fields(strings.ReplaceAll(line, `"$BASE"`, "main"))
	require.Contains(t, argv, "--changed")

	repo := newRepo(t)
	pub, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	write(t, repo, ".the-loop/trusted-keys", loop.FormatPublicKey(pub)+"\n")
	gitIn(t, repo, "init", "-q", "-b", "main")
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "base")
	gitIn(t, repo, "checkout", "-qb", "feature")
	write(t, repo, "docs/specs/issue-42/design.md", "# D\n")
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "design")

	f, io := testFactory(t, repo, nil)
	require.Equal(t, exitOK, Main(argv, f), "a gate waiting for a human is not a block: %s", io.err.String())
	require.Contains(t, io.out.String(), "issue-42")
	require.Contains(t, io.out.String(), "1 work item(s), 0 failing (--fail-on block)")
}
