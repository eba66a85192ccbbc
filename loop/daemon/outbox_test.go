package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// A session's intents may land on its work item, the work item a PR's
// session serves, and the PRs linked to it; a session id from before a
// fresh respawn still names its work item; an unknown one names nothing.
func TestSessionWorkItems(t *testing.T) {
	reg, err := sessions.OpenRegistry(t.TempDir())
	require.NoError(t, err)
	ref := func(s string) workitem.Ref { r, err := workitem.Parse(s); require.NoError(t, err); return r }
	now := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	require.NoError(t, reg.Put(ctx, sessions.Record{Item: ref("github:o/r#1"), Harness: "claude", SessionID: "s-new", TmuxName: sessions.TmuxName(ref("github:o/r#1")), Cwd: "/w/1",
		Status: sessions.StatusActive, Created: now, Fallbacks: []sessions.Fallback{{At: now, PreviousSessionID: "s-old", Reason: "resume failed"}},
		PullRequests: []sessions.PRLink{{PR: ref("github:o/r#12"), Linked: now}}}))
	require.NoError(t, reg.Put(ctx, sessions.Record{Item: ref("github:o/r#12"), Parent: ref("github:o/r#1"), Harness: "claude", SessionID: "s-pr",
		TmuxName: sessions.TmuxName(ref("github:o/r#12")), Cwd: "/w/12", Status: sessions.StatusActive, Created: now}))
	tests := []struct {
		sid  string
		want []string
	}{
		{"s-new", []string{"github:o/r#1", "github:o/r#12"}},
		{"s-old", []string{"github:o/r#1", "github:o/r#12"}},
		{"s-pr", []string{"github:o/r#12", "github:o/r#1"}},
		{"s-stranger", nil},
	}
	for _, tc := range tests {
		t.Run(tc.sid, func(t *testing.T) {
			refs, err := sessionWorkItems(reg)(tc.sid)
			if tc.want == nil {
				require.ErrorIs(t, err, sessions.ErrNoRecord)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, r := range refs {
				got = append(got, r.String())
			}
			require.Equal(t, tc.want, got)
		})
	}
}
