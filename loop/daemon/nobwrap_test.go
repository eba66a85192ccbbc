package daemon_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// Without bubblewrap loopd refuses to spawn an agent (decision 22): no
// session starts, the refusal names the fix (install bubblewrap, or
// routing.sandbox: landlock), and loopd says at start that the program is
// missing. routing.sandbox: landlock then spawns, degraded and saying so.
func TestWithoutBubblewrapLoopdRefusesToSpawn(t *testing.T) {
	was := sandbox.BwrapPath
	sandbox.BwrapPath = "bwrap-not-installed-theloop-test"
	t.Cleanup(func() { sandbox.BwrapPath = was })

	find := func(w *world, name string) []string {
		w.obsMu.Lock()
		defer w.obsMu.Unlock()
		var out []string
		for _, o := range w.obs {
			if o.Name == name {
				out = append(out, fmt.Sprint(o.Fields["error"], o.Fields["program"], o.Text))
			}
		}
		return out
	}
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the spawn refused", func() bool { return len(find(w, "session.spawn_failed")) > 0 })
	require.Zero(t, w.spawns(), "no agent ran")
	require.Len(t, find(w, "session.spawn_failed"), 1, "refused once: no retry meets anything else")
	why := strings.Join(find(w, "session.spawn_failed"), "\n")
	require.Contains(t, why, "refusing to spawn an agent session")
	require.Contains(t, why, "apt-get install bubblewrap", "the refusal names the fix")
	require.Contains(t, why, "routing.sandbox: landlock", "and the degraded way out")
	require.Contains(t, strings.Join(find(w, daemon.EventProgramMissing), "\n"), sandbox.BwrapPath, "loopd says at start that bwrap is missing\n%s", w.eventNames())
	require.False(t, w.paneLive(n))

	// The degraded way, chosen: the agent runs, and every spawn says so.
	w2 := newWorld(t, landlockOnly)
	w2.openLabeled()
	w2.waitIdle()
	w2.eventually("the session to start", func() bool { return w2.spawns() == 1 })
	require.Empty(t, find(w2, "session.spawn_failed"))
}
