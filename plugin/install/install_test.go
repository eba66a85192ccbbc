package install

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/plugin"
	"github.com/theloop-dev/theloop/run"
)

// recordingRunner records the commands it is asked to run.
type recordingRunner struct{ cmds []run.Cmd }

func (r *recordingRunner) Run(_ context.Context, c run.Cmd) (run.Result, error) {
	r.cmds = append(r.cmds, c)
	return run.Result{}, nil
}

func TestInstallRegistersWithTheClaudeCLI(t *testing.T) {
	w := newWorld(t)
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	w.env["PATH"] = bin
	rec := &recordingRunner{}
	opts := w.options(harnessClaude, scopeUser)
	opts.Runner = rec
	require.NoError(t, Install(opts), w.err.String())
	dir := plugin.MarketplaceDir(func(string) string { return "" }, w.home)
	var argvs []string
	for _, c := range rec.cmds {
		require.Equal(t, filepath.Join(bin, "claude"), c.Name)
		require.Contains(t, c.Env, "HOME="+w.home, "never the real home of whoever runs the tests")
		argvs = append(argvs, strings.Join(c.Args, " "))
	}
	require.Equal(t, []string{
		"plugin marketplace add " + dir + " --scope user",
		"plugin install the-loop@theloop --scope user",
		"plugin update the-loop@theloop --scope user",
	}, argvs)
	require.Contains(t, w.out.String(), "claude: the-loop@theloop installed (user scope)")
}

// FuzzInstallClaudePlugin: whatever the settings file holds, install either
// refuses it or yields valid JSON that enables the plugin, runs no
// loop-gate Stop hook of its own, keeps every other top-level key, and is a
// fixed point; uninstall then install gives the same file again.
func FuzzInstallClaudePlugin(f *testing.F) {
	for _, s := range []string{"", "{}", `{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify-send done","timeout":5}]}]},"cleanupPeriodDays":1.50}`, `{"hooks":{"Stop":[{"hooks":[{"command":"loop-gate"}]},{"hooks":[{"command":"loop-gate x"}]}]}}`,
		`{"hooks":null}`, `{"hooks":{"Stop":[1,"x",{"hooks":7},{"hooks":[null]}]}}`, `{"a":{"b":[1.5e3,"\u00e9"]}}`, `[`, `{"hooks":{"Stop":null}}`,
		`{"enabledPlugins":{"the-loop@theloop":false,"x@y":true}}`, `{"extraKnownMarketplaces":{"theloop":{"source":{"source":"github","repo":"a/b"}}}}`} {
		f.Add([]byte(s))
	}
	const dir = "/home/u/.local/share/theloop/claude-marketplace"
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, changes, err := installClaudePlugin(data, dir)
		if err != nil {
			return
		}
		if len(changes) == 0 && !bytes.Equal(out, data) {
			t.Fatal("no change reported but the content differs")
		}
		var before, after map[string]json.RawMessage
		if len(bytes.TrimSpace(data)) > 0 && json.Unmarshal(data, &before) != nil {
			t.Fatalf("accepted invalid input %q", data)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("output is not a JSON object: %v\n%s", err, out)
		}
		for k, v := range before {
			if k == "hooks" || k == "enabledPlugins" || k == "extraKnownMarketplaces" {
				continue
			}
			if !bytes.Equal(compact(t, v), compact(t, after[k])) {
				t.Fatalf("key %q changed: %s → %s", k, v, after[k])
			}
		}
		var settings struct {
			Enabled map[string]any `json:"enabledPlugins"`
			Hooks   map[string]any `json:"hooks"`
		}
		_ = json.Unmarshal(out, &settings)
		if settings.Enabled[plugin.ID] != true {
			t.Fatalf("not enabled:\n%s", out)
		}
		if groups, ok := settings.Hooks["Stop"].([]any); ok {
			for _, g := range groups {
				group, _ := g.(map[string]any)
				entries, _ := group["hooks"].([]any)
				for _, e := range entries {
					entry, _ := e.(map[string]any)
					if s, ok := entry["command"].(string); ok && plugin.IsGateCommand(s) {
						t.Fatalf("a loop-gate Stop hook is left beside the plugin's:\n%s", out)
					}
				}
			}
		}
		again, _, changes, err := installClaudePlugin(out, dir)
		if err != nil || len(changes) != 0 || !bytes.Equal(again, out) {
			t.Fatalf("second install: err %v, changes %v", err, changes)
		}
		removed, _, err := uninstallClaudePlugin(out, false)
		if err != nil {
			t.Fatalf("uninstall: %v", err)
		}
		re, _, _, err := installClaudePlugin(removed, dir)
		if err != nil || !bytes.Equal(semantic(re), semantic(out)) {
			t.Fatalf("install → uninstall → install differs:\n%s\n%s", out, re)
		}
	})
}

// semantic is b with object keys sorted (key order is not meaning).
func semantic(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

func TestIsGateCommand(t *testing.T) {
	for cmd, want := range map[string]bool{
		"loop-gate":                          true,
		"loop-gate claude":                   true,
		"  /usr/local/bin/loop-gate cursor":  true,
		"'/opt/the loop/loop-gate' claude":   true,
		`"C:\bin\loop-gate.exe" claude`:      true,
		"loop-gate-old claude":               false,
		"python3 hooks/the-loop-gate.py":     false,
		"echo loop-gate":                     false,
		"'unterminated/loop-gate claude":     false,
		"":                                   false,
		"/usr/local/bin/notloop-gate claude": false,
	} {
		require.Equal(t, want, isGateCommand(cmd), "%q", cmd)
	}
}

func compact(t *testing.T, v []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
