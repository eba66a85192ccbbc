package outbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/outbox"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

const (
	sid     = "sess-1"
	issue1  = "github:octo/demo#1"
	issue2  = "github:octo/demo#2"
	theRepo = "octo/demo"
)

// world is a state root, a GitHub stand-in with issues #1 and #2, loopd's
// integrations reaching it, and session sess-1 serving issue #1.
type world struct {
	root string
	sim  *githubsim.Server
	set  graph.Integrations
	sink *graphtest.Sink
	rec  *loop.Recorder
}

func newWorld(t testing.TB) *world {
	t.Helper()
	sim, err := githubsim.Start(githubsim.Config{Token: "tok"})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	for _, title := range []string{"one", "two"} {
		_, err := sim.OpenIssue(theRepo, "dana", title, "")
		require.NoError(t, err)
	}
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 1, TimeoutSeconds: 5,
		API: integrations.GitHubAPIConfig{BaseURL: sim.URL()},
	}}, integrations.Deps{Env: func(k string) (string, bool) { return "tok", k == "GH_TOKEN" }})
	require.NoError(t, err)
	root := t.TempDir()
	_, err = loop.PrepareOutboxDir(root, sid)
	require.NoError(t, err)
	return &world{root: root, sim: sim, set: set, sink: &graphtest.Sink{},
		rec: loop.NewRecorder(loop.ManagedSession{SessionID: sid, WorkItem: "issue-1", StateRoot: root}, "graph complete", nil)}
}

func (w *world) performer(t testing.TB) *outbox.Performer {
	t.Helper()
	p, err := outbox.New(outbox.Config{StateRoot: w.root, Interval: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		outbox.Deps{Integrations: w.set, Sink: w.sink, Sessions: outbox.SessionsFunc(func(id string) ([]workitem.Ref, error) {
			if id != sid {
				return nil, errors.New("no such session")
			}
			r, _ := workitem.Parse(issue1)
			return []workitem.Ref{r}, nil
		})})
	require.NoError(t, err)
	return p
}

// claim records what a claim entering the design gate records: the phase
// label, then the review request.
func (w *world) claim(t testing.TB) {
	t.Helper()
	_, err := w.rec.Call(t.Context(), ops.GitHubSetLabels, map[string]any{"ref": issue1, "labels": []string{"loop:design"}, "replacePrefix": "loop:"})
	require.NoError(t, err)
	_, err = w.rec.Call(t.Context(), ops.GitHubAddComment, map[string]any{"ref": issue1, "body": hooks.Mark("**design** is ready for review.")})
	require.NoError(t, err)
}

func (w *world) writes() []string {
	var out []string
	for _, r := range w.sim.Requests() {
		if r.Method != "GET" {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

func (w *world) labels(t testing.TB, n int) []string {
	is, err := w.sim.Issue(theRepo, n)
	require.NoError(t, err)
	l := append([]string(nil), is.Labels...)
	sort.Strings(l)
	return l
}

func (w *world) comments(t testing.TB, n int) []githubsim.Comment {
	cs, err := w.sim.Comments(theRepo, n)
	require.NoError(t, err)
	return cs
}

// appendRaw writes a line as a hostile session could.
func (w *world) appendRaw(t testing.TB, line string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(loop.OutboxDir(w.root, sid), loop.OutboxFileName), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString(line + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// Recording made no call; the performer makes each effect once, in order;
// a second performer over the same outbox (loopd restarted) makes none.
func TestPerformsInOrderOnceAcrossRestarts(t *testing.T) {
	w := newWorld(t)
	w.claim(t)
	require.Empty(t, w.sim.Requests(), "a claim in a managed session calls no GitHub")

	p := w.performer(t)
	p.Poll()
	require.Equal(t, []string{"loop:design"}, w.labels(t, 1))
	cs := w.comments(t, 1)
	require.Len(t, cs, 1)
	require.True(t, hooks.SelfAuthored(cs[0].Body), "the comment carries the marker ingress drops")
	require.Contains(t, cs[0].Body, outbox.IntentMarkerPrefix+sid+"-2 -->")
	writes := w.writes()
	require.NotEmpty(t, writes)
	require.Contains(t, writes[len(writes)-1], "/comments", "the label first, then the comment: file order")
	require.Equal(t, 2, w.sink.Count(outbox.EventPerformed))
	require.Zero(t, p.Pending(issue1))
	require.NoError(t, p.Close())

	before := len(w.sim.Requests())
	p2 := w.performer(t)
	p2.Poll()
	require.NoError(t, p2.Close())
	require.Len(t, w.sim.Requests(), before, "a replay has no effect")
	require.Len(t, w.comments(t, 1), 1)
}

// loopd died after GitHub took the comment and before it was recorded
// done: the restarted performer finds the comment and does not post it
// again.
func TestACommentStartedBeforeACrashIsPostedOnce(t *testing.T) {
	w := newWorld(t)
	w.claim(t)
	p := w.performer(t)
	p.Poll()
	require.NoError(t, p.Close())
	require.Len(t, w.comments(t, 1), 1)

	// Drop the last "performed" record: the comment's intent is left
	// "started", as after a crash mid-call.
	done := filepath.Join(w.root, outbox.DoneDirName, sid+".jsonl")
	data, err := os.ReadFile(done)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Contains(t, lines[len(lines)-1], `"performed"`)
	require.Contains(t, lines[len(lines)-2], `"started"`)
	require.NoError(t, os.WriteFile(done, []byte(strings.Join(lines[:len(lines)-1], "\n")+"\n"), 0o600))

	p2 := w.performer(t)
	p2.Poll()
	require.NoError(t, p2.Close())
	require.Len(t, w.comments(t, 1), 1, "found on the ticket, not posted twice")
	last := w.sink.Events()[len(w.sink.Events())-1]
	require.Equal(t, outbox.EventPerformed, last.Name)
	found, _ := last.Get("already_on_ticket")
	require.Equal(t, true, found)
}

// A failing GitHub is retried with back-off; later intents wait for the
// earlier one; nothing is lost or doubled.
func TestAFailingGitHubIsRetried(t *testing.T) {
	w := newWorld(t)
	w.sim.InjectFault(githubsim.Fault{PathContains: "/labels", Status: 502, Times: 3})
	w.claim(t)
	p := w.performer(t)
	p.Poll()
	require.Empty(t, w.comments(t, 1), "the comment waits behind the failing label")
	require.Equal(t, 2, p.Pending(issue1))
	p.Start()
	// Done when recorded, not when GitHub has it: Close may interrupt a
	// call whose answer is still on its way (then a restart finds it).
	require.Eventually(t, func() bool { return w.sink.Count(outbox.EventPerformed) == 2 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, p.Close())
	require.Equal(t, []string{"loop:design"}, w.labels(t, 1))
	require.GreaterOrEqual(t, w.sink.Count(outbox.EventFailed), 1)
	require.Equal(t, 2, w.sink.Count(outbox.EventPerformed))
	require.Zero(t, p.Pending(issue1))
	require.Len(t, w.comments(t, 1), 1)
}

// Whatever the session writes that is not an allowlisted effect on its
// own work item is refused, logged, and never reaches GitHub; the lines
// after it still do.
func TestRefusals(t *testing.T) {
	w := newWorld(t)
	created := `"created":"2026-05-04T09:00:00Z"`
	w.appendRaw(t, `{"id":"sess-1-1","session":"sess-1","workItem":"`+issue2+`","op":"github.set-labels","params":{"ref":"`+issue2+`","labels":["loop:done"]},`+created+`}`)
	w.appendRaw(t, `{"id":"sess-1-2","session":"sess-1","workItem":"`+issue1+`","op":"github.add-reaction","params":{"ref":"`+issue1+`","content":"+1"},`+created+`}`)
	w.appendRaw(t, `{"id":"sess-1-3","session":"sess-1","workItem":"`+issue1+`","op":"github.add-comment","params":{"ref":"`+issue1+`","body":"Approved"},`+created+`}`)
	w.appendRaw(t, `{"id":"sess-1-9","session":"sess-1","workItem":"`+issue1+`","op":"github.set-labels","params":{"ref":"`+issue1+`","labels":["loop:x"]},`+created+`}`)
	w.appendRaw(t, `not json at all`)
	w.claim(t) // lines 6 and 7: a real claim still lands
	p := w.performer(t)
	p.Poll()
	require.NoError(t, p.Close())

	require.Empty(t, w.labels(t, 2), "another work item's ticket is untouched")
	require.Empty(t, w.comments(t, 2))
	require.Equal(t, []string{"loop:design"}, w.labels(t, 1))
	cs := w.comments(t, 1)
	require.Len(t, cs, 1)
	require.NotContains(t, cs[0].Body, "Approved")
	require.Equal(t, 5, w.sink.Count(outbox.EventRefused))
	var reasons []string
	for _, e := range w.sink.Events() {
		if e.Name == outbox.EventRefused {
			r, _ := e.Get("reason")
			reasons = append(reasons, r.(string))
		}
	}
	require.Contains(t, reasons[0], "is not the session's")
	require.Contains(t, reasons[1], "is not one an agent's session may ask for")
	require.Contains(t, reasons[2], "self-authored marker")
	require.Contains(t, reasons[3], "<session>-<line>")
	require.Contains(t, reasons[4], "not an intent")

	// Refusals are durable too: a restart does not log them again.
	n := len(w.sink.Events())
	p2 := w.performer(t)
	p2.Poll()
	require.NoError(t, p2.Close())
	require.Len(t, w.sink.Events(), n)
}

// An unknown session's outbox is refused wholesale; a symlink planted as
// the intents file is not read.
func TestUnknownSessionAndLinks(t *testing.T) {
	w := newWorld(t)
	other := loop.NewRecorder(loop.ManagedSession{SessionID: "stranger", WorkItem: "issue-1", StateRoot: w.root}, "ask", nil)
	_, err := other.Call(t.Context(), ops.GitHubAddComment, map[string]any{"ref": issue1, "body": hooks.Mark("hi")})
	require.NoError(t, err)
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("{}\n"), 0o600))
	require.NoError(t, os.Symlink(secret, filepath.Join(loop.OutboxDir(w.root, sid), loop.OutboxFileName)))
	p := w.performer(t)
	p.Poll()
	require.NoError(t, p.Close())
	require.Empty(t, w.writes())
	require.Equal(t, 2, w.sink.Count(outbox.EventRefused))
}

// A permanent refusal by GitHub (the issue does not exist) is recorded and
// passed; it does not wedge the session.
func TestAPermanentFailureIsPassed(t *testing.T) {
	w := newWorld(t)
	_, err := w.rec.Call(t.Context(), ops.GitHubSetLabels, map[string]any{"ref": issue1, "labels": []any{"loop:code"}})
	require.NoError(t, err)
	w.sim.InjectFault(githubsim.Fault{PathContains: "/labels", Status: 404, Times: 1})
	_, err = w.rec.Call(t.Context(), ops.GitHubAddComment, map[string]any{"ref": issue1, "body": hooks.Mark("next")})
	require.NoError(t, err)
	p := w.performer(t)
	p.Poll()
	require.NoError(t, p.Close())
	require.Len(t, w.comments(t, 1), 1)
	final := slices.IndexFunc(w.sink.Events(), func(e graph.LogEvent) bool {
		v, _ := e.Get("final")
		return e.Name == outbox.EventFailed && v == true
	})
	require.GreaterOrEqual(t, final, 0)
}

// Close stops the loop and returns; twice is fine.
func TestCloseStops(t *testing.T) {
	w := newWorld(t)
	p := w.performer(t)
	p.Start()
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	w.claim(t)
	time.Sleep(30 * time.Millisecond)
	require.Empty(t, w.sim.Requests(), "nothing runs after Close")
}
