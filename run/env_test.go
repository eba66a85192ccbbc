package run_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

// childEnv runs `env -0` through e (Run, and Start) and returns the names
// the child saw.
func childEnv(t *testing.T, e run.Exec, c run.Cmd) []string {
	t.Helper()
	c.Name, c.Args = "env", []string{"-0"}
	res, err := e.Run(context.Background(), c)
	require.NoError(t, err)
	var names []string
	for _, kv := range strings.Split(string(res.Stdout), "\x00") {
		if k, _, ok := strings.Cut(kv, "="); ok {
			names = append(names, k)
		}
	}
	return names
}

// A program starts from the allowlist, never from this process's
// environment minus a list: loopd's credentials, and any variable nobody
// thought of, never reach a child unless a caller names them.
func TestExecChildEnvironmentIsAllowlisted(t *testing.T) {
	for k, v := range map[string]string{
		"THE_LOOP_DASHBOARD_GH_TOKEN": "FAKE-dashboard", "NATS_CREDS": "/FAKE/creds", "GH_TOKEN": "FAKE-gh",
		"THE_LOOP_GH_WEBHOOK_SECRET": "FAKE-webhook", "SOME_NEW_SECRET": "FAKE-new", "GIT_EXEC_PATH": "/FAKE/exec",
		"GIT_CONFIG_PARAMETERS": "'core.fsmonitor=touch /tmp/x'", "LC_ALL": "C.UTF-8", "LC_BAD-NAME": "x",
	} {
		t.Setenv(k, v)
	}
	allowed := append(run.BaseEnv(), "LC_ALL")
	for name, tc := range map[string]struct {
		cmd   run.Cmd
		extra []string
	}{
		"no Cmd.Env":              {run.Cmd{}, nil},
		"Cmd.Env adds":            {run.Cmd{Env: []string{"GH_PROMPT_DISABLED=1"}}, []string{"GH_PROMPT_DISABLED"}},
		"passthrough by name":     {run.Cmd{Env: run.Passthrough("NATS_CREDS", "THE_LOOP_UNSET_VARIABLE")}, []string{"NATS_CREDS"}},
		"git gets its own pinned": {run.Git("version"), []string{"GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_ATTR_NOSYSTEM", "GIT_NO_REPLACE_OBJECTS", "GIT_TERMINAL_PROMPT"}},
	} {
		t.Run(name, func(t *testing.T) {
			names := childEnv(t, run.Exec{}, tc.cmd)
			require.Contains(t, names, "PATH")
			for _, n := range names {
				require.True(t, slices.Contains(allowed, n) || slices.Contains(tc.extra, n), "%s reached the child: only BaseEnv, LC_* and what the caller named may", n)
			}
			for _, n := range tc.extra {
				require.Contains(t, names, n)
			}
		})
	}
	// An empty environment stays empty: os/exec reads a nil Env as
	// "inherit", which must never happen by accident.
	names := childEnv(t, run.Exec{Environ: func() []string { return nil }}, run.Cmd{})
	require.Empty(t, names)
	// InheritEnv is the explicit way to pass everything (loopctl acting for
	// its own user).
	require.Contains(t, childEnv(t, run.Exec{Environ: run.InheritEnv}, run.Cmd{}), "SOME_NEW_SECRET")
}

// A started program (tmux's control client) gets the same allowlist.
func TestExecStartEnvironmentIsAllowlisted(t *testing.T) {
	t.Setenv("NATS_CREDS", "FAKE")
	p, err := run.Exec{}.Start(run.Cmd{Name: "sh", Args: []string{"-c", `read x; echo "[${NATS_CREDS:-none}] [${HOME:+home}]"`}})
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.Stdin.Write([]byte("go\n"))
	require.NoError(t, err)
	buf := make([]byte, 64)
	n, _ := p.Stdout.Read(buf)
	want := "[none] [home]\n"
	if os.Getenv("HOME") == "" {
		want = "[none] []\n"
	}
	require.Equal(t, want, string(buf[:n]))
}

func TestAllowedEnvKeepsFirstAndSorts(t *testing.T) {
	got := run.AllowedEnv([]string{"TZ=UTC", "PATH=/a", "PATH=/b", "GH_TOKEN=x", "LC_CTYPE=C", "noequals", "FOO=1"}, []string{"FOO"})
	require.Equal(t, []string{"FOO=1", "LC_CTYPE=C", "PATH=/a", "TZ=UTC"}, got)
}
