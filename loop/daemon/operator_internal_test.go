package daemon

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

// TestSocketPeerPolicy covers the control socket's peer policy on real
// processes: this one (an operator's, outside any session), a process that
// is gone (its ancestry unreadable: refused, fail closed) and another OS
// user's.
func TestSocketPeerPolicy(t *testing.T) {
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	self := apiserver.Peer{UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid()}
	other := os.Getuid() + 1000
	for _, tc := range []struct {
		name     string
		operator string
		peer     apiserver.Peer
		want     string
		refused  string
	}{
		{"loopd's user, no operator login", "", self, osUserIdentity(os.Getuid()), ""},
		{"loopd's user is the dashboard operator", "dana", self, "github:dana", ""},
		{"a process that is gone", "", apiserver.Peer{UID: self.UID, PID: gone.Process.Pid}, "", "could not tell whether process"},
		{"another OS user", "dana", apiserver.Peer{UID: other, PID: os.Getpid()}, "", "not loopd's user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := socketPeer(tc.operator)(tc.peer)
			if tc.refused != "" {
				require.ErrorContains(t, err, tc.refused)
				require.Empty(t, id)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, id)
		})
	}
}

// BenchmarkSocketPeerPolicy is the per-connection cost of admitting an
// operator's process: the walk up its ancestry in /proc and the user name
// lookup.
func BenchmarkSocketPeerPolicy(b *testing.B) {
	policy := socketPeer("")
	self := apiserver.Peer{UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid()}
	for b.Loop() {
		if _, err := policy(self); err != nil {
			b.Fatal(err)
		}
	}
}
