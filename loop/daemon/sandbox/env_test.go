package sandbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnvKeepsOnlyTheAllowlist(t *testing.T) {
	got := Env([]string{"PATH=/bin", "GH_TOKEN=x", "LC_ALL=C", "LC_=y", "FOO=1", "HOME=/h", "THE_LOOP_TRUST_KEYS=k", "BAR=2", "PATH=/dup"}, []string{"BAR", "GH_TOKEN"})
	require.Equal(t, []string{"BAR=2", "HOME=/h", "LC_=y", "LC_ALL=C", "PATH=/bin"}, got, "secrets are dropped even when listed")
}

func TestCheckAgentEnvRefusesSecrets(t *testing.T) {
	for _, tc := range []struct {
		names []string
		extra []string
		want  string
	}{
		{[]string{"ANTHROPIC_API_KEY", "GOFLAGS"}, nil, ""},
		{[]string{"GH_TOKEN"}, nil, "GH_TOKEN is a secret"},
		{[]string{"THE_LOOP_TRUST_KEYS"}, nil, "THE_LOOP_TRUST_KEYS is a secret"},
		{[]string{"MY_HOOK_SECRET"}, []string{"MY_HOOK_SECRET"}, "MY_HOOK_SECRET is a secret"},
		{[]string{"THE_LOOP_WORK_ITEM"}, nil, "loopd's own"},
		{[]string{"1BAD"}, nil, "not an environment-variable name"},
	} {
		err := CheckAgentEnv(tc.names, tc.extra)
		if tc.want == "" {
			require.NoError(t, err)
			continue
		}
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), "routing.agentEnv: "), err.Error())
		require.Contains(t, err.Error(), tc.want)
	}
}

func TestValidateRefusesGrantsOverTheStateRoot(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{ReadWrite: []string{"/home/u"}, Protected: []string{"/home/u/.the-loop"}}, "contains loopd's"},
		{Policy{ReadExec: []string{"/srv/state/keys"}, Protected: []string{"/srv/state"}}, "lies inside"},
		{Policy{Registry: "/srv/state/sessions/x.json", ReadWrite: []string{"/srv/ws"}, Protected: []string{"/srv/state"}}, ""},
		{Policy{ReadWrite: []string{"rel"}}, "not absolute"},
	} {
		err := tc.p.Validate()
		if tc.want == "" {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, tc.want)
		}
	}
}

// The policy travels as JSON on the launcher's command line: an empty
// routing.agentEnv (the default) must still filter, not pass loopd's
// environment through to the tmux server.
func TestTargetEnvFiltersWithAnEmptyAgentEnv(t *testing.T) {
	t.Setenv("GH_TOKEN", "FAKE-SECRET")
	t.Setenv("SOME_OTHER", "not listed")
	enc, err := Policy{Env: []string{}}.Encode()
	require.NoError(t, err)
	p, err := DecodePolicy(enc)
	require.NoError(t, err)
	env := strings.Join(targetEnv(p), "\n")
	require.NotContains(t, env, "FAKE-SECRET")
	require.NotContains(t, env, "SOME_OTHER")
	require.Contains(t, env, "PATH=")
}
