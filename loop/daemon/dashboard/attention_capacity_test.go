package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// capacitySource is a fakeSource that also knows questions and capacity
// refusals.
type capacitySource struct {
	fakeSource
	qs   []Question
	caps []Capacity
}

func (c *capacitySource) Questions(context.Context) ([]Question, error) { return c.qs, nil }
func (c *capacitySource) Capacity(context.Context) ([]Capacity, error)  { return c.caps, nil }

// TestNeedsYouListsCapacityRefusals: an item a cluster node declines for
// capacity is in "needs you" — with the node, its capacity and the fix —
// in age order among the gates and questions; the board's rows label it;
// an item no longer declined is gone.
func TestNeedsYouListsCapacityRefusals(t *testing.T) {
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	src := &capacitySource{
		fakeSource: fakeSource{items: []Item{{Ref: "github:o/r#1", Title: "Gate", Node: "design-approval", State: StateWaiting, Human: true, Since: now.Add(-3 * time.Hour)}}},
		qs:         []Question{{Ref: "github:o/r#3", Text: "Blue or green?", At: now.Add(-time.Hour)}},
		caps:       []Capacity{{Ref: "github:o/r#2", Node: "b", MaxSessions: 4, Since: now.Add(-2 * time.Hour)}},
	}
	got, err := NeedsYou(context.Background(), src, now)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []string{"gate", "capacity", "question"}, []string{got[0].Kind, got[1].Kind, got[2].Kind}, "oldest first")
	require.Equal(t, "github:o/r#2", got[1].Ref)
	require.Equal(t, now.Add(-2*time.Hour), got[1].Since)
	require.Equal(t, 7200.0, got[1].WaitingSeconds)
	require.Contains(t, got[1].Why, "cluster node b is at capacity (service.maxSessions 4)")
	require.Contains(t, got[1].Why, "raise service.maxSessions")

	l := attention(src.items, sourceWaits(context.Background(), src), now)
	require.Equal(t, 3, l.Count)
	require.Equal(t, "no capacity", l.Rows[1].Label)
	require.Equal(t, "2h00m", l.Rows[1].Age)

	src.caps = nil
	got, err = NeedsYou(context.Background(), src, now)
	require.NoError(t, err)
	require.Len(t, got, 2, "taken: no longer listed")
}
