package stopgate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

func TestParseMaxAttempts(t *testing.T) {
	for in, want := range map[string]int{"": 3, "3": 3, " 5 ": 5, "1": 1, "0": 1, "-2": 1, "x": 3, "2.5": 3, "99999999999999999999": 3} {
		require.Equal(t, want, ParseMaxAttempts(in), "%q", in)
	}
}

func TestCounters(t *testing.T) {
	c := Counters{Dir: filepath.Join(t.TempDir(), "gate")}
	require.Equal(t, 0, c.Get("/r", "issue-1", "design"), "missing counter")
	require.NoError(t, c.Reset("/r", "issue-1"), "resetting with no directory")

	for i := 1; i <= 3; i++ {
		n, err := c.Increment("/r", "issue-1", "design")
		require.NoError(t, err)
		require.Equal(t, i, n)
	}
	// Other items and repositories keep their own counts.
	n, err := c.Increment("/r", "issue-2", "design")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = c.Increment("/other", "issue-1", "design")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// Blocking at another node starts afresh and forgets the old node.
	n, err = c.Increment("/r", "issue-1", "test-planning")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 0, c.Get("/r", "issue-1", "design"))
	n, err = c.Increment("/r", "issue-1", "design")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, c.Get("/r", "issue-2", "design"))

	// Corrupt → 0.
	for _, bad := range []string{"-7 design", "many design", "3", "", "\x00\xff design"} {
		require.NoError(t, os.WriteFile(c.path("/r", "issue-1"), []byte(bad), 0o600))
		require.Equal(t, 0, c.Get("/r", "issue-1", "design"), "%q", bad)
	}
	n, err = c.Increment("/r", "issue-1", "design")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.NoError(t, c.Reset("/r", "issue-1"))
	require.Equal(t, 0, c.Get("/r", "issue-1", "design"))
	require.Equal(t, 1, c.Get("/r", "issue-2", "design"), "reset touches only its work item")
	entries, err := os.ReadDir(c.Dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "one file per work item, no temporary files left behind")
}

func report(current string, status graph.Status, msgs ...string) *graph.Report {
	return &graph.Report{WorkItem: "issue-9", CurrentNode: current, Nodes: []graph.NodeReport{
		{Node: "phase-selection", Status: "pass"},
		{Node: current, Status: status, Messages: msgs},
		{Node: "later", Status: "block", Messages: []string{"later work"}},
	}}
}

func options(t *testing.T, check func(ctx context.Context, root, id string) (*graph.Report, error)) (Options, string) {
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, ".git"), 0o755))
	env := map[string]string{WorkItemEnv: "issue-9"}
	return Options{
		Stdin:    strings.NewReader(fmt.Sprintf(`{"cwd":%q}`, root)),
		Getenv:   func(k string) string { return env[k] },
		Getwd:    func() (string, error) { return "", errors.New("no cwd in tests") },
		Counters: Counters{Dir: filepath.Join(t.TempDir(), "gate")},
		Lookup:   func(string) (Session, error) { t.Fatal("unexpected registry lookup"); return Session{}, nil },
		Check:    check,
	}, root
}

func TestEvaluate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		check  func(ctx context.Context, root, id string) (*graph.Report, error)
		block  bool
		reason string
		note   string
	}{
		{
			name: "block at the current node",
			check: func(context.Context, string, string) (*graph.Report, error) {
				return report("design", "block", "missing: x (a.md)"), nil
			},
			block:  true,
			reason: "theloop: issue-9 is at node `design`, which is not done:\n  · missing: x (a.md)\n\nFix these, then run `loopctl graph complete issue-9`. (attempt 1/3)",
		},
		{
			name:   "block without messages",
			check:  func(context.Context, string, string) (*graph.Report, error) { return report("design", "block"), nil },
			block:  true,
			reason: "theloop: issue-9 is at node `design`, which is not done (its exit chain blocks; `loopctl check issue-9 --recompute` says why).\n\nFix these, then run `loopctl graph complete issue-9`. (attempt 1/3)",
		},
		{name: "wait", check: func(context.Context, string, string) (*graph.Report, error) {
			return report("design-approval", "wait"), nil
		}},
		{name: "pass", check: func(context.Context, string, string) (*graph.Report, error) { return report("complete", "pass"), nil }},
		{name: "current node not in the report", check: func(context.Context, string, string) (*graph.Report, error) {
			r := report("design", "block")
			r.CurrentNode = "gone"
			return r, nil
		}},
		{name: "nil report", check: func(context.Context, string, string) (*graph.Report, error) { return nil, nil }},
		{
			name: "check fails",
			check: func(context.Context, string, string) (*graph.Report, error) {
				return nil, errors.New("state is a directory")
			},
			note: "could not check",
		},
		{
			name:  "check panics",
			check: func(context.Context, string, string) (*graph.Report, error) { panic("boom") },
			note:  "internal error (boom); letting the agent stop",
		},
		{
			name: "check outlives its deadline",
			check: func(ctx context.Context, _, _ string) (*graph.Report, error) {
				<-ctx.Done()
				return report("design", "block", "hook timed out"), nil
			},
			note: "the check did not finish within",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := options(t, tc.check)
			if tc.name == "check outlives its deadline" {
				o.Timeout = 1
			}
			v := Evaluate(context.Background(), o)
			require.Equal(t, tc.block, v.Block)
			require.Equal(t, tc.reason, v.Reason)
			if tc.note == "" {
				require.Empty(t, v.Notes)
			} else {
				require.Len(t, v.Notes, 1)
				require.Contains(t, v.Notes[0], tc.note)
			}
		})
	}
}

func TestEvaluateFindsTheWorkItem(t *testing.T) {
	blocks := func(_ context.Context, _, id string) (*graph.Report, error) {
		r := report("design", "block", "x")
		r.WorkItem = id
		return r, nil
	}
	t.Run("the environment wins over the registry", func(t *testing.T) {
		o, _ := options(t, blocks)
		v := Evaluate(context.Background(), o)
		require.True(t, v.Block)
		require.Contains(t, v.Reason, "issue-9")
	})
	t.Run("registry by session id, with its directory", func(t *testing.T) {
		o, root := options(t, blocks)
		o.Getenv = func(string) string { return "" }
		o.Stdin = strings.NewReader(`{"session_id":"s-1"}`)
		o.Lookup = func(id string) (Session, error) {
			require.Equal(t, "s-1", id)
			return Session{WorkItem: "issue-77", Cwd: root}, nil
		}
		v := Evaluate(context.Background(), o)
		require.True(t, v.Block)
		require.Contains(t, v.Reason, "issue-77 is at node `design`")
	})
	t.Run("not a theloop session", func(t *testing.T) {
		o, _ := options(t, blocks)
		o.Getenv = func(string) string { return "" }
		o.Stdin = strings.NewReader(`{"session_id":"s-1"}`)
		o.Lookup = func(string) (Session, error) { return Session{}, ErrNoSession }
		require.Equal(t, Verdict{}, Evaluate(context.Background(), o))
	})
	t.Run("registry unreadable", func(t *testing.T) {
		o, _ := options(t, blocks)
		o.Getenv = func(string) string { return "" }
		o.Stdin = strings.NewReader(`{"session_id":"s-1"}`)
		o.Lookup = func(string) (Session, error) { return Session{}, errors.New("config too old") }
		v := Evaluate(context.Background(), o)
		require.False(t, v.Block)
		require.Len(t, v.Notes, 1)
		require.Contains(t, v.Notes[0], "could not look up session s-1 in the session registry (config too old)")
	})
	t.Run("no session id, no lookup", func(t *testing.T) {
		o, _ := options(t, blocks)
		o.Getenv = func(string) string { return "" }
		require.Equal(t, Verdict{}, Evaluate(context.Background(), o))
	})
}

func TestRunWritesTheHarnessAnswer(t *testing.T) {
	blocks := func(context.Context, string, string) (*graph.Report, error) {
		return report("design", "block", `quote " and <html> & newline`+"\n"+`here`), nil
	}
	for h, want := range map[Harness]string{
		Harness("claude"): "{\"decision\":\"block\",\"reason\":\"theloop: issue-9 is at node `design`, which is not done:\\n  · quote \\\" and <html> & newline here\\n\\nFix these, then run `loopctl graph complete issue-9`. (attempt 1/3)\"}\n",
		Harness("cursor"): "{\"followup_message\":\"theloop: issue-9 is at node `design`, which is not done:\\n  · quote \\\" and <html> & newline here\\n\\nFix these, then run `loopctl graph complete issue-9`. (attempt 1/3)\"}\n",
		Harness("codex"):  "{\"decision\":\"block\",\"reason\":\"theloop: issue-9 is at node `design`, which is not done:\\n  · quote \\\" and <html> & newline here\\n\\nFix these, then run `loopctl graph complete issue-9`. (attempt 1/3)\"}\n",
		Harness("gemini"): "{\"decision\":\"deny\",\"reason\":\"theloop: issue-9 is at node `design`, which is not done:\\n  · quote \\\" and <html> & newline here\\n\\nFix these, then run `loopctl graph complete issue-9`. (attempt 1/3)\"}\n",
	} {
		t.Run(string(h), func(t *testing.T) {
			o, _ := options(t, blocks)
			var out, errOut bytes.Buffer
			o.Harness, o.Stdout, o.Stderr = h, &out, &errOut
			require.Equal(t, 0, Run(context.Background(), o))
			require.Equal(t, want, out.String())
			require.Empty(t, errOut.String())
		})
	}
}

func TestReasonIsBounded(t *testing.T) {
	var msgs []string
	for i := range 30 {
		msgs = append(msgs, fmt.Sprintf("finding %d\x1b[31m %s", i, strings.Repeat("x", 1000)))
	}
	r := Reason("issue-1", graph.NodeReport{Node: "design", Messages: msgs}, 2, 3)
	lines := strings.Split(r, "\n")
	require.Len(t, lines, 1+20+1+1+1)
	require.Equal(t, "  · … and 10 more (`loopctl check issue-1 --recompute` lists them all)", lines[21])
	require.NotContains(t, r, "\x1b")
	require.Less(t, len(lines[1]), 450*3)
	require.True(t, strings.HasSuffix(lines[1], "…"))
}

func TestFindRepoRoot(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, ".git"), 0o755))
	sub := filepath.Join(root, "a", "b")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	real, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)

	got, err := FindRepoRoot(sub)
	require.NoError(t, err)
	require.Equal(t, real, got)

	// A worktree's .git is a file.
	wt := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: /elsewhere\n"), 0o644))
	got, err = FindRepoRoot(wt)
	require.NoError(t, err)
	realWT, _ := filepath.EvalSymlinks(wt)
	require.Equal(t, realWT, got)

	_, err = FindRepoRoot(filepath.Join(root, "missing"))
	require.ErrorContains(t, err, "does not exist")
}

// NFR5: every decision taken for a work item in a repository is one event,
// emitted to the injected sink; a stop with no work item logs nothing.
func TestDecisionsAreEmitted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rep    *graph.Report
		event  string
		fields map[string]any
	}{
		{"block", report("design", "block", "missing: x (a.md)"), EventBlocked, map[string]any{"work_item": "issue-9", "node": "design", "attempt": 1, "limit": 3, "harness": "claude"}},
		{"human gate", report("design-approval", "wait"), EventAllowed, map[string]any{"work_item": "issue-9", "node": "design-approval", "harness": "claude"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := options(t, func(context.Context, string, string) (*graph.Report, error) { return tc.rep, nil })
			sink := &graphtest.Sink{}
			o.Events = sink
			Run(context.Background(), o)
			evs := sink.Events()
			require.Len(t, evs, 1)
			require.Equal(t, tc.event, evs[0].Name)
			got := map[string]any{}
			for _, f := range evs[0].Fields {
				got[f.Key] = f.Value
			}
			require.Equal(t, tc.fields, got)
		})
	}
	t.Run("no work item: nothing to log", func(t *testing.T) {
		o, _ := options(t, nil)
		o.Getenv = func(string) string { return "" }
		o.Lookup = func(string) (Session, error) { return Session{}, nil }
		sink := &graphtest.Sink{}
		o.Events = sink
		Run(context.Background(), o)
		require.Empty(t, sink.Events())
	})
}
