package ingress

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The repository pass finds what no webhook brought on an issue nothing
// arms: its opening, a label and an authorized control command, in the
// order they happened and routed as their webhooks (the stranger's comment
// is dropped as unauthorized); a Sink that is down keeps them for the next
// cycle; nothing is offered twice; and a label whose webhook was delivered
// is a duplicate here.
func TestRepositoryPassBringsWhatNoWebhookDid(t *testing.T) {
	w := newPollWorld(t)
	w.poller.WatchRepository(simRepo, true)
	w.cycle(t) // the first pass records where the repository stands
	require.Empty(t, w.sink.all())

	n := w.gh.open("alice")
	require.NoError(t, w.gh.sim.AddLabel(simRepo, n, "alice", "bug"))
	_, err := w.gh.sim.Comment(simRepo, n, "mallory", "the-loop start")
	require.NoError(t, err)
	_, err = w.gh.sim.Comment(simRepo, n, "alice", "the-loop start")
	require.NoError(t, err)

	w.sink.setDown(true)
	st := w.cycle(t)
	require.Positive(t, st.Failures, "the Sink refused")
	require.Empty(t, w.sink.all())
	w.sink.setDown(false)
	w.cycle(t)
	evs := w.sink.all()
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Event+"."+ev.Action)
		require.Equal(t, SourcePoll, ev.Source)
		require.Equal(t, "github:octo/repo#"+strconv.Itoa(n), ev.WorkItems[0].String())
	}
	require.Equal(t, []string{"issues.opened", "issues.labeled", "issue_comment.created"}, got)
	require.Equal(t, "alice", evs[2].Actor)
	require.NotNil(t, evs[2].Control)
	require.Equal(t, CmdStart, evs[2].Control.Command)
	require.NotEmpty(t, evs[1].ContentKey(), "a label has a content key")

	w.cycle(t)
	require.Len(t, w.sink.all(), 3, "nothing twice")

	// The webhook of a label is delivered; the pass then lists the same
	// change and finds it a duplicate.
	require.NoError(t, w.gh.sim.AddLabel(simRepo, n, "alice", "ready"))
	is, err := w.gh.sim.Issue(simRepo, n)
	require.NoError(t, err)
	body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "ready"},
		"issue":      map[string]any{"number": n, "updated_at": is.UpdatedAt.UTC().Format(time.RFC3339), "labels": []any{}},
		"repository": map[string]any{"full_name": simRepo}, "sender": map[string]any{"login": "alice"}})
	router := w.poller.d.Router
	ev, drop, err := router.Route("issues", "hook-delivery-1", body)
	require.NoError(t, err)
	require.Empty(t, drop)
	require.NoError(t, w.sink.Put(context.Background(), ev))
	router.Kept(ev)
	w.cycle(t)
	require.Len(t, w.sink.all(), 4, "the label once, by its webhook")
}
