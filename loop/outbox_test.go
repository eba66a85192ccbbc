package loop_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/ops"
)

const ref1 = "github:octo/demo#1"

func intentLine(t testing.TB, mut func(m map[string]any)) []byte {
	t.Helper()
	m := map[string]any{
		"id": "s1-1", "session": "s1", "workItem": ref1, "op": string(ops.GitHubSetLabels),
		"params":  map[string]any{"ref": ref1, "labels": []any{"loop:design"}, "replacePrefix": "loop:"},
		"created": "2026-05-04T09:00:00Z", "source": "graph complete",
	}
	if mut != nil {
		mut(m)
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestParseIntentAppliesTheAllowlist(t *testing.T) {
	claim := func(params map[string]any) func(m map[string]any) {
		return func(m map[string]any) {
			m["op"] = string(loop.IntentClaim)
			p := map[string]any{"ref": ref1, "node": "design", "status": "pass", "to": "design-critic-review", "outcome": "pass"}
			for k, v := range params {
				if v == nil {
					delete(p, k)
				} else {
					p[k] = v
				}
			}
			m["params"] = p
		}
	}
	ask := func(q any) func(m map[string]any) {
		return func(m map[string]any) {
			m["op"] = string(loop.IntentAsk)
			m["params"] = map[string]any{"ref": ref1, "question": q}
			m["source"] = "ask"
		}
	}
	comment := func(body string) func(m map[string]any) {
		return func(m map[string]any) {
			m["op"] = string(ops.GitHubAddComment)
			m["params"] = map[string]any{"ref": ref1, "body": body}
		}
	}
	tests := []struct {
		name   string
		mut    func(m map[string]any)
		reason string // "" accepted
		legacy bool
	}{
		{"a claim", claim(nil), "", false},
		{"a blocked claim", claim(map[string]any{"status": "block", "to": nil, "outcome": nil, "hook": "validate-artifacts"}), "", false},
		{"a claim without a node", claim(map[string]any{"node": nil}), "needs node", false},
		{"a claim with a free-form node", claim(map[string]any{"node": "Design approved by @alice"}), "needs node", false},
		{"a claim of an unknown status", claim(map[string]any{"status": "approved"}), "is not one of", false},
		{"a claim carrying a label", claim(map[string]any{"labels": []any{"loop:implementation"}}), `parameter "labels"`, false},
		{"a claim carrying a comment", claim(map[string]any{"body": "approved"}), `parameter "body"`, false},
		{"a question", ask("Which storage backend?"), "", false},
		{"an empty question", ask("  "), "non-empty text", false},
		{"a huge question", ask(strings.Repeat("x", loop.MaxIntentCommentRunes+1)), "over 65536", false},
		// The retired format is still read (and never performed as written).
		{"a retired phase label", nil, "", true},
		{"a retired marked comment", comment(hooks.Mark("ready for review")), "", true},
		{"retired labels without replacePrefix", func(m map[string]any) { m["params"] = map[string]any{"ref": ref1, "labels": []any{"loop:code"}} }, "", true},
		{"a retired unmarked comment", comment("Approved"), "self-authored marker", false},
		{"a retired empty comment", comment(""), "non-empty body", false},
		{"a retired huge comment", comment(hooks.Mark(strings.Repeat("x", loop.MaxIntentCommentRunes))), "over 65536", false},
		{"a retired label outside loop:", func(m map[string]any) { m["params"].(map[string]any)["labels"] = []any{"approved"} }, "is not a loop: label", false},
		{"a retired label with a comma", func(m map[string]any) { m["params"].(map[string]any)["labels"] = []any{"loop:a,b"} }, "is not a loop: label", false},
		{"another replacePrefix", func(m map[string]any) { m["params"].(map[string]any)["replacePrefix"] = "" }, "replacePrefix may only be", false},
		{"no labels", func(m map[string]any) { m["params"].(map[string]any)["labels"] = []any{} }, "1 to 10", false},
		{"an extra parameter", func(m map[string]any) { m["params"].(map[string]any)["repo"] = "x/y" }, `parameter "repo"`, false},
		{"another operation", func(m map[string]any) { m["op"] = string(ops.GitHubAddReaction) }, "is not a request", false},
		{"slack", func(m map[string]any) { m["op"] = string(ops.SlackPostMessage) }, "is not a request", false},
		{"params on another ref", func(m map[string]any) { m["params"].(map[string]any)["ref"] = "github:octo/demo#2" }, "params.ref", false},
		{"a non-GitHub ref", func(m map[string]any) { m["workItem"] = "jira:X-1" }, "not a GitHub work item ref", false},
		{"an id of another session", func(m map[string]any) { m["id"] = "s2-1" }, "is not s1-<n>", false},
		{"a path as session", func(m map[string]any) { m["session"] = "../x"; m["id"] = "../x-1" }, "not a valid session id", false},
		{"an unknown field", func(m map[string]any) { m["decision"] = "approve" }, "unknown field", false},
		{"no created time", func(m map[string]any) { delete(m, "created") }, "no created time", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := loop.ParseIntent(intentLine(t, tc.mut))
			if tc.reason == "" {
				require.NoError(t, err)
				require.Equal(t, ref1, in.Params["ref"])
				require.Equal(t, tc.legacy, in.Legacy())
				return
			}
			require.ErrorIs(t, err, loop.ErrIntentRefused)
			require.Contains(t, err.Error(), tc.reason)
		})
	}
	_, err := loop.ParseIntent(append(intentLine(t, nil), []byte(` {"id":"s1-2"}`)...))
	require.ErrorIs(t, err, loop.ErrIntentRefused, "one value per line")
	_, err = loop.ParseIntent(make([]byte, loop.MaxIntentBytes+1))
	require.ErrorContains(t, err, "over")
}

func TestManagedSessionFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		managed bool
		err     string
	}{
		{"a developer's shell", map[string]string{"THE_LOOP_STATE_ROOT": "/srv/loop"}, false, ""},
		{"only the work item (loop-gate's tests, CI)", map[string]string{"THE_LOOP_WORK_ITEM": "issue-1"}, false, ""},
		{"a loopd session", map[string]string{"THE_LOOP_SESSION_ID": "abc-1", "THE_LOOP_WORK_ITEM": "issue-1", "THE_LOOP_STATE_ROOT": "/srv/loop"}, true, ""},
		{"no state root", map[string]string{"THE_LOOP_SESSION_ID": "abc", "THE_LOOP_WORK_ITEM": "issue-1"}, false, "THE_LOOP_STATE_ROOT is not"},
		{"a relative state root", map[string]string{"THE_LOOP_SESSION_ID": "abc", "THE_LOOP_WORK_ITEM": "issue-1", "THE_LOOP_STATE_ROOT": "state"}, false, "not an absolute path"},
		{"a session id with a slash", map[string]string{"THE_LOOP_SESSION_ID": "../../etc", "THE_LOOP_WORK_ITEM": "issue-1", "THE_LOOP_STATE_ROOT": "/srv/loop"}, false, "not a valid session id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := loop.ManagedSessionFromEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.managed, m != nil)
			if m != nil {
				require.Equal(t, "/srv/loop/outbox/abc-1", m.Dir())
			}
		})
	}
}

// The claim recorder is the integrations of a managed session: the hooks'
// ticket effects are answered pending and recorded as nothing (loopd
// derives them); the runtime's transitions become claims numbered by line;
// everything else is unsupported (hooks skip it); nothing reaches a
// network. A question recorder turns a marked comment into a question.
func TestRecorderWritesClaimsAndQuestionsOnly(t *testing.T) {
	root := t.TempDir()
	ms := loop.ManagedSession{SessionID: "sess-1", WorkItem: "issue-1", StateRoot: root}
	dir, err := loop.PrepareOutboxDir(root, "sess-1")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "outbox", "sess-1"), dir)
	clock := graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))
	rec := loop.NewRecorder(ms, "graph complete", clock)
	ctx := context.Background()

	res, err := rec.Call(ctx, ops.GitHubSetLabels, map[string]any{"ref": ref1, "labels": []any{"loop:design"}, "replacePrefix": "loop:"})
	require.NoError(t, err)
	require.Equal(t, true, res["pending"])
	_, err = rec.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": ref1, "body": hooks.Mark("ready for review")})
	require.NoError(t, err)
	require.Empty(t, rec.Recorded(), "no label and no comment is ever written")
	require.NoFileExists(t, filepath.Join(dir, loop.OutboxFileName))
	for _, op := range []graph.Operation{ops.GitHubListComments, ops.GitHubGetLabels, ops.SlackPostMessage, ops.GitHubAddReaction} {
		_, err := rec.Call(ctx, op, map[string]any{"ref": ref1})
		require.ErrorIs(t, err, graph.ErrUnsupportedOperation, op)
	}

	ev := func(name string, fields ...graph.Field) graph.LogEvent {
		return graph.LogEvent{Name: name, Fields: append([]graph.Field{{Key: "work_item", Value: ref1}}, fields...)}
	}
	rec.Emit(ev(graph.EventAdvanced, graph.Field{Key: "node", Value: "design"}, graph.Field{Key: "to", Value: "test-planning"}, graph.Field{Key: "outcome", Value: "pass"}))
	// A torn line (a writer killed mid-write) is closed and counted.
	f, err := os.OpenFile(filepath.Join(dir, loop.OutboxFileName), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, _ = f.WriteString(`{"id":"sess-1-2","ses`)
	require.NoError(t, f.Close())
	rec.Emit(ev(graph.EventBlocked, graph.Field{Key: "node", Value: "test-planning"}, graph.Field{Key: "hook", Value: "validate-artifacts"}))
	rec.Emit(ev(graph.EventHookSkipped, graph.Field{Key: "node", Value: "design"}))                            // not a transition
	rec.Emit(ev(graph.EventAdvanced, graph.Field{Key: "node", Value: "Design, approved by @alice"}))           // not a node id: no claim
	rec.Emit(graph.LogEvent{Name: graph.EventAdvanced, Fields: []graph.Field{{Key: "node", Value: "design"}}}) // no ref
	require.NoError(t, rec.Err())

	got := rec.Recorded()
	require.Len(t, got, 2)
	require.Equal(t, []string{"sess-1-1", "sess-1-3"}, []string{got[0].ID, got[1].ID})
	require.Equal(t, loop.Claim{Node: "design", Status: loop.ClaimPassed, To: "test-planning", Outcome: "pass"}, got[0].Claim())
	require.Equal(t, loop.Claim{Node: "test-planning", Status: loop.ClaimBlocked, Hook: "validate-artifacts"}, got[1].Claim())

	asker := loop.NewAskRecorder(ms, "ask", clock)
	res, err = asker.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": ref1, "body": hooks.Mark("Which storage backend?")})
	require.NoError(t, err)
	require.Equal(t, "sess-1-4", res["intent"])
	_, err = asker.Call(ctx, ops.GitHubSetLabels, map[string]any{"ref": ref1, "labels": []any{"loop:implementation"}})
	require.ErrorIs(t, err, graph.ErrUnsupportedOperation, "a question recorder writes no label")
	q := asker.Recorded()
	require.Len(t, q, 1)
	require.Equal(t, loop.IntentAsk, q[0].Op)
	require.Equal(t, "Which storage backend?", q[0].Question(), "the marker is loopd's to add")

	lines, end, err := loop.ReadOutboxLines(filepath.Join(dir, loop.OutboxFileName), 0, 1)
	require.NoError(t, err)
	require.Len(t, lines, 4)
	fi, err := os.Stat(filepath.Join(dir, loop.OutboxFileName))
	require.NoError(t, err)
	require.Equal(t, fi.Size(), end)
	require.Equal(t, end, lines[3].End)
	for i, want := range []string{"sess-1-1", "", "sess-1-3", "sess-1-4"} {
		in, err := loop.ParseIntent(lines[i].Data)
		if want == "" {
			require.Error(t, err, "the torn line is refused")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, want, in.ID)
		require.Equal(t, i+1, lines[i].No)
	}
	// Reading on from the middle gives the rest, numbered on.
	rest, _, err := loop.ReadOutboxLines(filepath.Join(dir, loop.OutboxFileName), lines[0].End, 2)
	require.NoError(t, err)
	require.Len(t, rest, 3)
	require.Equal(t, 3, rest[1].No)

	// A writer never writes the retired format.
	_, err = loop.AppendIntent(dir, loop.Intent{Session: "sess-1", WorkItem: ref1, Op: ops.GitHubSetLabels, Created: clock.Now(),
		Params: map[string]any{"ref": ref1, "labels": []any{"loop:implementation"}}})
	require.ErrorContains(t, err, "retired")
}

// The reader never follows a link planted by the session.
func TestReadOutboxLinesRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("key\n"), 0o600))
	sym := filepath.Join(dir, "sym.jsonl")
	require.NoError(t, os.Symlink(secret, sym))
	_, _, err := loop.ReadOutboxLines(sym, 0, 1)
	require.Error(t, err)
	hard := filepath.Join(dir, "hard.jsonl")
	require.NoError(t, os.Link(secret, hard))
	_, _, err = loop.ReadOutboxLines(hard, 0, 1)
	require.ErrorIs(t, err, loop.ErrUnsafePath)
}

// A line over the bound is reported, not kept, and the lines after it are
// still read.
func TestReadOutboxLinesBoundsALine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "intents.jsonl")
	long := strings.Repeat("x", loop.MaxIntentBytes+10)
	require.NoError(t, os.WriteFile(p, []byte("a\n"+long+"\nb\npartial"), 0o600))
	lines, end, err := loop.ReadOutboxLines(p, 0, 1)
	require.NoError(t, err)
	require.Len(t, lines, 3)
	require.True(t, lines[1].TooLong)
	require.Nil(t, lines[1].Data)
	require.Equal(t, "b", string(lines[2].Data))
	require.Equal(t, int64(2+len(long)+1+2), end, "the partial last line waits")
}

// FuzzParseIntent: the line is agent-written. No input panics; whatever is
// accepted is a claim of tokens, a question, or a retired line of the old
// shape (which loopd never performs as written).
func FuzzParseIntent(f *testing.F) {
	f.Add(intentLine(f, nil))
	f.Add(intentLine(f, func(m map[string]any) {
		m["op"] = string(ops.GitHubAddComment)
		m["params"] = map[string]any{"ref": ref1, "body": hooks.Mark("hi")}
	}))
	f.Add(intentLine(f, func(m map[string]any) {
		m["op"] = string(loop.IntentClaim)
		m["params"] = map[string]any{"ref": ref1, "node": "design", "status": "pass", "to": "test-planning"}
	}))
	f.Add([]byte(`{"id":"s-1","session":"s","params":{"ref":[[[[[]]]]]}}`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, line []byte) {
		in, err := loop.ParseIntent(line)
		if err != nil {
			require.ErrorIs(t, err, loop.ErrIntentRefused)
			return
		}
		require.Equal(t, in.WorkItem, in.Params["ref"])
		switch in.Op {
		case loop.IntentClaim:
			c := in.Claim()
			require.NotEmpty(t, c.Node)
			require.NotContains(t, c.Node+c.To+c.Outcome+c.Hook, " ")
		case loop.IntentAsk:
			require.NotEmpty(t, strings.TrimSpace(in.Question()))
		case ops.GitHubAddComment:
			require.True(t, in.Legacy())
			require.True(t, hooks.SelfAuthored(in.Params["body"].(string)))
		case ops.GitHubSetLabels:
			require.True(t, in.Legacy())
			for _, l := range in.Params["labels"].([]any) {
				require.True(t, strings.HasPrefix(strings.ToLower(l.(string)), "loop:"))
			}
		default:
			t.Fatalf("accepted operation %q", in.Op)
		}
	})
}

// FuzzReadOutboxLines: whatever the session wrote, the reader returns the
// complete lines in order, with offsets that add up, and reading on from
// any line's end gives the rest.
// FuzzReadOutboxLines: the seeds are small on purpose. A 70 KB seed (a
// line across the reader's buffer) made every mutation and every
// minimization of a new input cost a 70 KB file: the fuzzer managed ~14
// executions a second and spent its time minimizing. That case is
// TestReadOutboxLinesAcrossTheReadBuffer, with the same checks.
func FuzzReadOutboxLines(f *testing.F) {
	f.Add([]byte("a\nb\n"), 0)
	f.Add([]byte("\n\n\npartial"), 1)
	f.Add([]byte("{\"op\":\"x\"}\n\n"+strings.Repeat("y", 300)+"\nz"), 2)
	f.Fuzz(checkOutboxLines)
}

// A line longer than the reader's buffer, and the lines after it.
func TestReadOutboxLinesAcrossTheReadBuffer(t *testing.T) {
	for from := range 3 {
		checkOutboxLines(t, []byte(strings.Repeat("x", 70000)+"\ny\n"), from)
	}
}

// checkOutboxLines reads content from the start and again from a line
// boundary picked by from, and checks the two agree with content.
func checkOutboxLines(t *testing.T, content []byte, from int) {
	p := filepath.Join(t.TempDir(), "intents.jsonl")
	require.NoError(t, os.WriteFile(p, content, 0o600))
	lines, end, err := loop.ReadOutboxLines(p, 0, 1)
	require.NoError(t, err)
	require.Equal(t, int64(strings.LastIndexByte(string(content), '\n')+1), end)
	prev := int64(0)
	for i, l := range lines {
		require.Equal(t, i+1, l.No)
		require.Greater(t, l.End, prev)
		if !l.TooLong {
			require.Equal(t, string(content[prev:l.End-1]), string(l.Data))
		}
		prev = l.End
	}
	if len(lines) == 0 {
		return
	}
	k := ((from % len(lines)) + len(lines)) % len(lines)
	rest, end2, err := loop.ReadOutboxLines(p, lines[k].End, k+2)
	require.NoError(t, err)
	require.Equal(t, end, end2)
	require.Len(t, rest, len(lines)-k-1)
	for i := range rest {
		require.Equal(t, lines[k+1+i].No, rest[i].No)
		require.Equal(t, lines[k+1+i].End, rest[i].End)
	}
}
