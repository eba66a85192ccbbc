package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/run/runtest"
	"github.com/theloop-dev/theloop/workitem"
)

type recordingObserver struct {
	mu  sync.Mutex
	obs []Observation
}

func (r *recordingObserver) Observe(o Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
}

func (r *recordingObserver) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ev []string
	for _, o := range r.obs {
		ev = append(ev, o.Event)
	}
	return ev
}

type managerFixture struct {
	m        *Manager
	tmux     *Tmux
	reg      *Registry
	fake     *fakeClaude
	observed *recordingObserver
	claude   ClaudeEnvironment
}

// newManagerFixture builds a Manager whose LookPath finds the fake claude
// directly, so the test may run in parallel.
func newManagerFixture(t testing.TB, edit func(*ManagerConfig)) *managerFixture {
	return newManagerFixtureWith(t, false, nil, edit)
}

// newManagerFixtureWith can instead put the fake first on PATH (onPath) and
// let the Manager look it up there, as the daemon does; such a test cannot
// run in parallel.
func newManagerFixtureWith(t testing.TB, onPath bool, editTmux func(*TmuxConfig), edit func(*ManagerConfig)) *managerFixture {
	t.Helper()
	f := &managerFixture{tmux: newTestTmux(t, editTmux), observed: &recordingObserver{}}
	var lookPath func(string) (string, error)
	if onPath {
		f.fake = installFakeClaude(t)
	} else {
		f.fake = writeFakeClaude(t)
		lookPath = func(name string) (string, error) {
			if name == "claude" {
				return f.fake.bin, nil
			}
			return "", exec.ErrNotFound
		}
	}
	var err error
	f.reg, err = OpenRegistry(RegistryDir(t.TempDir()))
	require.NoError(t, err)
	home := t.TempDir()
	f.claude = ClaudeEnvironmentFromEnv(func(string) string { return "" }, home, "")
	cfg := DefaultManagerConfig()
	cfg.ResumeProbe = time.Second
	if edit != nil {
		edit(&cfg)
	}
	f.m, err = NewManager(cfg, Deps{
		Tmux: f.tmux, Registry: f.reg,
		Harnesses: []Harness{&ClaudeCode{Env: f.claude}, &Cursor{}},
		Observer:  f.observed,
		LookPath:  lookPath,
	})
	require.NoError(t, err)
	return f
}

// workdir makes a session directory holding the given spec artifacts.
func workdir(t *testing.T, specID string, artifacts ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, a := range artifacts {
		p := filepath.Join(dir, "docs", "specs", specID, a)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("# "+a+"\n"), 0o644))
	}
	return dir
}

func TestManagerSpawnDeliverReceipt(t *testing.T) {
	ctx := context.Background()
	f := newManagerFixtureWith(t, true, nil, nil) // the fake is found on PATH
	item := mustItem(t, "github:octo/repo#5")
	cwd := workdir(t, "issue-5")

	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: cwd, Prompt: "Start the-loop on github:octo/repo#5"})
	require.NoError(t, err)
	require.True(t, res.Receipt.Verified(), "%+v", res.Receipt)
	rec := res.Record
	require.Regexp(t, uuidV4, rec.SessionID)
	require.Equal(t, "loop-github-octo-repo-5", rec.TmuxName)
	require.Equal(t, cwd, rec.Cwd)
	require.Equal(t, StatusActive, rec.Status)
	require.False(t, rec.LastDelivery.IsZero())

	runs := f.fake.runs(t)
	require.Len(t, runs, 1)
	require.Equal(t, []string{"--session-id", rec.SessionID}, runs[0].Args, "no prompt on the command line")
	require.Equal(t, cwd, runs[0].Cwd)
	require.Equal(t, "issue-5", runs[0].WorkItem)
	require.Equal(t, rec.SessionID, runs[0].SessionEnv)
	f.fake.waitReceived(t, rec.SessionID, "Start the-loop on github:octo/repo#5")

	// loop-gate's path: from the Stop payload's session id to the work item.
	found, err := LookupBySessionID(f.reg.Dir(), rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, item, found.Item)

	// Trust was pre-seeded for the cwd in the (test) Claude config.
	user := readJSON(t, f.claude.UserConfigFile)
	require.Contains(t, user["projects"].(map[string]any), cwd)

	d, err := f.m.Deliver(ctx, item, "a new comment arrived")
	require.NoError(t, err)
	require.Nil(t, d.Respawn)
	require.True(t, d.Receipt.Verified())
	f.fake.waitReceived(t, rec.SessionID, "a new comment arrived")
	require.Len(t, f.fake.runs(t), 1)
	require.Equal(t, []string{"workspace.trusted", "session.spawned", "session.delivered", "session.delivered"}, f.observed.events())
}

func TestManagerDeadSessionIsResumed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#5")
	cwd := workdir(t, "issue-5")
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: cwd, Prompt: "begin"})
	require.NoError(t, err)
	id := res.Record.SessionID
	killHarness(t, f.tmux, TmuxName(item))

	d, err := f.m.Deliver(ctx, item, "after the crash")
	require.NoError(t, err)
	require.NotNil(t, d.Respawn)
	require.True(t, d.Respawn.Resumed)
	require.Nil(t, d.Respawn.Fallback)
	require.True(t, d.Receipt.Verified(), "%+v", d.Receipt)
	require.Equal(t, id, d.Record.SessionID, "the same conversation continues")
	f.fake.waitReceived(t, id, "after the crash")

	runs := f.fake.runs(t)
	require.Len(t, runs, 2)
	require.Equal(t, []string{"--resume", id}, runs[1].Args)
	require.Equal(t, cwd, runs[1].Cwd, "resumed in the recorded cwd")
	l, _ := f.tmux.Probe(ctx, TmuxName(item))
	require.Equal(t, LivenessLive, l, "verified alive after start")
	rec, err := f.reg.Get(item)
	require.NoError(t, err)
	require.Empty(t, rec.Fallbacks)
	require.Contains(t, f.observed.events(), "session.respawned")
}

func TestManagerUnknownResumeIDFallsBackToFreshWithArtifacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#5")
	cwd := workdir(t, "issue-5", "requirements.md", "design.md", "execution-log.md", "tasks.md")
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: cwd})
	require.NoError(t, err)
	old := res.Record.SessionID
	require.NoError(t, f.tmux.Kill(ctx, TmuxName(item))) // the whole session is gone…
	f.fake.forget(t, old)                                // …and so is the conversation

	d, err := f.m.Deliver(ctx, item, "please continue")
	require.NoError(t, err)
	rr := d.Respawn
	require.NotNil(t, rr)
	require.False(t, rr.Resumed)
	require.NotNil(t, rr.Fallback)
	require.True(t, d.Receipt.Verified(), "%+v", d.Receipt)
	// No Artifacts function: every markdown file of the spec directory
	// (the daemon passes the graph's produces; loop/daemon tests that).
	wantArtifacts := []string{"docs/specs/issue-5/design.md", "docs/specs/issue-5/execution-log.md", "docs/specs/issue-5/requirements.md", "docs/specs/issue-5/tasks.md"}
	require.Equal(t, wantArtifacts, rr.Fallback.Artifacts)
	require.Equal(t, old, rr.Fallback.PreviousSessionID)
	require.Contains(t, rr.Fallback.Reason, "exited")

	// The fallback is recorded, and the record now names the new
	// conversation.
	rec, err := f.reg.Get(item)
	require.NoError(t, err)
	require.NotEqual(t, old, rec.SessionID)
	require.Regexp(t, uuidV4, rec.SessionID)
	require.Len(t, rec.Fallbacks, 1)
	require.Equal(t, wantArtifacts, rec.Fallbacks[0].Artifacts)
	found, err := LookupBySessionID(f.reg.Dir(), rec.SessionID)
	require.NoError(t, err)
	require.Equal(t, item, found.Item)

	runs := f.fake.runs(t)
	require.Len(t, runs, 3)
	require.Equal(t, []string{"--resume", old}, runs[1].Args)
	require.Equal(t, []string{"--session-id", rec.SessionID}, runs[2].Args)

	// The fresh session was told where its context is, then got the event.
	f.fake.waitReceived(t, rec.SessionID, "please continue")
	got := f.fake.received(t, rec.SessionID)
	for _, a := range wantArtifacts {
		require.Contains(t, got, "- "+a)
	}
	require.True(t, strings.HasPrefix(got[0], "theloop: your previous conversation on github:octo/repo#5 could not be resumed"), got[0])
	require.Contains(t, f.observed.events(), "session.resume_failed")
}

// A resumed harness that outlives the resume probe but dies before it is
// ready is no better than one that could not resume: start fresh.
func TestManagerResumeThatDiesDuringStartUpFallsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, func(c *ManagerConfig) { c.ResumeProbe = 200 * time.Millisecond })
	item := mustItem(t, "github:octo/repo#6")
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: workdir(t, "issue-6", "bugfix.md")})
	require.NoError(t, err)
	old := res.Record.SessionID
	killHarness(t, f.tmux, TmuxName(item))
	f.fake.crashAfterResume(t, old)

	d, err := f.m.Deliver(ctx, item, "still there?")
	require.NoError(t, err)
	require.NotNil(t, d.Respawn)
	require.False(t, d.Respawn.Resumed)
	require.NotNil(t, d.Respawn.Fallback)
	require.Equal(t, "the harness exited while starting the resumed conversation", d.Respawn.Fallback.Reason)
	require.Equal(t, []string{"docs/specs/issue-6/bugfix.md"}, d.Respawn.Fallback.Artifacts)
	f.fake.waitReceived(t, d.Record.SessionID, "still there?")
	require.NotEqual(t, old, d.Record.SessionID)
}

func TestManagerRespawnNeverKillsALiveSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#9")
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: t.TempDir(), Prompt: "hello"})
	require.NoError(t, err)
	pid := panePID(t, f.tmux, TmuxName(item))

	rr, err := f.m.Respawn(ctx, item, "are you there")
	require.NoError(t, err)
	require.True(t, rr.Averted)
	require.False(t, rr.Resumed)
	require.Nil(t, rr.Fallback)
	require.True(t, rr.Receipt.Verified())
	f.fake.waitReceived(t, res.Record.SessionID, "are you there")

	_, err = f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: t.TempDir()})
	require.ErrorIs(t, err, ErrSessionLive)

	require.Equal(t, pid, panePID(t, f.tmux, TmuxName(item)), "the live harness is the same process")
	require.Len(t, f.fake.runs(t), 1, "nothing else was started")
	rec, err := f.reg.Get(item)
	require.NoError(t, err)
	require.Equal(t, res.Record.SessionID, rec.SessionID)
	require.Contains(t, f.observed.events(), "session.respawn_averted")
}

// When tmux cannot say whether a session exists, nothing is spawned over it
// and nothing is killed: the strict stub fails the test on any command
// beyond the probes and the attempted capture.
func TestManagerUnknownSessionIsNeverRespawned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stub := runtest.NewStub(t)
	stub.Register("tmux -L s has-session", run.Result{}, run.ErrTimeout)
	stub.Register("tmux -L s capture-pane", run.Result{}, run.ErrTimeout)
	tm, err := NewTmux(TmuxConfig{Socket: "s"}, stub)
	require.NoError(t, err)
	reg, err := OpenRegistry(t.TempDir())
	require.NoError(t, err)
	m, err := NewManager(DefaultManagerConfig(), Deps{Tmux: tm, Registry: reg, Harnesses: []Harness{&ClaudeCode{}},
		LookPath: func(string) (string, error) { return "/usr/bin/claude", nil }})
	require.NoError(t, err)
	item := mustItem(t, "github:octo/repo#1")
	require.NoError(t, reg.Put(ctx, testRecord(t, item.String(), "id-1")))

	_, err = m.Respawn(ctx, item, "x")
	require.ErrorIs(t, err, ErrSessionUnknown)
	_, err = m.Spawn(ctx, SpawnRequest{Item: item, Cwd: t.TempDir()})
	require.ErrorIs(t, err, ErrSessionUnknown)
	d, err := m.Deliver(ctx, item, "x")
	require.Error(t, err)
	require.Nil(t, d.Respawn, "an unknown session is delivered to, never respawned")
	rec, err := reg.Get(item)
	require.NoError(t, err)
	require.Equal(t, "id-1", rec.SessionID, "the record is untouched")
}

func TestManagerResumeDisabledStartsFresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, func(c *ManagerConfig) { c.ResumeOnRespawn = false })
	item := mustItem(t, "gitlab:gitlab.example/a/b#3") // no spec id, so no artifacts
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: t.TempDir()})
	require.NoError(t, err)
	killHarness(t, f.tmux, TmuxName(item))

	rr, err := f.m.Respawn(ctx, item, "")
	require.NoError(t, err)
	require.NotNil(t, rr.Fallback)
	require.Equal(t, "resuming is turned off", rr.Fallback.Reason)
	require.Empty(t, rr.Fallback.Artifacts)
	runs := f.fake.runs(t)
	require.Len(t, runs, 2, "no resume attempt")
	require.Equal(t, "--session-id", runs[1].Args[0])
	require.Equal(t, "gitlab:gitlab.example/a/b#3", runs[1].WorkItem)
	f.fake.waitReceived(t, rr.Record.SessionID, "There are no artifacts for this work item; start from the work item itself.")
	require.NotEqual(t, res.Record.SessionID, rr.Record.SessionID)
}

func TestManagerRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	reg, err := OpenRegistry(t.TempDir())
	require.NoError(t, err)
	found := func(string) (string, error) { return "/bin/true", nil }
	m, err := NewManager(DefaultManagerConfig(), Deps{Tmux: tm, Registry: reg, Harnesses: []Harness{&ClaudeCode{}, &Cursor{}}, LookPath: found})
	require.NoError(t, err)
	item := mustItem(t, "github:octo/repo#1")

	_, err = m.Spawn(ctx, SpawnRequest{Item: item, Harness: "aider", Cwd: t.TempDir()})
	require.ErrorIs(t, err, ErrUnknownHarness)
	_, err = m.Spawn(ctx, SpawnRequest{Cwd: t.TempDir()})
	require.ErrorIs(t, err, workitem.ErrInvalid)
	_, err = m.Deliver(ctx, item, "x")
	require.ErrorIs(t, err, ErrNoRecord)

	missing := func(string) (string, error) { return "", errors.New("not on PATH") }
	m2, err := NewManager(DefaultManagerConfig(), Deps{Tmux: tm, Registry: reg, Harnesses: []Harness{&ClaudeCode{}}, LookPath: missing})
	require.NoError(t, err)
	_, err = m2.Spawn(ctx, SpawnRequest{Item: item, Cwd: t.TempDir()})
	require.ErrorIs(t, err, ErrHarnessNotFound)
	_, err = reg.Get(item)
	require.ErrorIs(t, err, ErrNoRecord, "refusals write nothing")

	_, err = NewManager(ManagerConfig{DefaultHarness: "cursor"}, Deps{Tmux: tm, Registry: reg, Harnesses: []Harness{&ClaudeCode{}}})
	require.Error(t, err)
	_, err = NewManager(ManagerConfig{SpecDir: "../elsewhere"}, Deps{Tmux: tm, Registry: reg, Harnesses: []Harness{&ClaudeCode{}}})
	require.Error(t, err)
}

func TestManagerFailedSpawnRestoresRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#2")
	prev := testRecord(t, item.String(), "old-conversation")
	prev.Status = StatusClosed
	require.NoError(t, f.reg.Put(ctx, prev))

	_, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: filepath.Join(t.TempDir(), "gone")})
	require.ErrorIs(t, err, ErrCwdMissing)
	rec, err := f.reg.Get(item)
	require.NoError(t, err)
	require.Equal(t, prev, rec)
}

func TestManagerClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#4")
	_, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, f.m.Close(ctx, item, false))
	l, _ := f.tmux.Probe(ctx, TmuxName(item))
	require.Equal(t, LivenessAbsent, l)
	rec, err := f.reg.Get(item)
	require.NoError(t, err)
	require.Equal(t, StatusClosed, rec.Status)
	_, err = f.m.Deliver(ctx, item, "x")
	require.ErrorIs(t, err, ErrSessionClosed)
	_, err = f.m.Respawn(ctx, item, "x")
	require.ErrorIs(t, err, ErrSessionClosed)
}

// killHarnessOnClose: the session is kept for a post-mortem, the harness
// inside it is terminated, and the record says closed.
func TestManagerCloseKeepsTmuxAndTerminatesHarness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#6")
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: t.TempDir(), Prompt: "last words before close"})
	require.NoError(t, err)
	pid := panePID(t, f.tmux, TmuxName(item))
	require.NoError(t, f.m.CloseWith(ctx, item, CloseOptions{KeepTmux: true, KillHarness: true, Grace: 2 * time.Second}))
	l, _ := f.tmux.Probe(ctx, TmuxName(item))
	require.Equal(t, LivenessDead, l, "the tmux session is kept, its harness is gone")
	// tmux reports the pane dead when its pty closes; the harness is then
	// gone, or a zombie until the tmux server reaps it.
	require.Eventually(t, func() bool { return terminated(pid) }, 5*time.Second, 10*time.Millisecond, "the harness process has exited")
	screen, err := f.tmux.Capture(ctx, TmuxName(item))
	require.NoError(t, err)
	require.Contains(t, screen, "last words before close", "the transcript is readable after close")
	rec, err := f.reg.Get(item)
	require.NoError(t, err)
	require.Equal(t, StatusClosed, rec.Status)
	require.Equal(t, res.Record.SessionID, rec.SessionID)
	ev := f.observed.events()
	require.Contains(t, ev, "session.retained")
	require.Contains(t, ev, "session.harness_terminated")
}

// A harness that ignores SIGTERM is killed once the grace period is over.
func TestTerminateHarnessKillsWhatIgnoresSIGTERM(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	name := "loop-github-octo-repo-7"
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: name, Cwd: t.TempDir(), Argv: []string{"bash", "-c", "trap '' TERM; echo stubborn; while :; do sleep 0.1; done"}}))
	waitFor(t, "the stubborn harness to start", func() bool {
		s, _ := tm.Capture(ctx, name)
		return strings.Contains(s, "stubborn")
	})
	got, err := tm.TerminateHarness(ctx, name, 300*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, 1, got.Signalled)
	require.Equal(t, 1, got.Killed, "SIGKILL after the grace period")
	l, _ := tm.Probe(ctx, name)
	require.Equal(t, LivenessDead, l)
	// An absent session is nothing to terminate; a foreign name is refused.
	_, err = tm.TerminateHarness(ctx, "loop-github-octo-repo-8", time.Second)
	require.NoError(t, err)
	_, err = tm.TerminateHarness(ctx, "work", time.Second)
	require.ErrorIs(t, err, ErrNotLoopSession)
}

func TestSeedPrompt(t *testing.T) {
	item := mustItem(t, "github:octo/repo#5")
	fb := Fallback{Reason: "the harness exited within 2s of resuming", Artifacts: []string{"docs/specs/issue-5/bugfix.md"}}
	got := seedPrompt(item, fb, "docs/specs/issue-5", "the event")
	require.Equal(t, "theloop: your previous conversation on github:octo/repo#5 could not be resumed (the harness exited within 2s of resuming), so this is a fresh session.\n"+
		"Before anything else, read these files: they are the work item's record so far.\n"+
		"- docs/specs/issue-5/bugfix.md\n\nthe event", got)
	got = seedPrompt(item, Fallback{Reason: "r"}, "docs/specs/issue-5", "")
	require.True(t, strings.HasSuffix(got, "There are no artifacts under docs/specs/issue-5 yet; start from the work item itself.\n"))
	require.False(t, slices.Contains(strings.Split(got, "\n"), "the event"))
}

func TestSessionEnvCarriesTheStateRoot(t *testing.T) {
	item, err := workitem.Parse("github:octo/repo#15")
	require.NoError(t, err)
	env := sessionEnv(item, "s-1", "/srv/theloop")
	require.Contains(t, env, "THE_LOOP_WORK_ITEM=issue-15")
	require.Contains(t, env, "THE_LOOP_SESSION_ID=s-1")
	require.Contains(t, env, "THE_LOOP_STATE_ROOT=/srv/theloop")
	require.NotContains(t, strings.Join(sessionEnv(item, "s-1", ""), "\n"), "THE_LOOP_STATE_ROOT", "no root configured, none exported")
}

// terminated reports whether the process has exited: gone, or a zombie its
// parent (the tmux server, which reaps it in its own time) has not waited
// for yet.
func terminated(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state …: the state follows the last ')'.
	rest := string(st[strings.LastIndexByte(string(st), ')')+1:])
	f := strings.Fields(rest)
	return len(f) > 0 && f[0] == "Z"
}

// ManagerConfig.Scrub stands between every text and the pane: the prompt
// of a spawn and a later delivery reach the agent without the credential
// they quoted.
func TestManagerScrubsWhatItPastes(t *testing.T) {
	ctx := context.Background()
	const secret = "gh-token-the-daemon-holds-0002"
	f := newManagerFixture(t, func(c *ManagerConfig) {
		c.Scrub = func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	})
	item := mustItem(t, "github:octo/repo#6")
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: workdir(t, "issue-6"), Prompt: "Start; token " + secret})
	require.NoError(t, err)
	f.fake.waitReceived(t, res.Record.SessionID, "Start; token [redacted]")
	_, err = f.m.Deliver(ctx, item, "a comment quoted "+secret)
	require.NoError(t, err)
	f.fake.waitReceived(t, res.Record.SessionID, "a comment quoted [redacted]")
	for _, l := range f.fake.received(t, res.Record.SessionID) {
		require.NotContains(t, l, secret)
	}
}
