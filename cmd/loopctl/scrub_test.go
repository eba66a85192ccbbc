package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

// What loopctl writes — graph-state.json and its own event log — holds no
// credential of the shell it runs in, nor text shaped like a well-known
// token, whatever a person types into a reason (docs/daemon.md §11.6).
func TestLoopctlScrubsStateAndEventLog(t *testing.T) {
	repo := newRepo(t)
	f, io := testFactory(t, repo, nil)
	const token = "s3cr3t-operator-token-value-0042"
	const shaped = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	getenv := f.Getenv
	f.Getenv = func(k string) string {
		if k == "GH_TOKEN" {
			return token
		}
		return getenv(k)
	}
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "force", "issue-42", "--to", "requirements-definition",
		"--reason", "pasted by mistake: " + token + " and " + shaped}, f), io.err.String())

	state, err := os.ReadFile(filepath.Join(repo, "docs", "specs", "issue-42", "graph-state.json"))
	require.NoError(t, err)
	st, err := graph.ParseState("issue-42", state)
	require.NoError(t, err, "the scrubbed state still reads back")
	require.Len(t, st.Forced, 1)
	require.Contains(t, st.Forced[0].Reason, "[redacted]")
	require.Equal(t, "requirements-definition", st.CurrentNode)

	var logs []string
	cfgDir := filepath.Dir(getenv("THE_LOOP_CLI_CONFIG"))
	require.NoError(t, filepath.WalkDir(cfgDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			b, rerr := os.ReadFile(p)
			require.NoError(t, rerr)
			logs = append(logs, string(b))
		}
		return err
	}))
	require.NotEmpty(t, logs, "loopctl's event log")
	all := strings.Join(logs, "\n")
	require.Contains(t, all, "graph.forced")
	for name, text := range map[string]string{"graph-state.json": string(state), "event log": all} {
		require.NotContains(t, text, token, name)
		require.NotContains(t, text, shaped, name)
	}
	require.Contains(t, all, "[redacted]")
}
