package daemon

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

// A sandboxed agent can read /proc/<pid>/environ of a same-user process
// outside its domain (Linux 6.18 allows it under PTRACE_MODE_READ), so the
// programs loopd runs for itself — tmux on every paste and probe, git,
// a repository's test command — must not carry loopd's credentials.
func TestLoopdsOwnProgramsStartWithoutCredentials(t *testing.T) {
	for _, k := range []string{"GH_TOKEN", "GITHUB_TOKEN", "THE_LOOP_GH_WEBHOOK_SECRET", "THE_LOOP_SERVICE_TOKEN", "ACME_GH_TOKEN"} {
		t.Setenv(k, "FAKE-SECRET-"+k)
	}
	t.Setenv("KEEP_ME", "kept")
	d := &Daemon{cfg: Config{SecretEnvNames: []string{"ACME_GH_TOKEN"}}} // an operator's renamed tokenEnv
	r := pathRunner{path: "/usr/bin:/bin", environ: d.childEnviron}
	res, err := r.Run(context.Background(), run.Cmd{Name: "env", Env: []string{"EXTRA=1"}})
	require.NoError(t, err)
	out := string(res.Stdout)
	require.NotContains(t, out, "FAKE-SECRET", "no credential reaches a child of loopd")
	require.Contains(t, out, "KEEP_ME=kept", "the rest of loopd's environment passes (git needs SSH_AUTH_SOCK, proxies…)")
	require.Contains(t, out, "EXTRA=1")
	require.Contains(t, out, "PATH=/usr/bin:/bin")
}
