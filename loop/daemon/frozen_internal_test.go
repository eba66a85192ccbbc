package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/workitem"
)

// loopd keeps its own copy of the phase selection it records, under the
// state root (the portable record's graph section); an agent that edits the
// selection in the checkout's graph-state.json — skipping a phase, changing
// the PR-session mode — is found out: loopd refuses the edited decision
// (the gate blocks, naming loopd's copy) and reads the PR-session mode from
// its copy. No decision-signing key is needed for this.
func TestFrozenSelectionCopyWinsOverTheCheckout(t *testing.T) {
	repo := t.TempDir()
	writeTestFile(t, repo, ".the-loop/harness-config.yaml", "version: \"0.2.0\"\nticketing:\n  github: {owner: acme, repo: widgets}\n")
	writeTestFile(t, repo, "docs/specs/issue-42/execution-log.md", "# Execution log\n")
	stateRoot := t.TempDir()
	clock := graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))
	store := ingress.NewPortableStore(stateRoot, clock)
	ctl := &controlStore{ps: store}
	var mu sync.Mutex
	var events []string
	record := func(name string, _ graph.Level, fields ...graph.Field) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, name)
	}
	tickets := graphtest.NewTickets()
	ref := "github:acme/widgets#42"
	rt, err := loop.Open(repo, loop.Options{Integrations: tickets, AuthorizedUsers: []string{"dana"}, Clock: clock,
		DecisionSigner: frozenSigner{store: store, record: record}, DecisionVerifier: frozenVerifier{store: store}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-42")
	require.NoError(t, err)
	step, err := rt.Advance(ctx, "issue-42", &graph.Event{ID: "d1", Comments: []graph.Comment{tickets.Comment(ref, "dana", "the-loop execute\n- [ ] brainstorming")}})
	require.NoError(t, err)
	require.Equal(t, "requirements-definition", step.CurrentNode)
	require.Equal(t, []string{"graph.frozen"}, events)

	item, err := workitem.Parse(ref)
	require.NoError(t, err)
	trusted, err := store.FrozenGraph(item)
	require.NoError(t, err)
	require.NotNil(t, trusted, "loopd keeps its copy under the state root")
	require.True(t, strings.HasPrefix(store.Path(item), stateRoot), "outside the checkout")
	statePath := filepath.Join(repo, "docs/specs/issue-42", loop.StateFileName)
	st := readState(t, statePath)
	d, _ := st.Decisions.Get("phase-selection")
	require.JSONEq(t, string(trusted), string(d.Graph))
	recordedMode := ctl.frozenSessionPerPr(item)

	rep, err := rt.Status(ctx, "issue-42", true)
	require.NoError(t, err)
	nr, _ := rep.Node("phase-selection")
	require.Equal(t, graph.StatusPass, nr.Status, "%+v", nr)

	// The agent skips design and opts for every PR its own session, in the
	// checkout's copy, consistently.
	var frozen map[string]any
	require.NoError(t, json.Unmarshal(d.Graph, &frozen))
	for _, n := range frozen["nodes"].([]any) {
		if n.(map[string]any)["id"] == "design" {
			n.(map[string]any)["skipped"] = true
		}
	}
	frozen["sessionPerPr"] = loop.SessionPerPrAlways
	d.Graph, _ = json.Marshal(frozen)
	d.Skips = append(d.Skips, "design")
	d.SessionPerPr = loop.SessionPerPrAlways
	st.Decisions.Set("phase-selection", d)
	writeState(t, statePath, st)

	rep, err = rt.Status(ctx, "issue-42", true)
	require.NoError(t, err)
	nr, _ = rep.Node("phase-selection")
	require.Equal(t, graph.StatusBlock, nr.Status, "the edited selection does not count: %+v", nr)
	msgs := strings.Join(nr.Messages, "\n")
	require.Contains(t, msgs, "differs from the recorder's own copy")
	require.Contains(t, msgs, store.Path(item), "the message names loopd's copy")
	require.Equal(t, recordedMode, ctl.frozenSessionPerPr(item), "loopd reads the PR-session mode from its copy")

	// Other gates' decisions carry no selection: the copy does not judge
	// them.
	other := graph.DecisionSubject{WorkItem: "issue-42", Ref: ref, Loop: "pdlc-work-item-loop", Gate: "requirements-approval"}
	require.NoError(t, frozenVerifier{store: store}.VerifyDecision(ctx, other, nil, graph.Decision{Outcome: "approved", By: "@dana"}))
	// Stripping the frozen graph from the selection does not escape it.
	sel := graph.DecisionSubject{WorkItem: "issue-42", Ref: ref, Loop: "pdlc-work-item-loop", Gate: "phase-selection"}
	require.ErrorIs(t, frozenVerifier{store: store}.VerifyDecision(ctx, sel, nil, graph.Decision{Via: "reply"}), graph.ErrDecisionAltered)

	// Putting the selection back as recorded makes it count again.
	d.Graph, d.Skips, d.SessionPerPr = trusted, d.Skips[:len(d.Skips)-1], recordedMode
	st.Decisions.Set("phase-selection", d)
	writeState(t, statePath, st)
	rep, err = rt.Status(ctx, "issue-42", true)
	require.NoError(t, err)
	nr, _ = rep.Node("phase-selection")
	require.Equal(t, graph.StatusPass, nr.Status, "%+v", nr)
}

func TestFrozenDiffNamesTheField(t *testing.T) {
	frozen := json.RawMessage(`{"loop":"l","workItem":"issue-1","surface":"work-item","sessionPerPr":"never","nodes":[{"id":"a","skipped":true,"optIn":false},{"id":"b","skipped":false,"optIn":true},{"id":"c","skipped":true,"optIn":true}]}`)
	ok := graph.Decision{Graph: frozen, Surface: "work-item", SessionPerPr: "never", Skips: []string{"a"}, OptIns: []string{"b"}}
	require.Empty(t, frozenDiff(frozen, ok))
	for what, d := range map[string]graph.Decision{
		"another frozen graph":            {Graph: json.RawMessage(`{"loop":"l"}`)},
		"another surface":                 {Graph: frozen, Surface: "pull-request", SessionPerPr: "never"},
		"another sessionPerPr":            {Graph: frozen, Surface: "work-item", SessionPerPr: "always"},
		"skips the frozen graph does not": {Graph: frozen, Surface: "work-item", SessionPerPr: "never", Skips: []string{"b"}, OptIns: []string{"b"}},
		"other opt-ins":                   {Graph: frozen, Surface: "work-item", SessionPerPr: "never", OptIns: []string{"b", "c"}},
	} {
		require.Equal(t, what, frozenDiff(frozen, d))
	}
}

func writeTestFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func readState(t *testing.T, path string) *graph.State {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var st graph.State
	require.NoError(t, json.Unmarshal(b, &st))
	return &st
}

func writeState(t *testing.T, path string, st *graph.State) {
	t.Helper()
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
