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
	}{
		{"a phase label", nil, ""},
		{"a marked comment", comment(hooks.Mark("ready for review")), ""},
		{"labels without replacePrefix", func(m map[string]any) { m["params"] = map[string]any{"ref": ref1, "labels": []any{"loop:code"}} }, ""},
		{"an unmarked comment", comment("Approved"), "self-authored marker"},
		{"an empty comment", comment(""), "non-empty body"},
		{"a huge comment", comment(hooks.Mark(strings.Repeat("x", loop.MaxIntentCommentRunes))), "over 65536"},
		{"a label outside loop:", func(m map[string]any) { m["params"].(map[string]any)["labels"] = []any{"approved"} }, "is not a loop: label"},
		{"a label with a comma", func(m map[string]any) { m["params"].(map[string]any)["labels"] = []any{"loop:a,b"} }, "is not a loop: label"},
		{"another replacePrefix", func(m map[string]any) { m["params"].(map[string]any)["replacePrefix"] = "" }, "replacePrefix may only be"},
		{"no labels", func(m map[string]any) { m["params"].(map[string]any)["labels"] = []any{} }, "1 to 10"},
		{"an extra parameter", func(m map[string]any) { m["params"].(map[string]any)["repo"] = "x/y" }, `parameter "repo"`},
		{"another operation", func(m map[string]any) { m["op"] = string(ops.GitHubAddReaction) }, "is not one an agent's session may ask for"},
		{"slack", func(m map[string]any) { m["op"] = string(ops.SlackPostMessage) }, "is not one"},
		{"params on another ref", func(m map[string]any) { m["params"].(map[string]any)["ref"] = "github:octo/demo#2" }, "params.ref"},
		{"a non-GitHub ref", func(m map[string]any) { m["workItem"] = "jira:X-1" }, "not a GitHub work item ref"},
		{"an id of another session", func(m map[string]any) { m["id"] = "s2-1" }, "is not s1-<n>"},
		{"a path as session", func(m map[string]any) { m["session"] = "../x"; m["id"] = "../x-1" }, "not a valid session id"},
		{"an unknown field", func(m map[string]any) { m["decision"] = "approve" }, "unknown field"},
		{"no created time", func(m map[string]any) { delete(m, "created") }, "no created time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := loop.ParseIntent(intentLine(t, tc.mut))
			if tc.reason == "" {
				require.NoError(t, err)
				require.Equal(t, ref1, in.Args()["ref"])
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

// The Recorder is the integrations of a managed session: ticket effects
// become fsync'd intents numbered by line; everything else is unsupported
// (hooks skip it); nothing reaches a network.
func TestRecorderWritesIntentsAndRefusesTheRest(t *testing.T) {
	root := t.TempDir()
	ms := loop.ManagedSession{SessionID: "sess-1", WorkItem: "issue-1", StateRoot: root}
	dir, err := loop.PrepareOutboxDir(root, "sess-1")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "outbox", "sess-1"), dir)
	rec := loop.NewRecorder(ms, "graph complete", graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)))
	ctx := context.Background()

	res, err := rec.Call(ctx, ops.GitHubSetLabels, map[string]any{"ref": ref1, "labels": []any{"loop:design"}, "replacePrefix": "loop:"})
	require.NoError(t, err)
	require.Equal(t, "sess-1-1", res["intent"])
	// A torn line (a writer killed mid-write) is closed and counted.
	f, err := os.OpenFile(filepath.Join(dir, loop.OutboxFileName), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, _ = f.WriteString(`{"id":"sess-1-2","ses`)
	require.NoError(t, f.Close())
	_, err = rec.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": ref1, "body": hooks.Mark("ready for review")})
	require.NoError(t, err)

	for _, op := range []graph.Operation{ops.GitHubListComments, ops.GitHubGetLabels, ops.SlackPostMessage, ops.GitHubAddReaction} {
		_, err := rec.Call(ctx, op, map[string]any{"ref": ref1})
		require.ErrorIs(t, err, graph.ErrUnsupportedOperation, op)
	}
	_, err = rec.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": ref1, "body": "unmarked"})
	require.ErrorIs(t, err, loop.ErrIntentRefused, "the writer checks what loopd will check")

	got := rec.Recorded()
	require.Len(t, got, 2)
	require.Equal(t, []string{"sess-1-1", "sess-1-3"}, []string{got[0].ID, got[1].ID})

	lines, end, err := loop.ReadOutboxLines(filepath.Join(dir, loop.OutboxFileName), 0, 1)
	require.NoError(t, err)
	require.Len(t, lines, 3)
	fi, err := os.Stat(filepath.Join(dir, loop.OutboxFileName))
	require.NoError(t, err)
	require.Equal(t, fi.Size(), end)
	require.Equal(t, end, lines[2].End)
	for i, want := range []string{"sess-1-1", "", "sess-1-3"} {
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
	require.Len(t, rest, 2)
	require.Equal(t, 3, rest[1].No)
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
// accepted has an allowlisted operation, a marked comment or loop: labels,
// and arguments rebuilt from checked fields only.
func FuzzParseIntent(f *testing.F) {
	f.Add(intentLine(f, nil))
	f.Add(intentLine(f, func(m map[string]any) {
		m["op"] = string(ops.GitHubAddComment)
		m["params"] = map[string]any{"ref": ref1, "body": hooks.Mark("hi")}
	}))
	f.Add([]byte(`{"id":"s-1","session":"s","params":{"ref":[[[[[]]]]]}}`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, line []byte) {
		in, err := loop.ParseIntent(line)
		if err != nil {
			require.ErrorIs(t, err, loop.ErrIntentRefused)
			return
		}
		args := in.Args()
		require.Equal(t, in.WorkItem, args["ref"])
		switch in.Op {
		case ops.GitHubAddComment:
			require.True(t, hooks.SelfAuthored(args["body"].(string)))
			require.Len(t, args, 2)
		case ops.GitHubSetLabels:
			for _, l := range args["labels"].([]any) {
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
