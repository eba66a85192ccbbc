package daemon_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// An assignment the graph pastes while an event is handled is pasted once
// across a crash too: the redelivery of that event re-enters the node (the
// state recording the entry never landed) and delivers the assignment
// again, which finds its marker in the pane and pastes nothing. Another
// delivery's assignment (a gate routing back later) is pasted as ever.
func TestAssignmentIsExactlyOnceAcrossACrash(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	_, err := w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(t, err)
	w.waitIdle()
	const brainstorm = "/the-loop:brainstorm issue-1"
	w.eventually("the brainstorming assignment", func() bool { return strings.Contains(w.received(), brainstorm) })
	pastes := w.observed("paste", "graph.assignment")
	require.Len(t, pastes, 1)
	step := pastes[0].DeliveryID
	require.NotEmpty(t, step, "the assignment was pasted while the event was handled")
	text, marker, ok := strings.Cut(pastes[0].Text, "\n\n[the-loop ")
	require.True(t, ok, "the assignment ends with its paste marker: %q", pastes[0].Text)
	require.NotEmpty(t, marker)

	time.Sleep(500 * time.Millisecond) // the fake logs what it reads a little after the receipt
	// The event prompt names the node's assignment too: count from here.
	before := strings.Count(w.received(), brainstorm)
	found := w.count("dispatch.paste_found")
	delivered, err := w.d.ReplayAssignment(t.Context(), step, w.item(n), text)
	require.NoError(t, err)
	require.True(t, delivered, "the step is done: its paste is in the session")
	w.eventually("the earlier paste found in the pane", func() bool { return w.count("dispatch.paste_found") == found+1 })
	require.Len(t, w.observed("paste", "graph.assignment"), 1, "nothing pasted again")
	time.Sleep(500 * time.Millisecond) // the fake logs what it reads a little after the receipt
	require.Equal(t, before, strings.Count(w.received(), brainstorm), "the assignment reached the agent once:\n%s", w.received())

	delivered, err = w.d.ReplayAssignment(t.Context(), "another-delivery", w.item(n), text)
	require.NoError(t, err)
	require.True(t, delivered)
	w.eventually("the assignment of another delivery", func() bool { return strings.Count(w.received(), brainstorm) == before+1 })
}
