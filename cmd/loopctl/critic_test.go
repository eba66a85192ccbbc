package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// standInClaude puts a `claude` on PATH that records its argv and stdin
// and answers as `claude -p --output-format json` does.
func standInClaude(t *testing.T, answer string) (logDir string) {
	t.Helper()
	bin, logDir := t.TempDir(), t.TempDir()
	out, err := json.Marshal(map[string]any{"type": "result", "result": answer})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(logDir, "answer.json"), out, 0o600))
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" + logDir + "/argv'\ncat > '" + logDir + "/stdin'\npwd > '" + logDir + "/cwd'\ncat '" + logDir + "/answer.json'\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return logDir
}

func criticRepo(t *testing.T) string {
	repo := newRepo(t)
	write(t, repo, ".the-loop/harness-config.yaml", "ticketing:\n  github: {owner: acme, repo: widgets}\nreviews:\n  critics:\n    opus: {harness: claude, model: opus}\n    broken: {harness: vim}\n")
	write(t, repo, "docs/specs/issue-42/design.md", "# Design\n\n## Overview\n\nx\n")
	write(t, repo, "docs/specs/issue-42/execution-log.md", "# Execution log\n\n## Design critic review\n\n## Review cycles\n\nnone yet\n")
	return repo
}

// TestCriticRunRecordsTheReview: a configured critic runs through its
// harness's one-shot command line (the prompt on stdin, never on argv),
// from the repository root, and its answer lands — dated, fenced — inside
// the section the node's exit chain checks, not after the sections that
// follow it. A bad critic entry is a warning naming the key.
func TestCriticRunRecordsTheReview(t *testing.T) {
	repo := criticRepo(t)
	logs := standInClaude(t, "sound with findings\n\n1. design.md § Overview: no error handling ``` stated.")
	f, io := testFactory(t, repo, nil)

	code := Main([]string{"loopctl", "critic", "list", "--format", "json"}, f)
	require.Equal(t, exitOK, code, io.err.String())
	require.JSONEq(t, `[{"name":"opus","harness":"claude","model":"opus","timeoutSeconds":600}]`, io.out.String())
	require.Contains(t, io.err.String(), "reviews.critics.broken.harness \"vim\"")
	io.out.Reset()

	code = Main([]string{"loopctl", "critic", "run", "opus", "--work-item", "issue-42", "--node", "design-critic-review", "--prompt", "$(touch /tmp/pwned) focus on errors"}, f)
	require.Equal(t, exitOK, code, io.err.String())
	require.Contains(t, io.out.String(), `under "## Design critic review"`)

	argv, err := os.ReadFile(filepath.Join(logs, "argv"))
	require.NoError(t, err)
	require.Equal(t, "-p\n--output-format\njson\n--model\nopus\n", string(argv), "the prompt is never on the command line")
	stdin, err := os.ReadFile(filepath.Join(logs, "stdin"))
	require.NoError(t, err)
	require.Contains(t, string(stdin), "docs/specs/issue-42/design.md")
	require.Contains(t, string(stdin), "$(touch /tmp/pwned) focus on errors", "the author's ask reaches the critic as data")
	cwd, err := os.ReadFile(filepath.Join(logs, "cwd"))
	require.NoError(t, err)
	realRepo, _ := filepath.EvalSymlinks(repo)
	require.Equal(t, realRepo, strings.TrimSpace(string(cwd)))

	logText, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-42/execution-log.md"))
	require.NoError(t, err)
	s := string(logText)
	review := strings.Index(s, "critic opus (claude, opus)")
	require.Greater(t, review, strings.Index(s, "## Design critic review"))
	require.Less(t, review, strings.Index(s, "## Review cycles"), "inside its section:\n%s", s)
	require.Contains(t, s, "````markdown\nsound with findings")
}

// A critic that is not installed fails the round closed: exit 1, its name
// and the program in the message, nothing recorded.
func TestCriticNotInstalledRecordsNothing(t *testing.T) {
	repo := criticRepo(t)
	t.Setenv("PATH", t.TempDir())
	f, io := testFactory(t, repo, nil)
	before, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-42/execution-log.md"))
	require.NoError(t, err)
	code := Main([]string{"loopctl", "critic", "run", "opus", "--work-item", "issue-42", "--node", "design-critic-review"}, f)
	require.Equal(t, exitFailed, code)
	require.Contains(t, io.err.String(), "claude is not installed")
	after, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-42/execution-log.md"))
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))

	code = Main([]string{"loopctl", "critic", "run", "nobody", "--work-item", "issue-42"}, f)
	require.Equal(t, exitFailed, code)
	require.Contains(t, io.err.String(), "no critic \"nobody\"; configured: opus")
}

// Each CLI's one-shot output gives up its review text.
func TestCriticAnswerPerCLI(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"claude and cursor", `{"type":"result","result":"fine"}`, "fine"},
		{"gemini", `{"response":"looks sound","stats":{}}`, "looks sound"},
		{"codex", "{\"type\":\"thread.started\"}\n{\"type\":\"item.completed\",\"item\":{\"type\":\"reasoning\",\"text\":\"hm\"}}\n{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"1. a finding\"}}\n", "1. a finding"},
		{"plain text", "just words", "just words"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, criticAnswer([]byte(tc.out))) })
	}
}

// TestCriticModelFromTheStagesTier: a critic that names no model runs
// with the model its node's stage's tier names for its harness
// (tokenEconomy.modelRouting), raised to the work item's risk-tier floor;
// one that names a model keeps it; the log names the model used.
func TestCriticModelFromTheStagesTier(t *testing.T) {
	repo := newRepo(t)
	write(t, repo, ".the-loop/harness-config.yaml", "ticketing:\n  github: {owner: acme, repo: widgets}\nreviews:\n  critics:\n    routed: {harness: claude}\n    pinned: {harness: claude, model: opus}\n"+
		"tokenEconomy:\n  enabled: true\n  modelRouting:\n    enabled: true\n    tiers:\n      economy: {model: haiku}\n      standard: {claude: sonnet}\n      frontier: {claude: opus-4}\n"+
		"    stages:\n      critic-review: standard\n      evidence: economy\n    riskTierFloor:\n      \"5\": frontier\n")
	write(t, repo, "docs/specs/issue-42/requirements.md", "---\nriskTier: 3\n---\n# R\n")
	write(t, repo, "docs/specs/issue-43/requirements.md", "---\nriskTier: 5\n---\n# R\n")
	for _, id := range []string{"issue-42", "issue-43"} {
		write(t, repo, "docs/specs/"+id+"/execution-log.md", "# Execution log\n\n## Design critic review\n\n## Review cycles\n\nnone yet\n")
	}
	logs := standInClaude(t, "fine")
	f, io := testFactory(t, repo, nil)
	for _, tc := range []struct{ critic, item, node, want string }{
		{"routed", "issue-42", "design-critic-review", "sonnet"}, // stage critic-review → standard
		{"routed", "issue-43", "design-critic-review", "opus-4"}, // risk tier 5 → at least frontier
		{"routed", "issue-42", "evidence", "haiku"},              // economy: every harness
		{"pinned", "issue-42", "design-critic-review", "opus"},   // the critic's own model wins
	} {
		io.out.Reset()
		code := Main([]string{"loopctl", "critic", "run", tc.critic, "--work-item", tc.item, "--node", tc.node}, f)
		require.Equal(t, exitOK, code, io.err.String())
		argv, err := os.ReadFile(filepath.Join(logs, "argv"))
		require.NoError(t, err)
		require.Equal(t, "-p\n--output-format\njson\n--model\n"+tc.want+"\n", string(argv), "%+v", tc)
		logText, err := os.ReadFile(filepath.Join(repo, "docs/specs", tc.item, "execution-log.md"))
		require.NoError(t, err)
		require.Contains(t, string(logText), "critic "+tc.critic+" (claude, "+tc.want+")")
	}
	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "critic", "run", "routed", "--work-item", "issue-42", "--node", "design-critic-review", "--dry-run"}, f))
	require.Contains(t, io.out.String(), "model sonnet: tier standard of stage critic-review (tokenEconomy.modelRouting)")

	// `loopctl config harness` reads modelRouting and still warns on the
	// rest of tokenEconomy.
	write(t, repo, ".the-loop/harness-config.yaml", "tokenEconomy:\n  enabled: true\n  modelRouting: {stages: {design: frontier}}\n  thinkingEffort: {stages: {design: high}}\n")
	io.out.Reset()
	io.err.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "harness"}, f), io.err.String())
	require.Contains(t, io.out.String(), "tokenEconomy.modelRouting")
	require.Contains(t, io.err.String(), "tokenEconomy is not read by theloop: theloop chooses no effort")
	require.NotContains(t, io.err.String(), "tokenEconomy.modelRouting is not read")
	require.NotContains(t, io.err.String(), "tokenEconomy.enabled is not read")
}
