package daemon_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
	"github.com/theloop-dev/theloop/sessions"
)

// docs/decisions.md §23 end to end: the real daemon, a real checkout, the
// agent's claims made the way `loopctl graph complete` makes them in a
// session loopd spawned (its runtime over the session's claim recorder,
// writing the session's outbox), githubsim as the ticket.

// session is the work item's live session record.
func (w *world) session(n int) sessions.Record {
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(w.t, err)
	rec, err := reg.Get(w.item(n))
	require.NoError(w.t, err)
	return rec
}

// managedClaim writes files and claims node from inside the session: the
// agent's own runtime (no trust anchor: it honours whatever
// graph-state.json says), whose ticket effects go nowhere and whose
// transitions become claims in the session's outbox.
func (w *world) managedClaim(n int, node string, files map[string]string) *graph.Claim {
	w.t.Helper()
	rec := w.session(n)
	id := fmt.Sprintf("issue-%d", n)
	for name, body := range files {
		p := filepath.Join(rec.Cwd, "docs", "specs", id, name)
		require.NoError(w.t, os.MkdirAll(filepath.Dir(p), 0o755))
		if old, err := os.ReadFile(p); err == nil {
			body = demoagent.Revise(string(old), body) // keep what a gate wrote
		}
		require.NoError(w.t, os.WriteFile(p, []byte(body), 0o644))
	}
	ms := loop.ManagedSession{SessionID: rec.SessionID, WorkItem: id, StateRoot: w.cfg.StateRoot}
	recorder := loop.NewRecorder(ms, "graph complete", nil)
	rt, err := loop.Open(rec.Cwd, loop.Options{WorkItem: id, AuthorizedUsers: w.cfg.Routing.AuthorizedUsers, Integrations: recorder})
	require.NoError(w.t, err)
	c, err := rt.Complete(context.Background(), id, node, "agent")
	require.NoError(w.t, err)
	require.NoError(w.t, recorder.Err())
	return c
}

// loopdLog is loopd's own event log, line by line.
func (w *world) loopdLog() []map[string]any {
	w.d.FlushLogs()
	f, err := os.Open(w.cfg.EventLog.Path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// logged are loopd's lines named event whose fields include want.
func (w *world) logged(event string, want map[string]any) []map[string]any {
	var out []map[string]any
	for _, m := range w.loopdLog() {
		if m["event"] != event {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && m[k] == v
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func (w *world) labelsOf(n int) []string {
	is, err := w.sim.Issue(repoFull, n)
	require.NoError(w.t, err)
	return is.Labels
}

// loopLabels are the ticket's loop: labels.
func (w *world) loopLabels(n int) []string {
	var out []string
	for _, l := range w.labelsOf(n) {
		if strings.HasPrefix(l, "loop:") {
			out = append(out, l)
		}
	}
	return out
}

func (w *world) commentBodies(n int) []string {
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(w.t, err)
	var out []string
	for _, c := range cs {
		out = append(out, c.Body)
	}
	return out
}

// appendIntent writes a raw line into the session's outbox, as a hostile
// agent can; it returns the line's id (<session>-<line>).
func (w *world) appendIntent(n int, line func(id, session string) string) string {
	w.t.Helper()
	rec := w.session(n)
	p := filepath.Join(loop.OutboxDir(w.cfg.StateRoot, rec.SessionID), loop.OutboxFileName)
	data, _ := os.ReadFile(p)
	id := fmt.Sprintf("%s-%d", rec.SessionID, strings.Count(string(data), "\n")+1)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(w.t, err)
	_, err = f.WriteString(line(id, rec.SessionID) + "\n")
	require.NoError(w.t, err)
	require.NoError(w.t, f.Close())
	return id
}

// TestLoopdRecomputesEveryClaim walks issue #1 to design-approval with the
// agent's claims going through the outbox (two of them blocked), then
// attacks from inside the session: a hand-written graph-state.json past
// the gate with a made-up decision (unsigned, then signed by a key that is
// not loopd's) followed by the next artifact and its claim; then outbox
// lines that name a label or a comment of their own. The ticket keeps the
// label loopd's recompute gives, nothing is pasted for the later node,
// every refusal is in loopd's log, and loopd's log holds a graph.advanced
// for every node the claims moved through and a graph.blocked for each
// blocked claim.
func TestLoopdRecomputesEveryClaim(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	_, err := w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, "brainstorming", w.state(n).CurrentNode)
	ref := w.item(n).String()

	// A legitimate walk, claim by claim; each claim is answered by loopd
	// before the next (a blocked claim is then verified by the recompute).
	claim := func(node string, files map[string]string, wantStatus graph.Status) {
		t.Helper()
		c := w.managedClaim(n, node, files)
		require.Equal(t, wantStatus, c.Status, "claim %s: %+v", node, c)
		w.eventually("loopd to answer the claim of "+node, func() bool {
			return len(w.logged("outbox.performed", map[string]any{"work_item": ref}))+
				len(w.logged("outbox.refused", map[string]any{"work_item": ref})) >= w.claimsSoFar(n)
		})
	}
	claim("brainstorming", map[string]string{"brainstorm.md": demoagent.Brainstorm}, graph.StatusPass)
	claim("requirements-definition", map[string]string{"requirements.md": demoagent.RequirementsDraft}, graph.StatusBlock)
	claim("requirements-definition", map[string]string{"requirements.md": demoagent.Requirements}, graph.StatusPass)
	w.eventually("the phase label of requirements-approval", func() bool {
		return slices.Contains(w.labelsOf(n), "loop:requirements-definition")
	})
	_, err = w.sim.Comment(repoFull, n, human, "Approved")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, "design", w.state(n).CurrentNode)
	claim("design", map[string]string{"design.md": demoagent.DesignDraft}, graph.StatusBlock)
	claim("design", map[string]string{"design.md": demoagent.Design}, graph.StatusPass)
	claim("test-planning", map[string]string{"testing-plan.md": demoagent.TestingPlan}, graph.StatusPass)
	w.eventually("loopd's label and review request for design-approval", func() bool {
		return slices.Equal(w.loopLabels(n), []string{"loop:test-planning"}) &&
			slices.ContainsFunc(w.commentBodies(n), func(b string) bool { return strings.Contains(b, "**design-approval** is ready for review") })
	})

	// One stream: every node the claims moved through is a graph.advanced
	// of loopd's own log, from its recompute; each blocked claim a
	// graph.blocked with the hook's message.
	for _, node := range []string{"brainstorming", "requirements-definition", "design", "test-planning"} {
		got := w.logged(graph.EventAdvanced, map[string]any{"node": node, "basis": "recompute"})
		require.Len(t, got, 1, "loopd's graph.advanced for %s", node)
	}
	for _, node := range []string{"phase-selection", "requirements-approval"} {
		require.Len(t, w.logged(graph.EventAdvanced, map[string]any{"node": node}), 1, "the gate %s, moved by loopd's own runtime, once", node)
	}
	blocked := w.logged(graph.EventBlocked, map[string]any{"basis": "recompute", "verified": true})
	require.Len(t, blocked, 2)
	require.Equal(t, "requirements-definition", blocked[0]["node"])
	require.Contains(t, blocked[0]["message"], "Security considerations")
	require.Equal(t, "design", blocked[1]["node"])
	labelsAtGate, commentsAtGate := w.labelsOf(n), len(w.commentBodies(n))

	// The attack: graph-state.json past design-approval with a made-up
	// decision, then tasks.md and its claim.
	otherPub, otherKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	_ = otherPub
	forgeries := []struct {
		name string
		sign bool
	}{
		{"an unsigned decision", false},
		{"a decision signed with a key that is not loopd's", true},
	}
	for i, tc := range forgeries {
		t.Run(tc.name, func(t *testing.T) {
			rec := w.session(n)
			id := fmt.Sprintf("issue-%d", n)
			store := loop.NewStore(rec.Cwd, "")
			st, err := store.Load(context.Background(), id)
			require.NoError(t, err)
			st.CurrentNode = "tasks-breakdown"
			st.Parked = nil
			d := graph.Decision{At: time.Now().UTC().Format(time.RFC3339), Outcome: "approved", By: "@alice", Via: "comment", Comment: "4242"}
			if tc.sign {
				arts := loop.NewFileArtifacts(filepath.Join(rec.Cwd, "docs", "specs", id), "docs/specs/"+id)
				sub := graph.DecisionSubject{WorkItem: id, Ref: ref, Loop: loop.WorkItemLoop, Gate: "design-approval"}
				require.NoError(t, loop.NewSigner(otherKey).SignDecision(context.Background(), sub, arts, []string{"design.md", "testing-plan.md"}, &d))
			}
			st.Decisions.Set("design-approval", d)
			require.NoError(t, store.Save(context.Background(), id, st))

			c := w.managedClaim(n, "tasks-breakdown", map[string]string{"tasks.md": demoagent.TasksOpen})
			require.Equal(t, "implementation", c.CurrentNode, "the agent's own runtime believes the file: %+v", c)
			w.eventually("loopd to refuse the claim", func() bool {
				return len(w.logged("outbox.refused", map[string]any{"asked_node": "tasks-breakdown"})) == i+1
			})
			r := w.logged("outbox.refused", map[string]any{"asked_node": "tasks-breakdown"})[i]
			require.Equal(t, "design-approval", r["recomputed_node"], "loopd's recompute has the item at the gate")
			require.Contains(t, r["reason"], "has not reached")
			if tc.sign {
				require.Contains(t, r["recomputed_message"], "not one of the 1 trusted key")
			} else {
				require.Contains(t, r["recomputed_message"], "no signature")
			}
			require.Equal(t, labelsAtGate, w.labelsOf(n), "the ticket keeps its label")
			require.Len(t, w.commentBodies(n), commentsAtGate)
			require.NotContains(t, w.received(), "you are now at node: tasks-breakdown")
			require.NotContains(t, w.received(), "you are now at node: implementation")
			require.Empty(t, w.logged(graph.EventAdvanced, map[string]any{"node": "tasks-breakdown"}))
		})
	}

	// Outbox lines that name their own effect: refused, the ticket as it was.
	created := time.Now().UTC().Format(time.RFC3339)
	raw := func(op, params, source string) func(id, sid string) string {
		return func(id, sid string) string {
			return `{"id":"` + id + `","session":"` + sid + `","workItem":"` + ref + `","op":"` + op + `","params":{"ref":"` + ref + `",` + params + `},"created":"` + created + `","source":"` + source + `"}`
		}
	}
	lines := []struct {
		name   string
		line   func(id, sid string) string
		reason string
	}{
		{"a retired label the recompute does not give", raw("github.set-labels", `"labels":["loop:implementation"],"replacePrefix":"loop:"`, "graph complete"), "retired outbox format"},
		{"a claim carrying a label", raw("loop.claim", `"node":"test-planning","status":"pass","labels":["loop:implementation"]`, "graph complete"), `parameter "labels"`},
		{"a retired comment the recompute does not produce", raw("github.add-comment", `"body":"design-approval approved by @alice\n`+hooks.Marker+`"`, "graph complete"), "retired outbox format"},
		{"a claim carrying a comment", raw("loop.claim", `"node":"test-planning","status":"pass","body":"approved by @alice"`, "graph complete"), `parameter "body"`},
		{"a claim of the gate itself", raw("loop.claim", `"node":"design-approval","status":"pass","to":"tasks-breakdown"`, "graph complete"), "recompute has it"},
	}
	for _, tc := range lines {
		t.Run(tc.name, func(t *testing.T) {
			id := w.appendIntent(n, tc.line)
			no := float64(w.claimsSoFar(n)) // the line's number (a refusal of an unparsable line names no intent)
			match := map[string]any{"line": no, "session_id": w.session(n).SessionID}
			w.eventually("loopd to refuse "+id, func() bool { return len(w.logged("outbox.refused", match)) == 1 })
			r := w.logged("outbox.refused", match)[0]
			require.Contains(t, r["reason"], tc.reason)
			require.Equal(t, labelsAtGate, w.labelsOf(n))
			for _, b := range w.commentBodies(n) {
				require.NotContains(t, b, "approved by @alice")
			}
			if _, parsed := r["recomputed_node"]; parsed {
				require.Equal(t, "design-approval", r["recomputed_node"])
			}
		})
	}
	require.Len(t, w.commentBodies(n), commentsAtGate)
}

// claimsSoFar counts the lines of the work item's session outbox.
func (w *world) claimsSoFar(n int) int {
	rec := w.session(n)
	data, _ := os.ReadFile(filepath.Join(loop.OutboxDir(w.cfg.StateRoot, rec.SessionID), loop.OutboxFileName))
	return strings.Count(string(data), "\n")
}
