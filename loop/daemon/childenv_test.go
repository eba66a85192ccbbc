package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

// A sandboxed agent that could read /proc/<pid>/environ of a same-user
// process outside its world must find nothing of loopd's there: the
// programs loopd runs for itself — tmux on every paste and probe, git —
// start from an allowlist, never from loopd's environment minus a list. The
// tmux server keeps routing.agentEnv (for the harness, which the launcher
// filters again), and never a secret even if listed.
func TestLoopdsOwnProgramsGetAnAllowlistedEnvironment(t *testing.T) {
	for _, k := range []string{"GH_TOKEN", "GITHUB_TOKEN", "THE_LOOP_GH_WEBHOOK_SECRET", "THE_LOOP_SERVICE_TOKEN", "ACME_GH_TOKEN", "THE_LOOP_DASHBOARD_GH_TOKEN", "NATS_CREDS"} {
		t.Setenv(k, "FAKE-SECRET-"+k)
	}
	t.Setenv("NOBODY_NAMED_ME", "dropped")
	t.Setenv("ANTHROPIC_BASE_URL", "https://model.example")
	w := &agentWorlds{cfg: &Config{SecretEnvNames: []string{"ACME_GH_TOKEN"}}}
	w.cfg.Routing.AgentEnv = []string{"ANTHROPIC_BASE_URL", "GH_TOKEN"}
	for name, tc := range map[string]struct {
		r    pathRunner
		keep []string
	}{
		"git and other programs": {pathRunner{path: "/usr/bin:/bin"}, nil},
		"tmux":                   {pathRunner{path: "/usr/bin:/bin", environ: w.tmuxEnviron}, []string{"ANTHROPIC_BASE_URL"}},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := tc.r.Run(context.Background(), run.Cmd{Name: "env", Env: []string{"EXTRA=1"}})
			require.NoError(t, err)
			out := string(res.Stdout)
			require.NotContains(t, out, "FAKE-SECRET", "no credential reaches a child of loopd")
			require.NotContains(t, out, "NOBODY_NAMED_ME", "a variable nobody named does not pass")
			require.Contains(t, out, "EXTRA=1")
			require.Contains(t, out, "PATH=/usr/bin:/bin")
			allowed := append(append(run.BaseEnv(), "EXTRA"), tc.keep...)
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				k, _, _ := strings.Cut(line, "=")
				require.True(t, strings.HasPrefix(k, "LC_") || contains(allowed, k), "%s passed the allowlist", k)
			}
			for _, k := range tc.keep {
				require.Contains(t, out, k+"=")
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
