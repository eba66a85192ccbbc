package loop_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// A scrubbing store writes a state holding no credential byte for byte as
// an unscrubbing one does, and a state that holds one cleaned, still
// readable.
func TestStoreScrub(t *testing.T) {
	ctx := context.Background()
	scrub := loop.CredentialScrub(func(k string) (string, bool) {
		if k == "GH_TOKEN" {
			return "tok-0123456789-secret", true
		}
		return "", false
	})
	plain, clean := t.TempDir(), t.TempDir()
	st := &graph.State{WorkItem: "issue-1", CurrentNode: "design", Forced: []graph.ForceRecord{{To: "design", Reason: "agreed — on the call"}}}
	require.NoError(t, loop.NewStore(plain, "").Save(ctx, "issue-1", st))
	require.NoError(t, loop.NewStore(clean, "", loop.WithStoreScrub(scrub)).Save(ctx, "issue-1", st))
	a, err := os.ReadFile(plain + "/docs/specs/issue-1/graph-state.json")
	require.NoError(t, err)
	b, err := os.ReadFile(clean + "/docs/specs/issue-1/graph-state.json")
	require.NoError(t, err)
	require.Equal(t, string(a), string(b))

	st.Forced[0].Reason = "token tok-0123456789-secret, and xoxb-1234567890-abcdefghij"
	require.NoError(t, loop.NewStore(clean, "", loop.WithStoreScrub(scrub)).Save(ctx, "issue-1", st))
	got, err := loop.NewStore(clean, "").Load(ctx, "issue-1")
	require.NoError(t, err)
	require.Equal(t, "token [redacted], and [redacted]", got.Forced[0].Reason)
	require.Equal(t, "design", got.CurrentNode)
}
