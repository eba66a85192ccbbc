package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// serveAPI serves an apiserver.Server on a real unix socket in a private
// directory and returns the socket path.
func serveAPI(t testing.TB, b apiserver.Backend) string {
	t.Helper()
	return serveAPIOn(t, b, graph.SystemClock{})
}

// serveAPIOn is serveAPI with the API's clock (the queue's age is read on
// it).
func serveAPIOn(t testing.TB, b apiserver.Backend, clock graph.Clock) string {
	t.Helper()
	dir := shortdir.New(t)
	sock := filepath.Join(dir, api.SocketName)
	ln, err := apiserver.ListenUnix(sock)
	require.NoError(t, err)
	mux := http.NewServeMux()
	a, err := apiserver.New(apiserver.Config{Clock: clock}, b)
	require.NoError(t, err)
	mux.Handle(api.Prefix+"/", a)
	// As loopd serves it: every peer is identified by the socket; this one
	// (the test process) is testOperator.
	srv := &http.Server{Handler: apiserver.Authenticated(mux), ConnContext: apiserver.PeerContext(func(apiserver.Peer) (string, error) { return testOperator, nil })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

// testOperator is the identity serveAPI's socket gives its peers.
const testOperator = "os-user:ops"

// normalJSON decodes JSON for comparison, with the repository path replaced.
func normalJSON(t *testing.T, data []byte, repo string) any {
	t.Helper()
	var v any
	s := strings.ReplaceAll(string(data), repo, "<repo>")
	require.NoError(t, json.Unmarshal([]byte(s), &v), "JSON: %s", data)
	return v
}

// TestAPIGraphVerbsAgreeWithTheCLI drives two identical repositories, one
// with loopctl's verbs in-process and one through the API over its socket,
// step by step, and requires the same JSON at every step.
func TestAPIGraphVerbsAgreeWithTheCLI(t *testing.T) {
	cliRepo, apiRepo := newRepo(t), newRepo(t)
	cliTickets, apiTickets := graphtest.NewTickets(), graphtest.NewTickets()
	f, io := testFactory(t, cliRepo, cliTickets)
	sock := serveAPI(t, apiserver.Backend{Graphs: &apiserver.Graphs{Integrations: apiTickets, Clock: f.Clock}})
	c := api.NewSocketClient(sock)
	ctx := context.Background()
	req := api.GraphRequest{Repo: apiRepo, WorkItem: "issue-42"}

	steps := []struct {
		name   string
		argv   []string
		method string
		path   string
		query  url.Values
		body   any
	}{
		{"check", []string{"check", "issue-42", "--format", "json"}, "POST", "/check", nil, api.CheckRequest{GraphRequest: req}},
		{"check --recompute", []string{"check", "issue-42", "--recompute", "--format", "json"}, "POST", "/check", nil, api.CheckRequest{GraphRequest: req, Recompute: true}},
		{"show", []string{"graph", "show", "--format", "json"}, "GET", "/graph", nil, nil},
		{"show --loop", []string{"graph", "show", "--format", "json", "--loop", "pdlc-pr-loop"}, "GET", "/graph", url.Values{"loop": {"pdlc-pr-loop"}}, nil},
		{"complete before start", []string{"graph", "complete", "issue-42", "--actor", "agent"}, "POST", "/graph/complete", nil, api.CompleteRequest{GraphRequest: req, Actor: "agent"}},
		{"force", []string{"graph", "force", "issue-42", "--to", "requirements-definition", "--reason", "agreed offline", "--actor", testOperator}, "POST", "/graph/force", nil, api.ForceRequest{GraphRequest: req, To: "requirements-definition", Reason: "agreed offline"}},
		{"status", []string{"graph", "status", "issue-42", "--format", "json"}, "POST", "/graph/status", nil, req},
		{"show --work-item", []string{"graph", "show", "--format", "json", "--work-item", "issue-42"}, "GET", "/graph", url.Values{"repo": {apiRepo}, "workItem": {"issue-42"}}, nil},
		{"skip", []string{"graph", "skip", "issue-42", "--node", "design", "--reason", "docs only", "--actor", testOperator}, "POST", "/graph/skip", nil, api.SkipRequest{GraphRequest: req, Nodes: []string{"design"}, Reason: "docs only"}},
		{"complete", []string{"graph", "complete", "issue-42", "--actor", "agent"}, "POST", "/graph/complete", nil, api.CompleteRequest{GraphRequest: req, Actor: "agent"}},
		{"advance at a gate", []string{"graph", "advance", "issue-42"}, "POST", "/graph/advance", nil, req},
		{"check after", []string{"check", "issue-42", "--format", "json"}, "POST", "/check", nil, api.CheckRequest{GraphRequest: req}},
	}
	for _, st := range steps {
		io.out.Reset()
		io.err.Reset()
		Main(append([]string{"loopctl"}, st.argv...), f)
		require.NotEmpty(t, io.out.String(), "%s: the CLI printed nothing (stderr: %s)", st.name, io.err.String())
		got, err := c.Raw(ctx, st.method, st.path, st.query, st.body)
		require.NoError(t, err, st.name)
		require.Equal(t, normalJSON(t, io.out.Bytes(), cliRepo), normalJSON(t, got, apiRepo), "%s: the API and the CLI disagree", st.name)
	}
	require.Equal(t, cliTickets.Comments("github:acme/widgets#42"), apiTickets.Comments("github:acme/widgets#42"), "the same side effects on the ticket")

	// A repository that does not exist: repoResolved false from both.
	io.out.Reset()
	Main([]string{"loopctl", "check", "issue-42", "--repo", filepath.Join(cliRepo, "missing"), "--format", "json"}, f)
	got, err := c.Raw(ctx, "POST", "/check", nil, api.CheckRequest{GraphRequest: api.GraphRequest{Repo: filepath.Join(apiRepo, "missing"), WorkItem: "issue-42"}})
	require.NoError(t, err)
	require.Equal(t, normalJSON(t, io.out.Bytes(), cliRepo), normalJSON(t, got, apiRepo))
}

func TestAPIGraphVerbsRefuseBadInput(t *testing.T) {
	repo := newRepo(t)
	sock := serveAPI(t, apiserver.Backend{Graphs: &apiserver.Graphs{Integrations: graphtest.NewTickets()}})
	c := api.NewSocketClient(sock)
	ctx := context.Background()
	for _, tc := range []struct {
		name, path string
		body       any
		status     int
		detail     string
	}{
		{"relative repo", "/check", map[string]any{"repo": "rel", "workItem": "issue-42"}, 400, "absolute path"},
		{"no work item", "/check", map[string]any{"repo": repo}, 400, "workItem is required"},
		{"unknown field", "/check", map[string]any{"repo": repo, "workItem": "issue-42", "recomptue": true}, 400, "unknown field"},
		{"bad id", "/check", map[string]any{"repo": repo, "workItem": "../etc"}, 400, "invalid work item id"},
		{"force without reason", "/graph/force", map[string]any{"repo": repo, "workItem": "issue-42", "toNode": "design"}, 400, "a reason is required"},
		{"force to unknown", "/graph/force", map[string]any{"repo": repo, "workItem": "issue-42", "toNode": "desgin", "reason": "x"}, 400, "declared nodes are"},
		{"advance unstarted", "/graph/advance", map[string]any{"repo": repo, "workItem": "issue-42"}, 400, "has not entered the graph; start it first (the daemon does on `the-loop start`, or `loopctl graph run`)"},
		{"skip nothing", "/graph/skip", map[string]any{"repo": repo, "workItem": "issue-42", "reason": "x"}, 400, "at least one node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Raw(ctx, "POST", tc.path, nil, tc.body)
			var ae *api.APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.status, ae.Status, ae.Detail)
			require.Contains(t, ae.Detail, tc.detail)
		})
	}

	// A held lock is a conflict, for a claim as for every verb.
	unlock, err := loop.NewStore(repo, "docs/specs").Lock(ctx, "issue-42", time.Second)
	require.NoError(t, err)
	defer unlock()
	for _, path := range []string{"/graph/complete", "/graph/advance"} {
		_, err = c.Raw(ctx, "POST", path, nil, map[string]any{"repo": repo, "workItem": "issue-42"})
		var ae *api.APIError
		require.ErrorAs(t, err, &ae, path)
		require.Equal(t, 409, ae.Status, ae.Detail)
		require.Contains(t, ae.Detail, "another theloop process holds the graph-state lock", path)
	}
}

// fakeSessions is a session registry in memory.
type fakeSessions struct{ recs []sessions.Record }

func (s *fakeSessions) ListSessions(_ context.Context, status string) ([]sessions.Record, error) {
	var out []sessions.Record
	for _, r := range s.recs {
		if status == "" || string(r.Status) == status {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *fakeSessions) find(ref string) (int, error) {
	for i, r := range s.recs {
		if r.Item.String() == ref {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: %s", sessions.ErrNoRecord, ref)
}

func (s *fakeSessions) Session(_ context.Context, ref string) (sessions.Record, error) {
	i, err := s.find(ref)
	if err != nil {
		return sessions.Record{}, err
	}
	return s.recs[i], nil
}

func (s *fakeSessions) ControlSession(_ context.Context, ref, verb, actor string, _ bool) (api.ControlResult, error) {
	i, err := s.find(ref)
	if err != nil {
		return api.ControlResult{}, err
	}
	effect := "noop"
	if verb == "pause" && s.recs[i].Status == sessions.StatusActive {
		s.recs[i].Status, effect = sessions.StatusPaused, "paused"
	}
	return api.ControlResult{Ref: ref, Verb: verb, Effect: effect + " by " + actor}, nil
}

func (s *fakeSessions) AttachCommand(_ context.Context, ref string) (string, error) {
	i, err := s.find(ref)
	if err != nil {
		return "", err
	}
	return "tmux attach -t " + s.recs[i].TmuxName, nil
}

func (s *fakeSessions) LinkPR(_ context.Context, ref, pr string) (api.LinkPRResult, error) {
	if _, err := s.find(ref); err != nil {
		return api.LinkPRResult{}, err
	}
	return api.LinkPRResult{Ref: ref, PullRequest: "github:acme/widgets" + pr, Linked: true}, nil
}

func (s *fakeSessions) ResetSession(_ context.Context, ref, actor string, _ api.ResetRequest) (api.SessionResult, error) {
	i, err := s.find(ref)
	if err != nil {
		return api.SessionResult{}, err
	}
	prev := s.recs[i].SessionID
	s.recs[i].SessionID = "0c6f4d1e-0000-4000-8000-000000000002"
	return api.SessionResult{Ref: ref, Verb: "reset", Effect: "reset", Actor: actor, Session: s.recs[i].TmuxName, Tmux: "live",
		HarnessSessionID: s.recs[i].SessionID, PreviousSessionID: prev, Artifacts: []string{"docs/specs/issue-42/requirements.md"}}, nil
}

func (s *fakeSessions) RegisterSession(_ context.Context, ref, actor string, req api.RegisterRequest) (api.SessionResult, error) {
	item, err := workitem.Parse(ref)
	if err != nil {
		return api.SessionResult{}, err
	}
	s.recs = append(s.recs, sessions.Record{Item: item, Harness: "claude", SessionID: req.HarnessSessionID, TmuxName: sessions.TmuxName(item), Cwd: req.Cwd, Status: sessions.StatusActive})
	return api.SessionResult{Ref: ref, Verb: "register", Effect: "registered", Actor: actor, Session: sessions.TmuxName(item), Tmux: "absent", HarnessSessionID: req.HarnessSessionID}, nil
}

func (s *fakeSessions) CloseSession(_ context.Context, ref, actor string, req api.CloseRequest) (api.SessionResult, error) {
	i, err := s.find(ref)
	if err != nil {
		return api.SessionResult{}, err
	}
	s.recs[i].Status = sessions.StatusClosed
	tmux := "absent"
	if req.KeepTmux != nil && *req.KeepTmux {
		tmux = "dead"
	}
	return api.SessionResult{Ref: ref, Verb: "close", Effect: "closed", Actor: actor, Session: s.recs[i].TmuxName, Tmux: tmux}, nil
}

type fakeQueue struct{ dead []queue.DeadLetter }

func (q *fakeQueue) Stats(context.Context) (queue.Stats, error) {
	return queue.Stats{Depth: 3, Oldest: time.Date(2026, 5, 4, 8, 59, 0, 0, time.UTC), Dead: uint64(len(q.dead))}, nil
}
func (q *fakeQueue) DeadLetters(context.Context) ([]queue.DeadLetter, error) { return q.dead, nil }
func (q *fakeQueue) Replay(_ context.Context, seq uint64) error {
	for i, d := range q.dead {
		if d.Seq == seq {
			q.dead = append(q.dead[:i], q.dead[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("dead letter %d: %w", seq, queue.ErrNotFound)
}

func TestSessionsQueueAndDaemonVerbsCallTheSocket(t *testing.T) {
	item, err := workitem.Parse("github:acme/widgets#42")
	require.NoError(t, err)
	created := time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC)
	pr, err := workitem.Parse("github:acme/widgets#57")
	require.NoError(t, err)
	sess := &fakeSessions{recs: []sessions.Record{{Item: item, Harness: "claude", SessionID: "0c6f4d1e-0000-4000-8000-000000000001", TmuxName: sessions.TmuxName(item), Cwd: "/ws/acme/widgets/issue-42", Status: sessions.StatusActive, Created: created,
		PullRequests: []sessions.PRLink{{PR: pr, Branch: "feature-csv", Linked: created, Declined: sessions.DeclinedSharedWorktree}}}}}
	q := &fakeQueue{dead: []queue.DeadLetter{{Seq: 7, DeliveryID: "d-1", OriginalSeq: 3, Attempts: 5, Reason: "boom", At: created}}}
	clock := graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))
	sock := serveAPIOn(t, apiserver.Backend{Sessions: sess, Queue: q, Status: func(context.Context) api.Status {
		return api.Status{Version: "test", PID: 1, StateRoot: "/state", Webhook: "http://127.0.0.1:8787/gh-webhook", LiveSessions: 1}
	}}, clock)
	c := api.NewSocketClient(sock)
	ctx := context.Background()
	f, io := testFactory(t, t.TempDir(), nil)
	run := func(args ...string) int {
		io.out.Reset()
		io.err.Reset()
		return Main(append([]string{"loopctl"}, append(args, "--socket", sock)...), f)
	}

	// --format json prints exactly what the API answers.
	for _, tc := range []struct {
		argv  []string
		path  string
		query url.Values
	}{
		{[]string{"sessions", "list"}, "/sessions", nil},
		{[]string{"sessions", "list", "--status", "closed"}, "/sessions", url.Values{"status": {"closed"}}},
		{[]string{"sessions", "show", item.String()}, "/sessions/one", url.Values{"ref": {item.String()}}},
		{[]string{"sessions", "attach", item.String()}, "/sessions/attach", url.Values{"ref": {item.String()}}},
		{[]string{"daemon", "status"}, "/status", nil},
		{[]string{"queue", "dead"}, "/queue/dead", nil},
	} {
		require.Equal(t, exitOK, run(append(tc.argv, "--format", "json")...), io.err.String())
		want, err := c.Raw(ctx, "GET", tc.path, tc.query, nil)
		require.NoError(t, err)
		require.JSONEq(t, string(want), io.out.String(), strings.Join(tc.argv, " "))
	}

	// --state-root reaches <state root>/loopd.sock on every verb that talks
	// to loopd, as the README says.
	for _, argv := range [][]string{
		{"sessions", "list"}, {"sessions", "show", item.String()}, {"sessions", "attach", item.String()},
		{"daemon", "status"}, {"queue", "status"}, {"queue", "dead"},
	} {
		io.out.Reset()
		io.err.Reset()
		require.Equal(t, exitOK, Main(append(append([]string{"loopctl"}, argv...), "--state-root", filepath.Dir(sock)), f), "%v: %s", argv, io.err.String())
		require.NotEmpty(t, io.out.String(), argv)
	}

	// --jq and --template read the same JSON.
	require.Equal(t, exitOK, run("sessions", "list", "--jq", ".[0].workItem.ref"), io.err.String())
	require.Equal(t, "github:acme/widgets#42\n", io.out.String())
	require.Equal(t, exitOK, run("daemon", "status", "--template", "{{.version}}"), io.err.String())
	require.NotEmpty(t, io.out.String())
	require.Equal(t, exitRefused, run("sessions", "list", "--jq", ".", "--format", "table"), "--jq reads JSON")

	require.Equal(t, exitOK, run("sessions", "list"))
	require.Contains(t, io.out.String(), "github:acme/widgets#42")
	require.Contains(t, io.out.String(), "active")
	require.Equal(t, exitOK, run("sessions", "show", item.String()))
	require.Contains(t, io.out.String(), "linked PR:  github:acme/widgets#57 branch feature-csv, no own session: shared-worktree\n")
	require.Equal(t, exitOK, run("sessions", "attach", item.String()))
	require.Equal(t, "tmux attach -t "+sessions.TmuxName(item)+"\n", io.out.String())
	require.Equal(t, exitOK, run("sessions", "pause", item.String()))
	require.Equal(t, "github:acme/widgets#42 pause: paused by "+testOperator+"\n", io.out.String(), "the socket's identity is the actor")
	require.Equal(t, exitRefused, run("sessions", "resume", item.String(), "--actor", "dana"), "an actor other than the caller is refused")
	require.Contains(t, io.err.String(), "the actor comes from the caller's identity")
	require.Equal(t, sessions.StatusPaused, sess.recs[0].Status)
	require.Equal(t, sessions.StatusPaused, sess.recs[0].Status)
	require.Equal(t, exitRefused, run("sessions", "stop", "github:acme/widgets#9"), "an unknown session is refused")
	require.Contains(t, io.err.String(), "no session record")
	require.Equal(t, exitRefused, run("sessions", "stop"), "a ref is required")
	require.Equal(t, exitOK, run("sessions", "link-pr", item.String(), "--pull-request", "#57"), io.err.String())
	require.Equal(t, "github:acme/widgets#42: github:acme/widgets#57 linked\n", io.out.String())
	require.Equal(t, exitOK, run("sessions", "link-pr", "--work-item", item.String(), "-p", "#57", "--format", "json"), io.err.String())
	require.JSONEq(t, `{"ref":"github:acme/widgets#42","pullRequest":"github:acme/widgets#57","linked":true}`, io.out.String())
	require.NotEqual(t, exitOK, run("sessions", "link-pr", item.String()), "--pull-request is required")

	// reset, register and close: one API call each, the caller's identity
	// the actor, the answer printed or passed through --format json / --jq.
	require.Equal(t, exitOK, run("sessions", "reset", item.String()), io.err.String())
	require.Contains(t, io.out.String(), "github:acme/widgets#42 reset: reset (tmux "+sessions.TmuxName(item)+", live, conversation 0c6f4d1e-0000-4000-8000-000000000002)\n")
	require.Contains(t, io.out.String(), "replaced conversation 0c6f4d1e-0000-4000-8000-000000000001\n")
	require.Contains(t, io.out.String(), "artifact: docs/specs/issue-42/requirements.md\n")
	wd := t.TempDir()
	f.Getwd = func() (string, error) { return wd, nil }
	require.Equal(t, exitOK, run("sessions", "register", "github:acme/widgets#43", "--harness-session-id", "0c6f4d1e-0000-4000-8000-000000000003", "--cwd", "sub/..", "--jq", ".effect"), io.err.String())
	require.Equal(t, "registered\n", io.out.String())
	require.Equal(t, wd, sess.recs[1].Cwd, "a relative --cwd is sent absolute and clean")
	require.NotEqual(t, exitOK, run("sessions", "register", "github:acme/widgets#43"), "--harness-session-id is required")
	require.Equal(t, exitOK, run("sessions", "close", "github:acme/widgets#43", "--keep-tmux", "--format", "json"), io.err.String())
	require.JSONEq(t, `{"ref":"github:acme/widgets#43","verb":"close","effect":"closed","actor":"`+testOperator+`","session":"`+sessions.TmuxName(sess.recs[1].Item)+`","tmux":"dead"}`, io.out.String())
	require.Equal(t, sessions.StatusClosed, sess.recs[1].Status)
	require.Equal(t, exitRefused, run("sessions", "close", "github:acme/widgets#9"), "an unknown session is refused")

	require.Equal(t, exitOK, run("queue", "status"))
	require.Contains(t, io.out.String(), "3 pending")
	require.Contains(t, io.out.String(), "1 dead letter(s)")
	require.Equal(t, exitOK, run("queue", "dead"))
	require.Contains(t, io.out.String(), "d-1")
	require.Equal(t, exitOK, run("queue", "replay", "7"))
	require.Empty(t, q.dead)
	require.Equal(t, exitRefused, run("queue", "replay", "7"), "a replayed dead letter is gone")
	require.Equal(t, exitRefused, run("queue", "replay", "x"))

	require.Equal(t, exitOK, run("daemon", "status"))
	require.Contains(t, io.out.String(), "loopd test (pid 1)")

	// Nothing listening: daemon status fails (1), the others are refused (2).
	missing := filepath.Join(t.TempDir(), "loopd.sock")
	io.err.Reset()
	require.Equal(t, exitFailed, Main([]string{"loopctl", "daemon", "status", "--socket", missing}, f))
	require.Contains(t, io.err.String(), "not reachable")
	require.Equal(t, exitRefused, Main([]string{"loopctl", "sessions", "list", "--socket", missing}, f))
}

func TestServiceVerbsFindTheSocketUnderTheStateRoot(t *testing.T) {
	f, io := testFactory(t, t.TempDir(), nil)
	// testFactory's CLI config names a state root; nothing listens there.
	require.Equal(t, exitFailed, Main([]string{"loopctl", "daemon", "status"}, f))
	require.Contains(t, io.err.String(), api.SocketName)
	// --url needs the token from the environment.
	require.Equal(t, exitRefused, Main([]string{"loopctl", "daemon", "status", "--url", "http://127.0.0.1:1"}, f))
	require.Contains(t, io.err.String(), "THE_LOOP_SERVICE_TOKEN")
}

var _ graph.Sink = (*apiserver.Stream)(nil)
