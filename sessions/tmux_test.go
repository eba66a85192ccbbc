package sessions

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/run/runtest"
)

func spawnFake(t *testing.T, tm *Tmux, fake *fakeClaude, name, id string) {
	t.Helper()
	require.NoError(t, tm.Spawn(context.Background(), SpawnSpec{
		Name: name, Cwd: t.TempDir(),
		Env:  []string{"THE_LOOP_WORK_ITEM=issue-1", "THE_LOOP_SESSION_ID=" + id},
		Argv: []string{fake.bin, "--session-id", id},
	}))
	require.NoError(t, tm.WaitReady(context.Background(), name))
}

func TestTmuxSpawnDeliverReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-github-o-r-1", "conv-1")

	runs := fake.runs(t)
	require.Len(t, runs, 1)
	require.Equal(t, []string{"--session-id", "conv-1"}, runs[0].Args)
	require.Equal(t, "issue-1", runs[0].WorkItem)
	require.Equal(t, "conv-1", runs[0].SessionEnv)

	r, err := tm.Deliver(ctx, "loop-github-o-r-1", "first line\nsecond line")
	require.NoError(t, err)
	require.True(t, r.Verified(), "receipt: %+v", r)
	require.True(t, r.Seen, "the fake echoes, so the text itself must be seen")
	fake.waitReceived(t, "conv-1", "second line")
	require.Equal(t, []string{"first line", "second line"}, fake.received(t, "conv-1"))

	// Delivering the same text again is seen again (the receipt counts
	// occurrences, it is not fooled by the earlier copy on screen).
	r, err = tm.Deliver(ctx, "loop-github-o-r-1", "second line")
	require.NoError(t, err)
	require.True(t, r.Seen)

	entries, err := os.ReadDir(tm.cfg.TempDir)
	require.NoError(t, err)
	require.Empty(t, entries, "paste files are removed")
	require.Empty(t, strings.TrimSpace(tmuxRaw(t, tm, "list-buffers")), "paste buffers are removed")
}

func TestTmuxDeliverStripsControlCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-x-1", "conv-1")
	// ESC[201~ would end the bracketed paste early; ^C would interrupt the
	// harness; ^M would submit half the text.
	r, err := tm.Deliver(ctx, "loop-x-1", "safe\x1b[201~ then\x03 more\rnext")
	require.NoError(t, err)
	require.True(t, r.Verified())
	fake.waitReceived(t, "conv-1", "next")
	require.Equal(t, []string{"safe[201~ then more", "next"}, fake.received(t, "conv-1"))
	l, _ := tm.Probe(ctx, "loop-x-1")
	require.Equal(t, LivenessLive, l)

	_, err = tm.Deliver(ctx, "loop-x-1", "\x1b\x07 \n\t")
	require.ErrorIs(t, err, ErrEmptyDelivery)
}

func TestSanitizePaste(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a\r\nb\rc\n\n":       "a\nb\nc",
		"tab\tkept":           "tab\tkept",
		"\x1b[31mred\x1b[0m":  "[31mred[0m",
		"bad \xff utf8":       "bad \uFFFD utf8",
		"c1 \u009b control":   "c1  control",
		"  leading kept  \n ": "  leading kept",
	} {
		require.Equal(t, want, SanitizePaste(in), "%q", in)
	}
}

func TestTmuxLiveness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)

	l, err := tm.Probe(ctx, "loop-x-1")
	require.NoError(t, err)
	require.Equal(t, LivenessAbsent, l, "no server at all means absent")

	spawnFake(t, tm, fake, "loop-x-15", "conv-15")
	l, err = tm.Probe(ctx, "loop-x-15")
	require.NoError(t, err)
	require.Equal(t, LivenessLive, l)
	l, err = tm.Probe(ctx, "loop-x-1")
	require.NoError(t, err)
	require.Equal(t, LivenessAbsent, l, "loop-x-1 must not prefix-match loop-x-15")

	killHarness(t, tm, "loop-x-15")
	l, err = tm.Probe(ctx, "loop-x-15")
	require.NoError(t, err)
	require.Equal(t, LivenessDead, l, "remain-on-exit keeps a dead pane")

	_, err = tm.Probe(ctx, "loop-x.1")
	require.ErrorIs(t, err, ErrInvalidName)
}

func TestTmuxWithoutRemainOnExitDeadIsAbsent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, func(c *TmuxConfig) { c.RemainOnExit = false })
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-x-1", "conv-1")
	tmuxRaw(t, tm, "new-session", "-d", "-s", "keepalive") // keep the server up
	killHarness(t, tm, "loop-x-1")
	l, err := tm.Probe(ctx, "loop-x-1")
	require.NoError(t, err)
	require.Equal(t, LivenessAbsent, l)
}

func TestTmuxProbeUnknownIsNeverAbsent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const prefix = "tmux -L s "
	exit := func(stderr string) error {
		return &run.ExitError{Result: run.Result{ExitCode: 1, Stderr: []byte(stderr)}}
	}
	tests := []struct {
		name  string
		stubs func(s *runtest.Stub)
	}{
		{"has-session times out", func(s *runtest.Stub) {
			s.Register(prefix+"has-session", run.Result{}, run.ErrTimeout)
		}},
		{"tmux not installed", func(s *runtest.Stub) {
			s.Register(prefix+"has-session", run.Result{}, run.ErrNotFound)
		}},
		{"server refuses", func(s *runtest.Stub) {
			s.Register(prefix+"has-session", run.Result{}, exit("server exited unexpectedly"))
		}},
		{"permission denied", func(s *runtest.Stub) {
			s.Register(prefix+"has-session", run.Result{}, exit("error connecting to /tmp/tmux-0/s (Permission denied)"))
		}},
		{"no panes listed", func(s *runtest.Stub) {
			s.Register(prefix+"has-session", run.Result{}, nil)
			s.Register(prefix+"list-panes", run.Result{Stdout: []byte("\n")}, nil)
		}},
		{"list-panes times out", func(s *runtest.Stub) {
			s.Register(prefix+"has-session", run.Result{}, nil)
			s.Register(prefix+"list-panes", run.Result{}, run.ErrTimeout)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := runtest.NewStub(t)
			tt.stubs(stub)
			tm, err := NewTmux(TmuxConfig{Socket: "s"}, stub)
			require.NoError(t, err)
			l, err := tm.Probe(ctx, "loop-x-1")
			require.Equal(t, LivenessUnknown, l)
			require.Error(t, err)
			// Spawn refuses without ever running new-session (the strict
			// stub would fail the test on it) and kills nothing.
			err = tm.Spawn(ctx, SpawnSpec{Name: "loop-x-1", Cwd: t.TempDir(), Argv: []string{"/bin/true", "x"}})
			require.ErrorIs(t, err, ErrSessionUnknown)
		})
	}
}

func TestParsePaneDead(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]Liveness{
		"0\n": LivenessLive, "1\n": LivenessDead, "1\n1\n": LivenessDead, "1\n0\n": LivenessLive,
		"": LivenessUnknown, "\n \n": LivenessUnknown, "garbage\n": LivenessLive, "1\n?\n": LivenessLive,
	} {
		require.Equal(t, want, parsePaneDead(out), "%q", out)
	}
}

func FuzzParsePaneDead(f *testing.F) {
	for _, s := range []string{"0\n", "1\n1\n", "", "1\r\n", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		l := parsePaneDead(out)
		// Dead is only ever concluded from lines that all say exactly 1.
		if l == LivenessDead {
			for _, line := range strings.Split(out, "\n") {
				if s := strings.TrimSpace(line); s != "" && s != "1" {
					t.Fatalf("%q judged dead", out)
				}
			}
		}
	})
}

func TestTmuxSpawnNeverReplacesLiveSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-x-1", "conv-1")
	pid := panePID(t, tm, "loop-x-1")

	err := tm.Spawn(ctx, SpawnSpec{Name: "loop-x-1", Cwd: t.TempDir(), Argv: []string{fake.bin, "--session-id", "conv-2"}})
	require.ErrorIs(t, err, ErrSessionLive)
	require.Equal(t, pid, panePID(t, tm, "loop-x-1"), "the live harness is untouched")
	require.Len(t, fake.runs(t), 1)
}

func TestTmuxSpawnClearsDeadSession(t *testing.T) {
	t.Parallel()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-x-1", "conv-1")
	killHarness(t, tm, "loop-x-1")
	spawnFake(t, tm, fake, "loop-x-1", "conv-2")
	require.Len(t, fake.runs(t), 2)
}

func TestTmuxKillOnlyLoopSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	tmuxRaw(t, tm, "new-session", "-d", "-s", "main")
	spawnFake(t, tm, fake, "loop-x-1", "conv-1")

	require.ErrorIs(t, tm.Kill(ctx, "main"), ErrNotLoopSession)
	tmuxRaw(t, tm, "has-session", "-t", "=main")
	_, err := tm.Deliver(ctx, "main", "hi")
	require.ErrorIs(t, err, ErrNotLoopSession)

	require.NoError(t, tm.Kill(ctx, "loop-x-1"))
	l, err := tm.Probe(ctx, "loop-x-1")
	require.NoError(t, err)
	require.Equal(t, LivenessAbsent, l)
	require.NoError(t, tm.Kill(ctx, "loop-x-1"), "killing an absent session is a no-op")
	tmuxRaw(t, tm, "has-session", "-t", "=main")
}

// tmux splits its argv at any argument ending in ";", so a harness
// argument "x;" followed by "kill-server" would run kill-server.
func TestTmuxRefusesCommandSeparatorArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	tmuxRaw(t, tm, "new-session", "-d", "-s", "bystander")
	for _, argv := range [][]string{
		{"/bin/sleep", "60;", "kill-server"},
		{"/bin/sleep", `60\;`},
	} {
		err := tm.Spawn(ctx, SpawnSpec{Name: "loop-x-1", Cwd: t.TempDir(), Argv: argv})
		require.ErrorIs(t, err, ErrUnsafeArgument)
	}
	err := tm.Spawn(ctx, SpawnSpec{Name: "loop-x-1", Cwd: t.TempDir(), Env: []string{"A=b;"}, Argv: []string{"/bin/sleep", "60"}})
	require.ErrorIs(t, err, ErrUnsafeArgument)
	err = tm.Spawn(ctx, SpawnSpec{Name: "loop-x-1", Cwd: t.TempDir(), Argv: []string{"sleep 60; rm -rf x"}})
	require.ErrorIs(t, err, ErrUnsafeArgument, "a lone command word goes to sh -c")
	tmuxRaw(t, tm, "has-session", "-t", "=bystander")
	l, _ := tm.Probe(ctx, "loop-x-1")
	require.Equal(t, LivenessAbsent, l)
}

func TestTmuxSpawnValidates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	cwd := t.TempDir()
	for name, spec := range map[string]SpawnSpec{
		"not a loop name":  {Name: "main", Cwd: cwd, Argv: []string{"/bin/sleep", "1"}},
		"dotted name":      {Name: "loop-a.b", Cwd: cwd, Argv: []string{"/bin/sleep", "1"}},
		"relative cwd":     {Name: "loop-a", Cwd: "work", Argv: []string{"/bin/sleep", "1"}},
		"missing cwd":      {Name: "loop-a", Cwd: filepath.Join(cwd, "gone"), Argv: []string{"/bin/sleep", "1"}},
		"bad env key":      {Name: "loop-a", Cwd: cwd, Env: []string{"A B=c"}, Argv: []string{"/bin/sleep", "1"}},
		"multi-line value": {Name: "loop-a", Cwd: cwd, Env: []string{"A=b\nc"}, Argv: []string{"/bin/sleep", "1"}},
		"empty argv":       {Name: "loop-a", Cwd: cwd},
	} {
		t.Run(name, func(t *testing.T) {
			require.Error(t, tm.Spawn(ctx, spec))
		})
	}
}

// An operator watching read-only must not be able to break delivery: no
// command the runner uses resolves a client.
func TestTmuxReadOnlyObserverDoesNotBreakDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-x-1", "conv-1")

	host := shortdir.Tmux(t)
	out, err := exec.Command("tmux", "-S", host, "new-session", "-d", "-x", "100", "-y", "30", "--",
		"env", "-u", "TMUX", "tmux", "-S", tm.cfg.SocketPath, "attach-session", "-r", "-t", "=loop-x-1").CombinedOutput()
	require.NoError(t, err, string(out))
	waitFor(t, "a read-only client", func() bool {
		return strings.Contains(tmuxRaw(t, tm, "list-clients", "-F", "#{client_flags}"), "read-only")
	})

	for _, msg := range []string{"while watched", "and again"} {
		r, err := tm.Deliver(ctx, "loop-x-1", msg)
		require.NoError(t, err)
		require.True(t, r.Verified(), "%+v", r)
		fake.waitReceived(t, "conv-1", msg)
	}
}

// Work items whose refs contain "." and ":" get names tmux keeps as they
// are, so probing, delivering and killing find the session.
func TestTmuxNamesWithDotsAndColons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	item := mustItem(t, "github:ghe.corp.example:8443/my.org/my.repo#3")
	name := TmuxName(item)
	require.Equal(t, "loop-github-ghe_corp_example-8443-my_org-my_repo-3", name)
	spawnFake(t, tm, fake, name, "conv-3")
	require.Equal(t, name, strings.TrimSpace(tmuxRaw(t, tm, "list-sessions", "-F", "#{session_name}")))
	r, err := tm.Deliver(ctx, name, "dotted hello")
	require.NoError(t, err)
	require.True(t, r.Verified())
	fake.waitReceived(t, "conv-3", "dotted hello")
	require.NoError(t, tm.Kill(ctx, name))
}

// tmux 3.3 segfaults when paste-buffer targets a dead pane, killing every
// session on the server. Delivery into a dead session must fail cleanly
// and leave the server (and the operator's other sessions) alone.
func TestTmuxDeliverIntoDeadSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, func(c *TmuxConfig) { c.ReceiptTimeout = 2 * time.Second })
	fake := writeFakeClaude(t)
	tmuxRaw(t, tm, "new-session", "-d", "-s", "bystander")
	spawnFake(t, tm, fake, "loop-x-1", "conv-1")
	killHarness(t, tm, "loop-x-1")
	_, err := tm.Deliver(ctx, "loop-x-1", "anyone there?")
	require.ErrorIs(t, err, ErrSessionMissing)
	tmuxRaw(t, tm, "has-session", "-t", "=bystander")
	require.Empty(t, strings.TrimSpace(tmuxRaw(t, tm, "list-buffers")), "the unused buffer is deleted")

	_, err = tm.Deliver(ctx, "loop-x-2", "nobody")
	require.ErrorIs(t, err, ErrSessionMissing)
}

func TestTmuxWaitReadyReportsEarlyExit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-x-1", Cwd: t.TempDir(), Argv: []string{fake.bin, "--resume", "never-seen"}}))
	err := tm.WaitReady(ctx, "loop-x-1")
	require.ErrorIs(t, err, ErrSessionMissing)
	require.Contains(t, err.Error(), "exited during start-up")
}

func TestTmuxWaitReadyOnSilentHarness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, func(c *TmuxConfig) { c.ReadyTimeout = 1500 * time.Millisecond })

	// Silent, then dead: reported as missing, not waited out as "not ready"
	// (a dead pane's screen may stay blank).
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-x-1", Cwd: t.TempDir(), Argv: []string{"/bin/sh", "-c", "sleep 0.3; exit 4"}}))
	require.ErrorIs(t, tm.WaitReady(ctx, "loop-x-1"), ErrSessionMissing)

	// Silent and alive: never ready.
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-x-2", Cwd: t.TempDir(), Argv: []string{"/bin/sleep", "60"}}))
	require.ErrorIs(t, tm.WaitReady(ctx, "loop-x-2"), ErrNotReady)
}

// A harness that exits at once still leaves a dead pane (remain-on-exit is
// set in the same tmux call as new-session), so the spawner sees "dead",
// not "absent", and the operator finds the pane and its exit status.
func TestTmuxInstantExitLeavesDeadPane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	tmuxRaw(t, tm, "new-session", "-d", "-s", "bystander")
	for i := 0; i < 2; i++ {
		require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-x-1", Cwd: t.TempDir(), Argv: []string{"/bin/sh", "-c", "echo last words; exit 1"}}))
		waitFor(t, "the harness to exit", func() bool {
			l, _ := tm.Probe(ctx, "loop-x-1")
			return l != LivenessLive
		})
		l, err := tm.Probe(ctx, "loop-x-1")
		require.NoError(t, err)
		require.Equal(t, LivenessDead, l)
		// (What the pane shows is tmux's business: it may drop output
		// written just before an instant exit.)
		_, err = tm.Capture(ctx, "loop-x-1")
		require.NoError(t, err)
	}
}

func TestNewTmuxValidates(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]TmuxConfig{
		"both sockets":  {Socket: "a", SocketPath: "/tmp/b"},
		"bad socket":    {Socket: "a/b"},
		"relative path": {SocketPath: "tmux.sock"},
		"tiny window":   {Width: 5},
	} {
		_, err := NewTmux(cfg, run.Exec{})
		require.Error(t, err, name)
	}
	_, err := NewTmux(TmuxConfig{}, nil)
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrInvalidName))
}
