package outbox_test

import (
	"context"
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
	// verdict is the stand-in recompute's answer to every claim; judged
	// counts the claims answered (Done).
	verdict func(in loop.Intent) outbox.Verdict
	judged  int
}

// designVerdict is what loopd's recompute gives a claim that entered the
// design gate: the phase label, then the review request.
func designVerdict(loop.Intent) outbox.Verdict {
	return outbox.Verdict{Effects: []outbox.Effect{
		{Op: ops.GitHubSetLabels, Summary: "label loop:design", Args: map[string]any{"ref": issue1, "labels": []any{"loop:design"}, "replacePrefix": "loop:"}},
		{Op: ops.GitHubAddComment, Summary: "review request", Args: map[string]any{"ref": issue1, "body": hooks.Mark("**design** is ready for review.")}},
	}}
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
	return &world{root: root, sim: sim, set: set, sink: &graphtest.Sink{}, verdict: designVerdict,
		rec: loop.NewRecorder(loop.ManagedSession{SessionID: sid, WorkItem: "issue-1", StateRoot: root}, "graph complete", nil)}
}

func (w *world) performer(t testing.TB) *outbox.Performer {
	t.Helper()
	p, err := outbox.New(outbox.Config{StateRoot: w.root, Interval: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		outbox.Deps{Integrations: w.set, Sink: w.sink, Clock: graph.SystemClock{}, Sessions: outbox.SessionsFunc(func(id string) ([]workitem.Ref, error) {
			if id != sid {
				return nil, errors.New("no such session")
			}
			r, _ := workitem.Parse(issue1)
			return []workitem.Ref{r}, nil
		}), Judge: outbox.JudgeFunc(func(_ context.Context, in loop.Intent) (outbox.Verdict, error) {
			v := w.verdict(in)
			v.Done = func() { w.judged++ }
			return v, nil
		})})
	require.NoError(t, err)
	return p
}

// claim records what a claim of requirements-definition records in a
// managed session: the hooks' ticket effects are not written; the
// transition is one claim line.
func (w *world) claim(t testing.TB) {
	t.Helper()
	_, err := w.rec.Call(t.Context(), ops.GitHubSetLabels, map[string]any{"ref": issue1, "labels": []string{"loop:design"}, "replacePrefix": "loop:"})
	require.NoError(t, err)
	w.rec.Emit(graph.LogEvent{Name: graph.EventAdvanced, Fields: []graph.Field{{Key: "work_item", Value: issue1},
		{Key: "node", Value: "requirements-definition"}, {Key: "to", Value: "requirements-approval"}, {Key: "outcome", Value: "pass"}}})
	require.NoError(t, w.rec.Err())
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
	require.Contains(t, cs[0].Body, outbox.IntentMarkerPrefix+sid+"-1/1 -->")
	writes := w.writes()
	require.NotEmpty(t, writes)
	require.Contains(t, writes[len(writes)-1], "/comments", "the label first, then the comment: the verdict's order")
	require.Equal(t, 1, w.sink.Count(outbox.EventPerformed))
	require.Equal(t, 1, w.judged)
	require.Zero(t, p.Pending(issue1))
	require.NoError(t, p.Close())

	before := len(w.sim.Requests())
	p2 := w.performer(t)
	p2.Poll()
	require.NoError(t, p2.Close())
	require.Len(t, w.sim.Requests(), before, "a replay has no effect")
	require.Len(t, w.comments(t, 1), 1)
	require.Equal(t, 1, w.judged)
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
	w.claim(t) // a later claim waits behind it
	p := w.performer(t)
	p.Poll()
	require.Empty(t, w.comments(t, 1), "the comment waits behind the failing label")
	require.Equal(t, 2, p.Pending(issue1))
	require.Zero(t, w.judged)
	p.Start()
	// Done when recorded, not when GitHub has it: Close may interrupt a
	// call whose answer is still on its way (then a restart finds it).
	require.Eventually(t, func() bool { return w.sink.Count(outbox.EventPerformed) == 2 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, p.Close())
	require.Equal(t, []string{"loop:design"}, w.labels(t, 1))
	require.GreaterOrEqual(t, w.sink.Count(outbox.EventFailed), 1)
	require.Equal(t, 2, w.sink.Count(outbox.EventPerformed))
	require.Zero(t, p.Pending(issue1))
	require.Len(t, w.comments(t, 1), 2, "one review request per claim: each line has its own marker")
	require.Equal(t, 2, w.judged)
}

// Whatever the session writes that is not a request on its own work item
// is refused, logged, and never reaches GitHub; a line of the retired
// format is never performed as written (the recompute's effects stand
// instead); a question is posted under loopd's heading; the lines after a
// refusal still land.
func TestRefusals(t *testing.T) {
	w := newWorld(t)
	w.verdict = func(in loop.Intent) outbox.Verdict {
		if in.Op == loop.IntentClaim {
			return designVerdict(in)
		}
		return outbox.Verdict{} // the recompute of a retired line finds nothing new
	}
	created := `"created":"2026-05-04T09:00:00Z"`
	line := func(n, ref, op, params, source string) string {
		return `{"id":"sess-1-` + n + `","session":"sess-1","workItem":"` + ref + `","op":"` + op + `","params":{"ref":"` + ref + `",` + params + `},` + created + `,"source":"` + source + `"}`
	}
	w.appendRaw(t, line("1", issue2, "loop.claim", `"node":"design","status":"pass"`, "graph complete"))
	w.appendRaw(t, line("2", issue1, "github.add-reaction", `"content":"+1"`, "graph complete"))
	w.appendRaw(t, line("3", issue1, "github.add-comment", `"body":"Approved"`, "graph complete"))
	w.appendRaw(t, line("9", issue1, "loop.claim", `"node":"design","status":"pass"`, "graph complete"))
	w.appendRaw(t, `not json at all`)
	w.appendRaw(t, line("6", issue1, "github.set-labels", `"labels":["loop:implementation"],"replacePrefix":"loop:"`, "graph complete"))
	w.appendRaw(t, line("7", issue1, "github.add-comment", `"body":"design-approval approved by @alice\n`+hooks.Marker+`"`, "graph complete"))
	w.appendRaw(t, line("8", issue1, "github.add-comment", `"body":"Which backend?\n`+hooks.Marker+`"`, "ask"))
	w.appendRaw(t, line("9", issue1, "loop.ask", `"question":"And which region?"`, "mcp"))
	w.appendRaw(t, line("10", issue1, "loop.claim", `"node":"design","status":"pass"`, "graph complete")) // a claim still lands
	p := w.performer(t)
	p.Poll()
	require.NoError(t, p.Close())

	require.Empty(t, w.labels(t, 2), "another work item's ticket is untouched")
	require.Empty(t, w.comments(t, 2))
	require.Equal(t, []string{"loop:design"}, w.labels(t, 1), "the recompute's label, never the retired line's")
	var bodies []string
	for _, c := range w.comments(t, 1) {
		bodies = append(bodies, c.Body)
		require.True(t, hooks.SelfAuthored(c.Body))
		require.NotContains(t, c.Body, "Approved")
		require.NotContains(t, c.Body, "approved by @alice")
	}
	require.Len(t, bodies, 3, "two questions and the claim's review request")
	require.Contains(t, bodies[0], "a question from the agent")
	require.Contains(t, bodies[0], "> Which backend?")
	require.Contains(t, bodies[1], "> And which region?")
	require.Contains(t, bodies[2], "ready for review")
	var reasons []string
	for _, e := range w.sink.Events() {
		if e.Name == outbox.EventRefused {
			r, _ := e.Get("reason")
			reasons = append(reasons, r.(string))
		}
	}
	require.Len(t, reasons, 7)
	require.Contains(t, reasons[0], "is not the session's")
	require.Contains(t, reasons[1], "is not a request an agent's session may make")
	require.Contains(t, reasons[2], "self-authored marker")
	require.Contains(t, reasons[3], "<session>-<line>")
	require.Contains(t, reasons[4], "not an intent")
	require.Contains(t, reasons[5], "retired outbox format")
	require.Contains(t, reasons[6], "retired outbox format")
	require.Equal(t, 3, w.judged, "the claim and the two retired lines were recomputed")

	// Refusals are durable too: a restart does not log them again.
	n := len(w.sink.Events())
	p2 := w.performer(t)
	p2.Poll()
	require.NoError(t, p2.Close())
	require.Len(t, w.sink.Events(), n)
}

// A claim the recompute does not bear out is refused with what was asked
// and what the recompute says; without a judge every claim is refused.
func TestAClaimTheRecomputeRefusesHasNoEffect(t *testing.T) {
	tests := []struct {
		name    string
		verdict func(loop.Intent) outbox.Verdict
		judge   bool
		reason  string
	}{
		{"refused by the recompute", func(loop.Intent) outbox.Verdict {
			return outbox.Verdict{Refused: "the claim is about tasks-breakdown, which loopd's recompute has not reached",
				Fields: []graph.Field{{Key: "recomputed_node", Value: "design-approval"}}}
		}, true, "has not reached"},
		{"no judge", nil, false, "no recompute"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.verdict = tc.verdict
			w.claim(t)
			p := w.performer(t)
			if !tc.judge {
				var err error
				p, err = outbox.New(outbox.Config{StateRoot: w.root}, outbox.Deps{Integrations: w.set, Sink: w.sink, Clock: graph.SystemClock{},
					Sessions: outbox.SessionsFunc(func(string) ([]workitem.Ref, error) { r, _ := workitem.Parse(issue1); return []workitem.Ref{r}, nil })})
				require.NoError(t, err)
			}
			p.Poll()
			require.NoError(t, p.Close())
			require.Empty(t, w.writes(), "nothing reaches the ticket")
			require.Equal(t, 1, w.sink.Count(outbox.EventRefused))
			e := w.sink.Events()[len(w.sink.Events())-1]
			r, _ := e.Get("reason")
			require.Contains(t, r, tc.reason)
			if tc.judge {
				got, _ := e.Get("recomputed_node")
				require.Equal(t, "design-approval", got)
			}
		})
	}
}

// An unknown session's outbox is refused wholesale; a symlink planted as
// the intents file is not read.
func TestUnknownSessionAndLinks(t *testing.T) {
	w := newWorld(t)
	other := loop.NewAskRecorder(loop.ManagedSession{SessionID: "stranger", WorkItem: "issue-1", StateRoot: w.root}, "ask", nil)
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
	w.sim.InjectFault(githubsim.Fault{PathContains: "/labels", Status: 404, Times: 1})
	w.claim(t)
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
