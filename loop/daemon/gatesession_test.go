package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/sessions"
)

// gateBound returns the graph.gate_session_bound events for node.
func (w *world) gateBound(node string) []map[string]any {
	var out []map[string]any
	for _, o := range w.observed("transition", "graph.gate_session_bound") {
		if o.Fields["node"] == node {
			out = append(out, o.Fields)
		}
	}
	return out
}

// R4.7 / R7.3: a gate declaring session: inherit is served by the session
// of the node that produced what it reviews — the verdict and the
// producer's next assignment go into it, with real tmux and the Claude
// Code stand-in. R7.4: when that session has died and its conversation
// cannot be resumed, a fresh session seeded with the artifacts serves the
// gate instead, recorded, and the state is rebound to it; nothing blocks.
func TestGateInheritsTheProducersSession(t *testing.T) {
	w := newWorld(t, landlockOnly)
	n := w.openLabeled()
	w.waitIdle()
	producer := w.state(n).Session
	require.NotNil(t, producer, "the spawn bound the session")
	s1 := producer.ID

	_, err := w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(t, err)
	w.waitIdle()
	w.claim(n, "brainstorming", map[string]string{"brainstorm.md": brainstormMD})
	c := w.claim(n, "requirements-definition", map[string]string{"requirements.md": requirementsMD})
	require.Equal(t, "requirements-approval", c.CurrentNode, "claim: %+v", c)

	// Alive: the producer's session serves the gate.
	_, err = w.sim.Comment(repoFull, n, human, "Changes requested: name the CSV dialect.")
	require.NoError(t, err)
	w.waitIdle()
	st := w.state(n)
	require.Equal(t, "requirements-definition", st.CurrentNode)
	require.Equal(t, s1, st.Session.ID, "the gate kept the producer's session bound")
	bound := w.gateBound("requirements-approval")
	require.Len(t, bound, 1)
	require.Equal(t, "inherited", bound[0]["resolution"])
	require.Equal(t, s1, bound[0]["session_id"])
	require.Equal(t, s1, bound[0]["producer_session_id"])
	w.eventually("the verdict and the producer's next assignment in the same session", func() bool {
		got := w.received()
		return strings.Contains(got, "name the CSV dialect") && strings.Count(got, "/the-loop:new-requirement issue-1") >= 2
	})
	require.Equal(t, 1, w.spawns(), "no other conversation was started")

	// Dead, its conversation lost: a fresh session seeded with the
	// artifacts serves the gate, and the state is rebound to it.
	c = w.claim(n, "requirements-definition", map[string]string{"requirements.md": requirementsMD})
	require.Equal(t, "requirements-approval", c.CurrentNode, "claim: %+v", c)
	require.NoError(t, os.RemoveAll(filepath.Join(w.claude, "conversations")))
	w.killHarness(n)
	pasted := len(w.observed("paste", "graph.assignment"))
	_, err = w.sim.Comment(repoFull, n, human, "Approved")
	require.NoError(t, err)
	w.waitIdle()
	st = w.state(n)
	require.Equal(t, "design", st.CurrentNode, "the gate was not blocked by the dead session")
	bound = w.gateBound("requirements-approval")
	require.Len(t, bound, 2)
	require.Equal(t, "fresh-with-artifacts", bound[1]["resolution"])
	require.Equal(t, s1, bound[1]["producer_session_id"])
	s2, _ := bound[1]["session_id"].(string)
	require.NotEmpty(t, s2)
	require.NotEqual(t, s1, s2)
	require.Equal(t, s2, st.Session.ID, "the state is bound to the session that served the gate")
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(t, err)
	rec, err := reg.Get(w.item(n))
	require.NoError(t, err)
	require.Equal(t, s2, rec.SessionID)
	require.Len(t, rec.Fallbacks, 1, "the fallback is recorded")
	require.Equal(t, s1, rec.Fallbacks[0].PreviousSessionID)
	require.Contains(t, rec.Fallbacks[0].Artifacts, filepath.Join("docs", "specs", "issue-1", "requirements.md"))
	w.eventually("the design assignment in the fresh session", func() bool {
		return strings.Contains(w.received(), "/the-loop:create-design issue-1")
	})
	require.Equal(t, 2, w.spawns())
	// The session was back before the gate moved: design's entry chain
	// pasted its assignment into it (into a dead session it would have
	// been skipped).
	require.Len(t, w.observed("paste", "graph.assignment"), pasted+1)
}
