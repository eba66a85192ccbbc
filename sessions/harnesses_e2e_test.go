package sessions

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/fakeclaude"
)

// TestManagerHostsEachHarness drives each non-Claude adapter through real
// tmux with a stand-in on its binary's name: spawn with the prompt pasted
// (a verified receipt), a delivery into the live session, then a crash and
// the next delivery: Gemini resumes its conversation by id, Codex the
// checkout's latest (resume --last), Cursor starts fresh pointed at the
// artifacts.
func TestManagerHostsEachHarness(t *testing.T) {
	for _, tc := range []struct {
		h       Harness
		spawn   func(id string) []string
		resume  func(id string) []string
		resumes bool
	}{
		{&Gemini{}, func(id string) []string { return []string{"--session-id", id, "--skip-trust"} },
			func(id string) []string { return []string{"--resume", id, "--skip-trust"} }, true},
		{&Codex{}, func(string) []string { return []string{"--enable", "hooks", "--dangerously-bypass-hook-trust"} },
			func(string) []string {
				return []string{"resume", "--last", "--enable", "hooks", "--dangerously-bypass-hook-trust"}
			}, true},
		{&Cursor{}, func(string) []string { return nil }, nil, false},
	} {
		t.Run(tc.h.Name(), func(t *testing.T) {
			t.Parallel()
			requireTool(t, "bash")
			ctx := context.Background()
			root := t.TempDir()
			bin, err := fakeclaude.InstallAs(root, tc.h.Binary())
			require.NoError(t, err)
			fake := &fakeClaude{root: root, bin: bin}
			tm := newTestTmux(t, nil)
			reg, err := OpenRegistry(RegistryDir(t.TempDir()))
			require.NoError(t, err)
			cfg := DefaultManagerConfig()
			cfg.DefaultHarness = tc.h.Name()
			cfg.ResumeProbe = time.Second
			obs := &recordingObserver{}
			m, err := NewManager(cfg, Deps{Tmux: tm, Registry: reg, Harnesses: []Harness{&ClaudeCode{}, tc.h}, Observer: obs,
				LookPath: func(name string) (string, error) {
					if name == tc.h.Binary() {
						return bin, nil
					}
					return "", exec.ErrNotFound
				}})
			require.NoError(t, err)
			item := mustItem(t, "github:octo/repo#7")
			cwd := workdir(t, "issue-7", "requirements.md")

			res, err := m.Spawn(ctx, SpawnRequest{Item: item, Cwd: cwd, Prompt: "Start the-loop on github:octo/repo#7"})
			require.NoError(t, err)
			require.True(t, res.Receipt.Verified(), "%+v", res.Receipt)
			require.Equal(t, tc.h.Name(), res.Record.Harness)
			id := res.Record.SessionID
			runs := fake.runs(t)
			require.Len(t, runs, 1)
			require.Equal(t, tc.spawn(id), emptyAsNil(runs[0].Args), "no prompt on the command line")
			require.Equal(t, id, runs[0].SessionEnv)
			require.Equal(t, filepath.Clean(cwd), runs[0].Cwd)
			convo := id
			if tc.h.Name() != "gemini" {
				convo = "" // the CLI keeps its own conversation id
			}
			fake.waitReceived(t, convo, "Start the-loop on github:octo/repo#7")

			d, err := m.Deliver(ctx, item, "a comment arrived")
			require.NoError(t, err)
			require.True(t, d.Receipt.Verified())
			fake.waitReceived(t, convo, "a comment arrived")

			killHarness(t, tm, TmuxName(item))
			d, err = m.Deliver(ctx, item, "after the crash")
			require.NoError(t, err)
			require.NotNil(t, d.Respawn)
			require.Equal(t, tc.resumes, d.Respawn.Resumed)
			runs = fake.runs(t)
			require.Len(t, runs, 2)
			if tc.resumes {
				require.Equal(t, tc.resume(id), runs[1].Args)
				require.Equal(t, id, d.Record.SessionID)
				fake.waitReceived(t, convo, "after the crash")
				return
			}
			require.NotNil(t, d.Respawn.Fallback)
			require.Equal(t, "the harness cannot resume sessions", d.Respawn.Fallback.Reason)
			require.Equal(t, []string{"docs/specs/issue-7/requirements.md"}, d.Respawn.Fallback.Artifacts)
			require.NotEqual(t, id, d.Record.SessionID)
			require.True(t, d.Receipt.Verified())
		})
	}
}

func emptyAsNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
