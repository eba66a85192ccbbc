package sessions

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A conversation registered from outside is the item's session: the next
// delivery resumes it (claude --resume ID) in the registered checkout under
// the item's own tmux name. Another item may not take its conversation or
// its checkout, force or not.
func TestManagerRegisterThenDeliverResumesTheConversation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#7")
	other := mustItem(t, "github:octo/repo#8")
	cwd := workdir(t, "issue-7")
	id := "6c9e4b3a-1d5f-4a0b-8c7d-2e3f4a5b6c7d"
	// The operator started this conversation in their own terminal: the
	// harness knows it.
	require.NoError(t, os.MkdirAll(filepath.Join(f.fake.root, "conversations"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.fake.root, "conversations", id), nil, 0o644))

	rec, err := f.m.Register(ctx, RegisterRequest{Item: item, SessionID: id, Cwd: cwd})
	require.NoError(t, err)
	require.Equal(t, TmuxName(item), rec.TmuxName)
	require.Equal(t, StatusActive, rec.Status)
	require.Contains(t, f.observed.events(), "session.registered")

	for name, req := range map[string]RegisterRequest{
		"its conversation": {Item: other, SessionID: id, Cwd: t.TempDir(), Force: true},
		"its checkout":     {Item: other, SessionID: "7d0f5c4b-2e6a-4b1c-9d8e-3f4a5b6c7d8e", Cwd: cwd, Force: true},
	} {
		_, err := f.m.Register(ctx, req)
		require.Error(t, err, name)
	}
	_, err = f.m.Register(ctx, RegisterRequest{Item: other, SessionID: id, Cwd: t.TempDir()})
	require.ErrorIs(t, err, ErrSessionOwned)
	_, err = f.m.Register(ctx, RegisterRequest{Item: other, SessionID: "7d0f5c4b-2e6a-4b1c-9d8e-3f4a5b6c7d8e", Cwd: cwd})
	require.ErrorIs(t, err, ErrWorktreeOwned)
	_, err = f.m.Register(ctx, RegisterRequest{Item: other, SessionID: "7d0f5c4b-2e6a-4b1c-9d8e-3f4a5b6c7d8e", Cwd: cwd + "/../" + filepath.Base(cwd)})
	require.ErrorIs(t, err, ErrInvalidName, "an unclean path is refused, not resolved into another item's checkout")

	d, err := f.m.Deliver(ctx, item, "a comment for the registered conversation")
	require.NoError(t, err)
	require.NotNil(t, d.Respawn)
	require.True(t, d.Respawn.Resumed, "the registered conversation is resumed, not replaced")
	runs := f.fake.runs(t)
	require.Len(t, runs, 1)
	require.Equal(t, []string{"--resume", id}, runs[0].Args)
	require.Equal(t, cwd, runs[0].Cwd)
	f.fake.waitReceived(t, id, "a comment for the registered conversation")
}

// Reset replaces a live conversation with a fresh one in the same checkout,
// pointed at the artifacts; a paused or closed session is not reset.
func TestManagerReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#9")
	cwd := workdir(t, "issue-9", "requirements.md")
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: cwd, Prompt: "begin"})
	require.NoError(t, err)
	old := res.Record.SessionID

	rr, err := f.m.Reset(ctx, item, "the operator reset the session", "carry on")
	require.NoError(t, err)
	require.NotEqual(t, old, rr.Record.SessionID)
	require.Equal(t, old, rr.Fallback.PreviousSessionID)
	require.Equal(t, []string{filepath.Join("docs", "specs", "issue-9", "requirements.md")}, rr.Fallback.Artifacts)
	require.True(t, rr.Receipt.Verified(), "%+v", rr.Receipt)
	f.fake.waitReceived(t, rr.Record.SessionID, "theloop: your session on github:octo/repo#9 was reset (the operator reset the session), so this is a fresh conversation at the same node.")
	f.fake.waitReceived(t, rr.Record.SessionID, "- docs/specs/issue-9/requirements.md")
	f.fake.waitReceived(t, rr.Record.SessionID, "carry on")
	runs := f.fake.runs(t)
	require.Len(t, runs, 2)
	require.Equal(t, []string{"--session-id", rr.Record.SessionID}, runs[1].Args, "a fresh conversation, not a resume")
	require.Equal(t, cwd, runs[1].Cwd)

	_, err = f.reg.Update(ctx, item, func(r *Record, _ bool) error { r.Status = StatusPaused; return nil })
	require.NoError(t, err)
	_, err = f.m.Reset(ctx, item, "x", "")
	require.ErrorIs(t, err, ErrSessionPaused)
	require.NoError(t, f.m.Close(ctx, item, false))
	_, err = f.m.Reset(ctx, item, "x", "")
	require.ErrorIs(t, err, ErrSessionClosed)
	_, err = f.m.Reset(ctx, mustItem(t, "github:octo/repo#10"), "x", "")
	require.ErrorIs(t, err, ErrNoRecord)
}

// Whatever can reach the tmux server — an agent's pane can — may start a
// session under another item's name to catch its events. Registering that
// item then refuses: the name is held by nothing the item's record owns.
// Once the squatter is gone, the registration goes through.
func TestManagerRegisterRefusesASquattedTmuxName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newManagerFixture(t, nil)
	item := mustItem(t, "github:octo/repo#11")
	name := TmuxName(item)
	squat := exec.Command("tmux", "-S", f.tmux.Config().SocketPath, "new-session", "-d", "-s", name, "sleep", "600")
	out, err := squat.CombinedOutput()
	require.NoError(t, err, "%s", out)

	req := RegisterRequest{Item: item, SessionID: "8e1a6d5c-3f7b-4c2d-8e9f-4a5b6c7d8e9f", Cwd: workdir(t, "issue-11"), Force: true}
	_, err = f.m.Register(ctx, req)
	require.ErrorIs(t, err, ErrSessionLive)
	require.ErrorContains(t, err, "no live session of github:octo/repo#11 owns it")
	_, err = f.reg.Get(item)
	require.ErrorIs(t, err, ErrNoRecord, "nothing recorded")

	require.NoError(t, f.tmux.Kill(ctx, name))
	rec, err := f.m.Register(ctx, req)
	require.NoError(t, err)
	require.Equal(t, name, rec.TmuxName)
	// Registering the same conversation again keeps its session.
	_, err = f.m.Register(ctx, RegisterRequest{Item: item, SessionID: req.SessionID, Cwd: req.Cwd})
	require.NoError(t, err)
}
