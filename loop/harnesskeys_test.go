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

// nested builds {a: {b: {c: v}}} from "a.b.c".
func nested(key string, v any) map[string]any {
	parts := strings.Split(key, ".")
	m := map[string]any{parts[len(parts)-1]: v}
	for i := len(parts) - 2; i >= 0; i-- {
		m = map[string]any{parts[i]: m}
	}
	return m
}

// TestEveryUnreadHarnessKeyWarns: each key of the-loop's harness config
// that theloop does not read, set alone, gets one warning naming it and
// what theloop does instead; a key theloop reads gets none; a key neither
// defines is called out as unknown.
func TestEveryUnreadHarnessKeyWarns(t *testing.T) {
	unread := loop.HarnessKeysUnread()
	require.Greater(t, len(unread), 35, "the-loop's harness config has that many keys theloop leaves alone")
	for _, key := range unread {
		got := loop.UnreadHarnessKeys(nested(key, "x"))
		require.Len(t, got, 1, key)
		require.Equal(t, key, got[0].Key)
		require.True(t, got[0].Known)
		require.NotEmpty(t, got[0].Instead, key)
		w := got[0].Warning(".the-loop/harness-config.yaml")
		require.Contains(t, w, key+" is not read by theloop: ")
	}
	for _, key := range loop.HarnessKeysRead() {
		if key == "tooling.packageManager" || key == "graph.hooks" {
			continue
		}
		require.Empty(t, loop.UnreadHarnessKeys(nested(key, "x")), key)
	}
	require.Empty(t, loop.UnreadHarnessKeys(map[string]any{"verification": map[string]any{"testCommand": "go test ./...", "timeout": 60}}), "theloop's own keys")
	got := loop.UnreadHarnessKeys(map[string]any{"workfow": map[string]any{"specDir": "x"}, "ticketing": map[string]any{"gitlab": true}})
	require.Len(t, got, 2)
	require.Equal(t, "ticketing.gitlab", got[0].Key)
	require.Equal(t, "workfow", got[1].Key)
	require.False(t, got[1].Known)
	require.Contains(t, got[1].Warning("f.yaml"), "a typo?")
}

// TestReferenceHarnessConfigReport: the-loop's own harness config, as its
// repository keeps it, is read whole: every top-level key is either read
// or warned about, tooling.unitTest becomes the test command (through uv,
// its package manager) and tooling.lint.markdown the markdown linter.
func TestReferenceHarnessConfigReport(t *testing.T) {
	repo := filepath.Join(conformanceDir, "repo")
	if _, err := os.Stat(filepath.Join(repo, ".the-loop", "harness-config.yaml")); err != nil {
		t.Skip("conformance data not present (../shared/conformance)")
	}
	rep, err := loop.ReportHarnessConfig(repo)
	require.NoError(t, err)
	require.True(t, rep.Present)
	require.Equal(t, "uv run pytest", rep.Read["verification.testCommand (effective)"])
	require.Equal(t, "markdownlint", rep.Read["tooling.lint.markdown (effective)"])
	for _, w := range rep.Warnings {
		require.NotContains(t, w, "customInstructions", "the-loop's {docs: [...]} shape is read")
	}
	covered := map[string]bool{}
	for k := range rep.Read {
		covered[strings.SplitN(k, ".", 2)[0]] = true
	}
	unread := map[string]bool{}
	for _, u := range rep.Unread {
		require.True(t, u.Known, "%s is a key of the-loop's own file", u.Key)
		unread[u.Key] = true
		covered[strings.SplitN(u.Key, ".", 2)[0]] = true
	}
	for _, top := range []string{"version", "ticketing", "repository", "workflow", "tooling", "customInstructions", "testing", "apiSpecs", "design", "localOrchestration", "hooks", "observability", "reviews", "autonomy", "security", "tdd", "minimalism", "tokenEconomy", "selfImprovement", "contextManagement", "userInteraction", "notifications", "externalTools"} {
		require.True(t, covered[top], "%s: neither read nor warned", top)
	}
	for _, k := range []string{"tokenEconomy", "autonomy", "tdd", "security.review", "tooling.integrationTest", "tooling.lint", "ticketing.github.useProjects", "userInteraction.prSummary", "customInstructions.onMissing"} {
		require.True(t, unread[k], "%s is set in the-loop's file and not read: it must be warned about", k)
	}
}

func TestToolingMapsOntoTestCommandAndLinter(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		argv       []string
		warn       string
	}{
		{"python with uv", "tooling:\n  unitTest: {python: pytest}\n  packageManager: {python: uv}\n", []string{"uv", "run", "pytest"}, ""},
		{"python bare", "tooling:\n  unitTest: {python: pytest}\n", []string{"pytest"}, ""},
		{"go by name", "tooling:\n  unitTest: {go: go}\n", []string{"go", "test", "./..."}, ""},
		{"a command", "tooling:\n  unitTest: \"make test\"\n", []string{"make", "test"}, ""},
		{"two languages", "tooling:\n  unitTest: {python: pytest, go: go}\n", nil, "tooling.unitTest: names 2 languages' runners (go, python)"},
		{"shell syntax", "tooling:\n  unitTest: \"pytest; rm -rf x\"\n", []string{"pytest;", "rm", "-rf", "x"}, ""},
		{"testCommand wins", "verification:\n  testCommand: go vet ./...\ntooling:\n  unitTest: {python: pytest}\n", []string{"go", "vet", "./..."}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, warns, err := loop.ParseHarnessConfig("h.yaml", []byte(tc.yaml))
			require.NoError(t, err)
			require.Equal(t, tc.argv, cfg.TestCommand)
			if tc.warn != "" {
				require.Len(t, warns, 1)
				require.Contains(t, warns[0], tc.warn)
				require.Contains(t, warns[0], "set verification.testCommand")
			} else {
				require.Empty(t, warns)
			}
		})
	}
	cfg, warns, err := loop.ParseHarnessConfig("h.yaml", []byte("tooling:\n  lint:\n    markdown: markdownlint-cli\n"))
	require.NoError(t, err)
	require.Empty(t, warns)
	require.Equal(t, []string{"markdownlint"}, cfg.MarkdownLinter)
	_, warns, err = loop.ParseHarnessConfig("h.yaml", []byte("tooling:\n  lint:\n    markdown: [a]\n"))
	require.NoError(t, err)
	require.Contains(t, strings.Join(warns, "\n"), "tooling.lint.markdown: expected the linter's command")
}

// TestToolingLintMarkdownRuns: the repository's markdown linter
// (tooling.lint.markdown) runs over the node's artifacts on the agent's
// claim, through the repository's command runner; check and a runtime
// without one (loopd's) start nothing and say so.
func TestToolingLintMarkdownRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("sh is not installed; the stand-in linter is a shell script")
	}
	repo := t.TempDir()
	writeFile(t, repo, "tools/mdlint", "#!"+sh+"\necho \"$*\" > called\nif grep -n TODO \"$@\"; then exit 1; fi\n")
	require.NoError(t, os.Chmod(filepath.Join(repo, "tools", "mdlint"), 0o755))
	writeFile(t, repo, ".the-loop/harness-config.yaml", "tooling:\n  lint:\n    markdown: "+filepath.Join(repo, "tools", "mdlint")+"\n")
	src := `name: linted
start: write
nodes:
  - id: write
    produces: notes.md
    exit: [lint-artifacts]
  - {id: done, terminal: true}
edges:
  - {from: write, on: pass, to: done}
`
	g, err := graphfile.Load("linted.yaml", []byte(src), loop.ShippedHooks())
	require.NoError(t, err)
	writeFile(t, repo, "docs/specs/issue-3/notes.md", "# Notes\n\nTODO: finish\n")
	ctx := context.Background()

	daemon, err := loop.Open(repo, loop.Options{Graph: g, Commands: loop.Commands{Runner: run.Exec{}, Root: repo}})
	require.NoError(t, err)
	rep, err := daemon.Status(ctx, "issue-3", true)
	require.NoError(t, err)
	nr, _ := rep.Node("write")
	require.Equal(t, graph.StatusPass, nr.Status)
	_, err = os.Stat(filepath.Join(repo, "called"))
	require.ErrorIs(t, err, os.ErrNotExist, "check started the repository's linter")

	agent, err := loop.Open(repo, loop.Options{Graph: g, RepoCommands: loop.Commands{Runner: run.Exec{}, Root: repo}})
	require.NoError(t, err)
	_, err = agent.Start(ctx, "issue-3")
	require.NoError(t, err)
	claim, err := agent.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.False(t, claim.Moved)
	msgs := strings.Join(claim.Messages, "\n")
	require.Contains(t, msgs, "reported problems, exit 1")
	require.Contains(t, msgs, "3:TODO: finish")
	called, err := os.ReadFile(filepath.Join(repo, "called"))
	require.NoError(t, err)
	require.Equal(t, "docs/specs/issue-3/notes.md\n", string(called))

	writeFile(t, repo, "docs/specs/issue-3/notes.md", "# Notes\n\nDone.\n")
	claim, err = agent.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.True(t, claim.Moved, "%+v", claim)
}
