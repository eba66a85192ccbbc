package sessions

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/plugin"
)

// buildLoopGate builds the real loop-gate binary into a temp dir: the
// program a spawned session's Stop hook must point at.
func buildLoopGate(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH; cannot build loop-gate for the hook test")
	}
	bin := filepath.Join(t.TempDir(), "bin dir", "loop-gate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/theloop-dev/theloop/cmd/loop-gate").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// TestSpawnedSessionRunsTheLoopPlugin: in real tmux, with the fake claude,
// a spawned session's Claude settings enable theloop's own plugin from the
// local marketplace (not the Python the-loop's), and the plugin's
// SessionStart and Stop hooks run: the Stop hook is the installed loop-gate,
// and it answers as Claude Code expects.
func TestSpawnedSessionRunsTheLoopPlugin(t *testing.T) {
	gate := buildLoopGate(t)
	tmux := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	reg, err := OpenRegistry(RegistryDir(t.TempDir()))
	require.NoError(t, err)
	home := t.TempDir()
	env := ClaudeEnvironmentFromEnv(func(string) string { return "" }, home, "")
	env.GateProgram = gate
	cfg := DefaultManagerConfig()
	cfg.ResumeProbe = time.Second
	m, err := NewManager(cfg, Deps{
		Tmux: tmux, Registry: reg,
		Harnesses: []Harness{&ClaudeCode{Env: env}},
		Observer:  &recordingObserver{},
		LookPath: func(name string) (string, error) {
			if name == "claude" {
				return fake.bin, nil
			}
			return "", exec.ErrNotFound
		},
	})
	require.NoError(t, err)

	item := mustItem(t, "github:octo/repo#7")
	cwd := workdir(t, "issue-7", "requirements.md")
	require.NoError(t, os.MkdirAll(filepath.Join(cwd, ".the-loop"), 0o755))
	res, err := m.Spawn(context.Background(), SpawnRequest{Item: item, Cwd: cwd, Prompt: "/the-loop:work-on issue-7"})
	require.NoError(t, err)
	fake.waitReceived(t, res.Record.SessionID, "/the-loop:work-on issue-7")

	settings := readJSON(t, env.SettingsFile)
	require.Equal(t, true, settings["enabledPlugins"].(map[string]any)[plugin.ID])
	require.NotContains(t, settings["enabledPlugins"], "the-loop@the-loop")
	mkts := settings["extraKnownMarketplaces"].(map[string]any)
	require.Equal(t, map[string]any{"source": map[string]any{"source": "directory", "path": env.MarketplaceDir}}, mkts[plugin.MarketplaceName])
	require.NotContains(t, mkts, "the-loop", "the Python marketplace is no longer referenced")

	var hooks struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	raw, err := os.ReadFile(filepath.Join(env.MarketplaceDir, plugin.Name, "hooks", "hooks.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &hooks))
	stop := hooks.Hooks["Stop"][0].Hooks[0].Command
	require.Equal(t, plugin.GateCommand(gate, "claude"), stop, "the Stop hook is the installed loop-gate")
	start := hooks.Hooks["SessionStart"][0].Hooks[0].Command

	// Run both hooks the way Claude Code does: through the shell, in the
	// session's directory, with the session's environment.
	sh := func(command, stdin string) string {
		c := exec.Command("sh", "-c", command)
		c.Dir = cwd
		c.Env = append(os.Environ(), sessionEnv(item, res.Record.SessionID, "")...)
		c.Env = append(c.Env, "HOME="+home)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.Output()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	require.Contains(t, sh(start, ""), "/the-loop:work-on")
	payload := `{"session_id":"` + res.Record.SessionID + `","hook_event_name":"Stop","stop_hook_active":false,"cwd":"` + cwd + `"}`
	out := sh(stop, payload)
	if strings.TrimSpace(out) != "" {
		var answer map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &answer), "loop-gate answers Claude Code in JSON: %s", out)
	}

	// Outside a repository that runs the-loop the reminder stays silent.
	require.NoError(t, os.RemoveAll(filepath.Join(cwd, ".the-loop")))
	require.Empty(t, strings.TrimSpace(sh(start, "")))
}
