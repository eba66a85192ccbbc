package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// recomputedAt is a recompute of pdlc-work-item-loop standing at cur: the
// nodes before it pass (brainstorming and design-critic-review skipped),
// cur has status st with msgs.
func recomputedAt(t *testing.T, cur string, st graph.Status, msgs ...string) *recomputed {
	t.Helper()
	g, err := loop.ShippedGraph(loop.WorkItemLoop)
	require.NoError(t, err)
	rep := &graph.Report{CurrentNode: cur}
	reached := true
	for _, n := range g.Nodes() {
		nr := graph.NodeReport{Node: n.ID, Status: graph.StatusPass, Outcome: "pass", Messages: []string{}}
		switch {
		case n.ID == cur:
			nr.Status, nr.Outcome, nr.Messages, reached = st, "", msgs, false
		case !reached:
			nr.Status = graph.StatusBlock
		case n.ID == "brainstorming" || n.ID == "design-critic-review":
			nr.Status, nr.Outcome = graph.StatusSkip, "skipped"
		}
		rep.Nodes = append(rep.Nodes, nr)
	}
	n, ok := g.Node(cur)
	require.True(t, ok)
	return &recomputed{g: g, rep: rep, cur: n}
}

// A claim is weighed against the recompute: borne out, refused with what
// the recompute says, a block verified by it, or a block only the claim
// says (the node was fixed before loopd looked).
func TestWeighAClaimAgainstTheRecompute(t *testing.T) {
	const missing = "required section is missing: Task list (docs/specs/issue-1/tasks.md)"
	tests := []struct {
		name    string
		rc      *recomputed
		claim   loop.Claim
		prev    observedLoop
		refused string   // "" borne out; else a part of the reason
		events  []string // the claim's own lines
		fields  map[string]any
	}{
		{"a pass behind the recompute", recomputedAt(t, "design-approval", graph.StatusWait), loop.Claim{Node: "test-planning", Status: loop.ClaimPassed, To: "design-approval"}, observedLoop{}, "", nil, nil},
		{"a pass past a gate nobody decided", recomputedAt(t, "design-approval", graph.StatusBlock, "the decision of design-approval carries no signature"),
			loop.Claim{Node: "tasks-breakdown", Status: loop.ClaimPassed, To: "implementation"}, observedLoop{}, "has not reached: the work item is at design-approval (block): the decision of design-approval carries no signature", nil, nil},
		{"a claim of a waiting gate", recomputedAt(t, "design-approval", graph.StatusWait), loop.Claim{Node: "design-approval", Status: loop.ClaimPassed}, observedLoop{}, "recompute has it wait", nil, nil},
		{"an unknown node", recomputedAt(t, "design", graph.StatusBlock), loop.Claim{Node: "deploy-to-prod", Status: loop.ClaimPassed}, observedLoop{}, "not in pdlc-work-item-loop", nil, nil},
		{"a block the recompute confirms", recomputedAt(t, "tasks-breakdown", graph.StatusBlock, missing), loop.Claim{Node: "tasks-breakdown", Status: loop.ClaimBlocked, Hook: "validate-artifacts"}, observedLoop{},
			"", []string{graph.EventBlocked}, map[string]any{"verified": true, "message": missing, "hook": "validate-artifacts"}},
		{"a pass the recompute blocks", recomputedAt(t, "tasks-breakdown", graph.StatusBlock, missing), loop.Claim{Node: "tasks-breakdown", Status: loop.ClaimPassed, To: "implementation"}, observedLoop{},
			"recompute blocks it", []string{graph.EventBlocked}, map[string]any{"verified": true}},
		{"the same block twice", recomputedAt(t, "tasks-breakdown", graph.StatusBlock, missing), loop.Claim{Node: "tasks-breakdown", Status: loop.ClaimBlocked}, observedLoop{LastBlock: map[string]string{"tasks-breakdown": missing}},
			"", []string{graph.EventBlocked, graph.EventEscalated}, nil},
		{"a block fixed before loopd looked", recomputedAt(t, "implementation", graph.StatusBlock), loop.Claim{Node: "tasks-breakdown", Status: loop.ClaimBlocked, Hook: "validate-artifacts"}, observedLoop{},
			"", []string{graph.EventBlocked}, map[string]any{"verified": false, "hook": "validate-artifacts"}},
		{"a block naming a hook the node has not", recomputedAt(t, "implementation", graph.StatusBlock), loop.Claim{Node: "tasks-breakdown", Status: loop.ClaimBlocked, Hook: "classify-feedback"}, observedLoop{},
			"not a hook of its exit chain", nil, nil},
		{"the walk completed", recomputedAt(t, "complete", graph.StatusPass), loop.Claim{Node: "complete", Status: loop.ClaimCompleted}, observedLoop{}, "", []string{graph.EventCompleted}, nil},
		{"the walk completed, said twice", recomputedAt(t, "complete", graph.StatusPass), loop.Claim{Node: "complete", Status: loop.ClaimCompleted}, observedLoop{Completed: true}, "", nil, nil},
	}
	l := &graphLink{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := loop.Intent{ID: "s-1", Session: "s", WorkItem: "github:o/r#1", Op: loop.IntentClaim}
			refused, evs := l.weigh(in, tc.claim, tc.rc, tc.prev)
			if tc.refused == "" {
				require.Empty(t, refused)
			} else {
				require.Contains(t, refused, tc.refused)
			}
			var names []string
			for _, e := range evs {
				names = append(names, e.name)
			}
			require.Equal(t, tc.events, names)
			for k, want := range tc.fields {
				got := ""
				var val any
				for _, f := range evs[0].fields {
					if f.Key == k {
						val, got = f.Value, "set"
					}
				}
				require.Equal(t, "set", got, k)
				require.Equal(t, want, val, k)
			}
		})
	}
}

// The ticket effects follow the recompute: the phase label of a newly
// current node (not again for a node of the same phase), a gate's review
// request, nothing when nothing moved.
func TestDeriveTheTicketEffects(t *testing.T) {
	tests := []struct {
		name     string
		rc       *recomputed
		effected string
		want     []string
	}{
		{"entered a gate of a new phase", recomputedAt(t, "design-approval", graph.StatusWait), "design", []string{"label loop:test-planning", "review request for design-approval"}},
		{"entered a gate of the same phase", recomputedAt(t, "design-approval", graph.StatusWait), "test-planning", []string{"review request for design-approval"}},
		{"nothing moved", recomputedAt(t, "design-approval", graph.StatusWait), "design-approval", nil},
		{"an agent node", recomputedAt(t, "implementation", graph.StatusBlock), "design-approval", []string{"label loop:implementation"}},
		{"a node without a phase label", recomputedAt(t, "critic-review", graph.StatusBlock), "self-review", nil},
	}
	l := &graphLink{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range l.derive("github:o/r#1", "issue-1", tc.rc, observedLoop{Effected: tc.effected}, nil) {
				got = append(got, e.Summary)
				require.Equal(t, "github:o/r#1", e.Args["ref"])
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// loopd reads the checkout's files with its own rights: a link out of the
// checkout, or a hard link, in a spec directory refuses the recompute.
func TestRefuseLinksOut(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "decision-signing.key")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o600))
	tests := []struct {
		name  string
		plant func(t *testing.T, root, spec string)
		ok    bool
	}{
		{"plain files", func(t *testing.T, root, spec string) {}, true},
		{"a link inside the checkout", func(t *testing.T, root, spec string) {
			require.NoError(t, os.Symlink(filepath.Join(spec, "design.md"), filepath.Join(spec, "alias.md")))
		}, true},
		{"a link out of the checkout", func(t *testing.T, root, spec string) {
			require.NoError(t, os.Symlink(outside, filepath.Join(spec, "tasks.md")))
		}, false},
		{"a directory link out of the checkout", func(t *testing.T, root, spec string) {
			require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(spec, "pr-loops")))
		}, false},
		{"a hard link", func(t *testing.T, root, spec string) {
			require.NoError(t, os.Link(filepath.Join(spec, "design.md"), filepath.Join(root, "elsewhere.md")))
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			spec := filepath.Join(root, "docs", "specs", "issue-1")
			require.NoError(t, os.MkdirAll(spec, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(spec, "design.md"), []byte("# Design\n"), 0o644))
			tc.plant(t, root, spec)
			err := refuseLinksOut(root, spec)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, errLinkOut)
			}
		})
	}
	require.NoError(t, refuseLinksOut(t.TempDir(), filepath.Join(t.TempDir(), "missing")), "no spec directory yet")
}

// A session's claim is about its work item's own loop, or a pull request's
// inner loop (rooted at the work item's checkout); anything else names no
// loop of the session.
func TestLoopOfAClaim(t *testing.T) {
	reg, err := sessions.OpenRegistry(t.TempDir())
	require.NoError(t, err)
	ref := func(s string) workitem.Ref { r, err := workitem.Parse(s); require.NoError(t, err); return r }
	now := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	require.NoError(t, reg.Put(ctx, sessions.Record{Item: ref("github:o/r#1"), Harness: "claude", SessionID: "s-item", TmuxName: sessions.TmuxName(ref("github:o/r#1")), Cwd: "/w/1",
		Status: sessions.StatusActive, Created: now, PullRequests: []sessions.PRLink{{PR: ref("github:o/r#12"), Linked: now}}}))
	require.NoError(t, reg.Put(ctx, sessions.Record{Item: ref("github:o/r#13"), Parent: ref("github:o/r#1"), Harness: "claude", SessionID: "s-pr",
		TmuxName: sessions.TmuxName(ref("github:o/r#13")), Cwd: "/w/13", Status: sessions.StatusActive, Created: now}))
	l := &graphLink{reg: reg}
	tests := []struct {
		session, ref  string
		item, pr, cwd string
		err           bool
	}{
		{"s-item", "github:o/r#1", "github:o/r#1", "", "/w/1", false},
		{"s-item", "github:o/r#12", "github:o/r#1", "github:o/r#12", "/w/1", false},
		{"s-pr", "github:o/r#13", "github:o/r#1", "github:o/r#13", "/w/1", false},
		{"s-pr", "github:o/r#1", "github:o/r#1", "", "/w/1", false},
		{"s-item", "github:o/r#2", "", "", "", true},
		{"s-stranger", "github:o/r#2", "", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.session+" "+tc.ref, func(t *testing.T) {
			item, pr, cwd, err := l.loopOf(tc.session, ref(tc.ref))
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.item, item.String())
			if tc.pr == "" {
				require.True(t, pr.IsZero())
			} else {
				require.Equal(t, tc.pr, pr.String())
			}
			require.Equal(t, tc.cwd, cwd)
		})
	}
}

// A claim judged after loopd's runtime decided a gate but before the
// step's rebase sees the gate passed: the gate's graph.advanced is the
// runtime's own line, so the recompute logs the claim's transitions and
// not the gate's a second time.
func TestCommitObservedLeavesAGateToTheRuntime(t *testing.T) {
	var lines []string
	l := &graphLink{observed: map[string]observedLoop{}, record: func(name string, _ graph.Level, fs ...graph.Field) {
		for _, f := range fs {
			if f.Key == "node" {
				lines = append(lines, name+" "+f.Value.(string))
			}
		}
	}}
	before := recomputedAt(t, "design-approval", graph.StatusWait)
	l.commitObserved("k", "github:o/r#1", before, nil, "", "", "")
	lines = nil
	// dana approved design-approval (the runtime logged it); the agent's
	// claim of tasks-breakdown is judged before the rebase.
	l.commitObserved("k", "github:o/r#1", recomputedAt(t, "implementation", graph.StatusBlock), nil, "tasks-breakdown", "i-1", "")
	require.Equal(t, []string{graph.EventAdvanced + " tasks-breakdown"}, lines)
}

// TestSaveObservedWritesOnlyAChange: the record of what loopd last
// recomputed is written (temp file, fsync, rename) when it changes, not on
// every paste of an item that stays where it was; a record that could not
// be written is written by the next save even if it says the same.
func TestSaveObservedWritesOnlyAChange(t *testing.T) {
	dir := t.TempDir()
	l := &graphLink{observed: map[string]observedLoop{}, observedDir: dir}
	path := filepath.Join(dir, "k.json")
	ino := func() uint64 {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	o := observedLoop{Current: "implementation", Passed: []string{"design"}, LastBlock: map[string]string{}}
	require.NoError(t, l.saveObserved("k", o))
	first := ino()
	// The same record, as a recompute builds it (an empty map, not nil).
	require.NoError(t, l.saveObserved("k", observedLoop{Current: "implementation", Passed: []string{"design"}}))
	require.Equal(t, first, ino(), "an unchanged record is not rewritten")
	// A fresh link reads the record from disk and still writes nothing.
	l2 := &graphLink{observed: map[string]observedLoop{}, observedDir: dir}
	require.True(t, l2.loadObserved("k").equal(o))
	require.NoError(t, l2.saveObserved("k", o))
	require.Equal(t, first, ino())
	// A change is written.
	o.LastBlock = map[string]string{"implementation": "1 task unticked"}
	require.NoError(t, l.saveObserved("k", o))
	require.NotEqual(t, first, ino(), "a changed record is written")
	var onDisk observedLoop
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &onDisk))
	require.True(t, onDisk.equal(o))

	// A write that failed is retried by the next save of the same record.
	l.observedDir = filepath.Join(path, "not-a-dir") // under a file: cannot be created
	o.Current = "review"
	require.Error(t, l.saveObserved("k", o))
	l.observedDir = dir
	require.NoError(t, l.saveObserved("k", o))
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &onDisk))
	require.Equal(t, "review", onDisk.Current, "the record that failed is written by the next save")
}
