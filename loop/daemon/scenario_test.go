package daemon_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A labeled issue spawns one session whose first message is the spawn
// prompt with the graph context; the graph starts at phase-selection and
// the session is announced on the issue with the tmux attach command.
func TestLabeledIssueSpawnsWithSpawnPromptAndGraphContext(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.eventually("the spawn prompt in the session", func() bool {
		return strings.Contains(w.received(), "Start by running `/the-loop:work-on github:octo/demo#1`")
	})
	got := w.received()
	require.Contains(t, got, "NOT ENTERED YET")
	require.Contains(t, got, "## Interaction: work-item")
	w.eventually("the announcement", func() bool { return len(w.observed("comment", "")) > 0 })
	w.waitIdle()
	require.Equal(t, 1, w.spawns())
	st := w.state(n)
	require.Equal(t, "phase-selection", st.CurrentNode)
	comments, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	var announce string
	for _, c := range comments {
		if strings.Contains(c.Body, "tmux -L "+w.socket+" attach -t loop-github-octo-demo-1") {
			announce = c.Body
		}
	}
	require.NotEmpty(t, announce, "announce comment with the attach command")
	require.Contains(t, announce, "<!-- the-loop:agent-comment -->")
	t.Log(w.eventNames())
}
