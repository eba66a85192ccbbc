package daemon_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Activity on an item that is neither live nor armed is dropped by the
// intake's triage, before the dispatcher's dedup records: an authorized
// comment on an unlabeled issue changes nothing (no session, no paste,
// dispatch.dropped spawn-policy); once the issue is labeled the item
// spawns as usual and a later comment reaches the session once.
func TestUnarmedActivityIsDroppedAtTriage(t *testing.T) {
	w := newWorld(t, nil)
	is, err := w.sim.OpenIssue(repoFull, human, "Add a widget", "Please add a widget.")
	require.NoError(t, err)
	_, err = w.sim.Comment(repoFull, is.Number, human, "any news on the widget?")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 0, w.spawns())
	reasons := map[string]int{}
	for _, o := range w.observed("event", "dispatch.dropped") {
		r, _ := o.Fields["reason"].(string)
		reasons[r]++
	}
	require.Equal(t, 2, reasons["spawn-policy"], "the opened issue and the comment: %v\n%s", reasons, w.eventNames())
	require.Zero(t, w.count("dispatch.handled"))

	require.NoError(t, w.sim.AddLabel(repoFull, is.Number, human, label))
	w.eventually("the spawn", func() bool { return w.spawns() == 1 })
	w.waitIdle()
	_, err = w.sim.Comment(repoFull, is.Number, human, "please also consider gizmos")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 1, strings.Count(w.received(), "please also consider gizmos"))
	require.NotContains(t, w.received(), "any news on the widget?")
}
