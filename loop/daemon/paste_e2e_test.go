package daemon_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon"
)

// crashOnce returns a fault that "crashes" once at point, for the first
// paste whose key the crash has not seen yet after armed is set.
func crashOnce(point string, crashed *atomic.Int32) func(string, string) error {
	return func(p, key string) error {
		if p == point && strings.HasSuffix(key, "#paste") && crashed.CompareAndSwap(0, 1) {
			return daemon.ErrInjectedCrash
		}
		return nil
	}
}

// Exactly once into the agent (issue 34): a crash between the paste and the
// mark that records it does not paste the event again — the redelivery finds
// the paste's marker in the pane — and a crash between the intent and the
// paste pastes it on the redelivery (nothing in the pane says it was).
func TestPasteIsExactlyOnceAcrossACrash(t *testing.T) {
	for _, tc := range []struct {
		name, point, note string
		found             int // dispatch.paste_found expected
	}{
		{"crash between paste and mark", daemon.FaultAfterPaste, "note that crashed after its paste", 1},
		{"crash between intent and paste", daemon.FaultAfterIntent, "note that crashed before its paste", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, nil)
			n := w.openLabeled()
			w.waitIdle()
			w.eventually("the session to start", func() bool { return w.spawns() == 1 })

			var crashed atomic.Int32
			w.d.InjectPasteFault(crashOnce(tc.point, &crashed))
			_, err := w.sim.Comment(repoFull, n, human, tc.note)
			require.NoError(t, err)
			w.waitIdle()
			w.eventually("the crash and the redelivery", func() bool {
				return crashed.Load() == 1 && strings.Contains(w.received(), tc.note)
			})
			w.waitIdle()
			require.Equal(t, 1, strings.Count(w.received(), tc.note), "the note reached the agent once:\n%s", w.received())
			require.Equal(t, tc.found, w.count("dispatch.paste_found"))
			require.Equal(t, 1, w.spawns())

			// The next event is pasted as ever.
			_, err = w.sim.Comment(repoFull, n, human, "the note after")
			require.NoError(t, err)
			w.waitIdle()
			w.eventually("the next note", func() bool { return strings.Contains(w.received(), "the note after") })
			require.Equal(t, 1, strings.Count(w.received(), "the note after"))
		})
	}
}
