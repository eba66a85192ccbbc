package loop

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOperatorStateRootIsOneRule: loopd, loopctl's operator verbs and
// loop-gate resolve the state root through this one function, so the
// signing key loopd creates is the one `loopctl keys show` prints wherever
// either was started.
func TestOperatorStateRootIsOneRule(t *testing.T) {
	home := func() (string, error) { return "/home/op", nil }
	noHome := func() (string, error) { return "", errors.New("no home") }
	cases := []struct {
		name       string
		configured string
		env        string
		home       func() (string, error)
		want       string
		wantErr    string
	}{
		{name: "default", configured: "", home: home, want: "/home/op/.the-loop"},
		{name: "relative under home, not the working directory", configured: "state", home: home, want: "/home/op/state"},
		{name: "tilde", configured: "~/x", home: home, want: "/home/op/x"},
		{name: "absolute", configured: "/var/lib/theloop/", home: home, want: "/var/lib/theloop"},
		{name: "env wins", configured: "/var/lib/theloop", env: "/srv/t", home: home, want: "/srv/t"},
		{name: "no home, relative", configured: ".the-loop", home: noHome, wantErr: "THE_LOOP_STATE_ROOT"},
		{name: "no home, absolute", configured: "/abs", home: noHome, want: "/abs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == StateRootEnv {
					return tc.env
				}
				return ""
			}
			got, err := OperatorStateRoot(tc.configured, getenv, tc.home)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, filepath.FromSlash(tc.want), got)
		})
	}
}
