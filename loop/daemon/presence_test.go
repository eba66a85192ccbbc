package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/workitem"
)

// A restart's reconcile pass hands the queue a synthetic "labeled"
// presence event for an item it sees. Nobody made it: it never reaches the
// live session (no paste) and never reacts on the ticket (issue 21).
func TestPresenceEventNeverReachesTheSessionNorReacts(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.eventually("the spawn", func() bool { return w.spawns() == 1 })
	w.waitIdle()
	// The spawn's reactions (started, completed) are posted in the background.
	w.eventually("the spawn's reactions", func() bool { return w.count("reaction.added")+w.count("reaction.failed") >= 2 })
	pastes := len(w.observed("paste", ""))
	reactions := w.count("reaction.added") + w.count("reaction.failed")

	ref, err := workitem.Parse(fmt.Sprintf("github:%s#%d", repoFull, n))
	require.NoError(t, err)
	payload, _ := json.Marshal(map[string]any{"action": "labeled", "repository": map[string]any{"full_name": repoFull},
		"issue": map[string]any{"number": n, "title": "Add a widget"}})
	ev := &ingress.Event{Event: "issues", Action: "labeled", DeliveryID: ingress.PresenceDeliveryPrefix + ref.String() + "-restart",
		Repo: repoFull, WorkItems: []workitem.Ref{ref}, Actor: human, Labeled: true, Payload: payload,
		Source: ingress.SourcePoll, ReceivedAt: time.Now().UTC()}
	require.True(t, ingress.IsPresence(ev))
	require.NoError(t, w.d.Sink().Put(context.Background(), ev))
	w.eventually("the presence event dropped", func() bool {
		return strings.Contains(w.eventNames(), "presence-of-live-session")
	})
	w.waitIdle()
	require.Len(t, w.observed("paste", ""), pastes, "nothing is pasted for a presence event")
	require.Equal(t, reactions, w.count("reaction.added")+w.count("reaction.failed"), "no reaction for a presence event")
	require.NotContains(t, w.received(), ingress.PresenceDeliveryPrefix, "the session never saw the synthetic event")
}
