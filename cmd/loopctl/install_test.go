package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// installWorld is a home directory and a repository with a subdirectory to
// run from.
type installWorld struct {
	home, repo, sub string
}

func newInstallWorld(t *testing.T) installWorld {
	t.Helper()
	w := installWorld{repo: t.TempDir()}
	require.NoError(t, os.Mkdir(filepath.Join(w.repo, ".git"), 0o755))
	w.sub = filepath.Join(w.repo, "docs", "specs")
	require.NoError(t, os.MkdirAll(w.sub, 0o755))
	return w
}

// install runs `loopctl install args...` from the repository's
// subdirectory.
func (w *installWorld) install(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	f, io := testFactory(t, w.sub, nil)
	if w.home == "" {
		w.home, _ = f.HomeDir()
	}
	home := w.home
	f.HomeDir = func() (string, error) { return home, nil }
	code = Main(append([]string{"loopctl", "install"}, args...), f)
	return code, io.out.String(), io.err.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestInstallParsesFlags(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want installOptions
		code int
	}{
		{nil, installOptions{Harness: "claude", Scope: "user", Command: "loop-gate"}, 0},
		{[]string{"--harness", "cursor", "--scope", "project", "--dry-run", "--command", "/opt/bin/loop-gate", "--repo", "/r"},
			installOptions{Harness: "cursor", Scope: "project", DryRun: true, Command: "/opt/bin/loop-gate", CommandSet: true, Repo: "/r"}, 0},
		{[]string{"--harness", "codex"}, installOptions{}, exitRefused},
		{[]string{"--scope", "system"}, installOptions{}, exitRefused},
		{[]string{"--command", ""}, installOptions{}, exitRefused},
		{[]string{"--command", "loop-gate\nrm -rf /"}, installOptions{}, exitRefused},
		{[]string{"--repo", "/r"}, installOptions{}, exitRefused},
		{[]string{"extra"}, installOptions{}, exitRefused},
		{[]string{"--bogus"}, installOptions{}, exitRefused},
	} {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			f, io := testFactory(t, t.TempDir(), nil)
			var got *installOptions
			app := newApp(f)
			for i, c := range app.Commands {
				if c.Name == "install" {
					app.Commands[i] = newInstallCmd(f, func(o *installOptions) error { got = o; return nil })
				}
			}
			code := mainWith(app, append([]string{"loopctl", "install"}, tc.argv...), f)
			require.Equal(t, tc.code, code, io.err.String())
			if tc.code != 0 {
				require.Nil(t, got)
				require.NotEmpty(t, io.err.String(), "a refusal says why")
				return
			}
			require.NotNil(t, got)
			got.IO, got.Factory = IOStreams{}, nil
			require.Equal(t, tc.want, *got)
		})
	}
}

const claudeFresh = `{
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "loop-gate claude"
          }
        ]
      }
    ]
  }
}
`

const cursorFresh = `{
  "version": 1,
  "hooks": {
    "stop": [
      {
        "command": "loop-gate cursor"
      }
    ]
  }
}
`

func TestInstallFreshFiles(t *testing.T) {
	for _, tc := range []struct {
		args []string
		path func(w installWorld) string
		want string
	}{
		{nil, func(w installWorld) string { return filepath.Join(w.home, ".claude", "settings.json") }, claudeFresh},
		{[]string{"--scope", "project"}, func(w installWorld) string { return filepath.Join(w.repo, ".claude", "settings.json") }, claudeFresh},
		{[]string{"--harness", "cursor"}, func(w installWorld) string { return filepath.Join(w.home, ".cursor", "hooks.json") }, cursorFresh},
		{[]string{"--harness", "cursor", "--scope", "project"}, func(w installWorld) string { return filepath.Join(w.repo, ".cursor", "hooks.json") }, cursorFresh},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			w := newInstallWorld(t)
			code, out, errOut := w.install(t, tc.args...)
			require.Equal(t, 0, code, errOut)
			path := tc.path(w)
			require.Equal(t, tc.want, readFile(t, path))
			require.Contains(t, out, path+": added the")
			require.Contains(t, errOut, "loop-gate is not on PATH", "the default command is checked against PATH")
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(readFile(t, path)), &v))
		})
	}
}

// A settings file in Claude Code's own layout: every byte of it survives,
// the hook is appended to the existing Stop hooks.
const claudeExisting = `{
  "model": "opus",
  "permissions": {
    "allow": ["Bash(npm test:*)"],
    "deny": []
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "echo \u003cpre\u003e"
          }
        ]
      }
    ],
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done",
            "timeout": 5
          }
        ]
      }
    ]
  },
  "cleanupPeriodDays": 1.50
}
`

const claudeExistingDiff = `@@ -25,6 +25,14 @@
             "timeout": 5
           }
         ]
+      },
+      {
+        "hooks": [
+          {
+            "type": "command",
+            "command": "loop-gate claude"
+          }
+        ]
       }
     ]
   },
`

func TestInstallPreservesOtherSettingsAndIsIdempotent(t *testing.T) {
	w := newInstallWorld(t)
	w.install(t, "--dry-run") // fixes w.home
	path := filepath.Join(w.home, ".claude", "settings.json")
	write(t, w.home, ".claude/settings.json", claudeExisting)
	require.NoError(t, os.Chmod(path, 0o600))

	// Dry run: the diff, and nothing written.
	code, out, errOut := w.install(t, "--dry-run")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "--- "+path+"\n+++ "+path+"\n"+claudeExistingDiff+"dry run: "+path+" not written\n", out)
	require.Equal(t, claudeExisting, readFile(t, path))

	code, _, errOut = w.install(t)
	require.Equal(t, 0, code, errOut)
	got := readFile(t, path)
	want := strings.Replace(claudeExisting, `            "timeout": 5
          }
        ]
      }`, `            "timeout": 5
          }
        ]
      },
      {
        "hooks": [
          {
            "type": "command",
            "command": "loop-gate claude"
          }
        ]
      }`, 1)
	require.Equal(t, want, got, "only the new hook's lines are added")
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file keeps its permissions")

	// Twice: nothing changes, nothing is written.
	code, out, errOut = w.install(t)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "already runs \"loop-gate claude\" as the Claude Code Stop hook; nothing to do")
	st2, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, os.SameFile(st, st2), "an up-to-date file is not rewritten")
	require.Equal(t, got, readFile(t, path))

	code, out, _ = w.install(t, "--dry-run")
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to do")
}

func TestInstallRecognisesAnExistingGate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		harness  string
		existing string
		args     []string
		want     string // the file after, "" for unchanged
		out      string
	}{
		{
			name:     "an absolute path is kept when --command is not given",
			existing: `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/usr/local/bin/loop-gate claude"}]}]}}`,
			out:      `already runs "/usr/local/bin/loop-gate claude"`,
		},
		{
			name:     "--command replaces it in place",
			existing: `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/usr/local/bin/loop-gate claude","timeout":30}]}]}}`,
			args:     []string{"--command", "/opt/the loop/loop-gate"},
			want:     "{\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"'/opt/the loop/loop-gate' claude\",\n            \"timeout\": 30\n          }\n        ]\n      }\n    ]\n  }\n}\n",
			out:      `Stop hook "/usr/local/bin/loop-gate claude" → "'/opt/the loop/loop-gate' claude"`,
		},
		{
			name:     "the wrong harness argument is fixed, the program kept",
			existing: `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"'/x y/loop-gate' cursor"}]}]}}`,
			want:     "{\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"'/x y/loop-gate' claude\"\n          }\n        ]\n      }\n    ]\n  }\n}\n",
		},
		{
			name:     "duplicates go (each would count an attempt), other hooks stay",
			existing: `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"loop-gate claude"},{"type":"command","command":"say done"}]},{"hooks":[{"type":"command","command":"loop-gate"}]}]}}`,
			want:     "{\n  \"hooks\": {\n    \"Stop\": [\n      {\"hooks\":[{\"type\":\"command\",\"command\":\"loop-gate claude\"},{\"type\":\"command\",\"command\":\"say done\"}]}\n    ]\n  }\n}\n",
			out:      `removed a duplicate loop-gate Stop hook ("loop-gate")`,
		},
		{
			name:     "cursor: version added, other events and keys kept",
			harness:  "cursor",
			existing: "{\n    \"hooks\": {\n        \"afterFileEdit\": [{\"command\": \"fmt\"}],\n        \"stop\": [{\"command\": \"/usr/local/bin/loop-gate cursor\", \"loop_limit\": 4}]\n    }\n}\n",
			want:     "{\n    \"version\": 1,\n    \"hooks\": {\n        \"afterFileEdit\": [{\"command\": \"fmt\"}],\n        \"stop\": [{\"command\": \"/usr/local/bin/loop-gate cursor\", \"loop_limit\": 4}]\n    }\n}\n",
			out:      `added "version": 1`,
		},
		{
			name:     "cursor: already installed",
			harness:  "cursor",
			existing: `{"version": 1, "hooks": {"stop": [{"command": "loop-gate cursor"}]}}`,
			out:      "nothing to do",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newInstallWorld(t)
			rel := ".claude/settings.json"
			args := append([]string{"--scope", "project"}, tc.args...)
			if tc.harness == "cursor" {
				rel = ".cursor/hooks.json"
				args = append(args, "--harness", "cursor")
			}
			write(t, w.repo, rel, tc.existing)
			code, out, errOut := w.install(t, args...)
			require.Equal(t, 0, code, errOut)
			want := tc.want
			if want == "" {
				want = tc.existing
			}
			require.Equal(t, want, readFile(t, filepath.Join(w.repo, filepath.FromSlash(rel))))
			require.Contains(t, out, tc.out)
		})
	}
}

func TestInstallRefusesMalformedFiles(t *testing.T) {
	for _, tc := range []struct {
		name, content, err string
	}{
		{"not JSON", "{\n  \"hooks\": {\n    \"Stop\": [\n  }\n", "the file is not valid JSON: line 4, column 3"},
		{"not an object", `["hooks"]`, "the file is an array, not a JSON object"},
		{"hooks not an object", `{"hooks": []}`, "hooks is an array, not a JSON object"},
		{"Stop not an array", `{"hooks": {"Stop": {"command": "x"}}}`, "hooks.Stop is an object, not an array"},
		{"a duplicate key", `{"hooks": {}, "hooks": {}}`, `the file has the key "hooks" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newInstallWorld(t)
			write(t, w.repo, ".claude/settings.json", tc.content)
			path := filepath.Join(w.repo, ".claude", "settings.json")
			for _, args := range [][]string{{"--scope", "project"}, {"--scope", "project", "--dry-run"}} {
				code, out, errOut := w.install(t, args...)
				require.Equal(t, exitFailed, code)
				require.Empty(t, out)
				require.Contains(t, errOut, path+": "+tc.err)
				require.Contains(t, errOut, "fix the file by hand (nothing was written)")
				require.Equal(t, tc.content, readFile(t, path), "never overwritten")
			}
		})
	}
}

func TestInstallDryRunOfANewFile(t *testing.T) {
	w := newInstallWorld(t)
	code, out, errOut := w.install(t, "--harness", "cursor", "--scope", "project", "--dry-run")
	require.Equal(t, 0, code, errOut)
	path := filepath.Join(w.repo, ".cursor", "hooks.json")
	wantDiff := "--- /dev/null\n+++ " + path + "\n@@ -0,0 +1,10 @@\n"
	for _, l := range strings.SplitAfter(strings.TrimSuffix(cursorFresh, "\n"), "\n") {
		wantDiff += "+" + l
	}
	require.Equal(t, wantDiff+"\ndry run: "+path+" not written\n", out)
	_, err := os.Stat(filepath.Dir(path))
	require.True(t, os.IsNotExist(err), "a dry run creates nothing")
}

func TestInstallWhere(t *testing.T) {
	t.Run("project scope outside a repository", func(t *testing.T) {
		w := newInstallWorld(t)
		w.sub = t.TempDir()
		code, _, errOut := w.install(t, "--scope", "project")
		require.Equal(t, exitFailed, code)
		require.Contains(t, errOut, "no git repository at or above "+w.sub+"; run it inside the repository or pass --repo")
	})
	t.Run("--repo", func(t *testing.T) {
		w := newInstallWorld(t)
		other := newInstallWorld(t)
		code, _, errOut := w.install(t, "--scope", "project", "--repo", other.sub)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, claudeFresh, readFile(t, filepath.Join(other.repo, ".claude", "settings.json")))
	})
	t.Run("a symbolic link is edited where it points", func(t *testing.T) {
		w := newInstallWorld(t)
		w.install(t, "--dry-run")
		dotfiles := t.TempDir()
		write(t, dotfiles, "claude-settings.json", `{"model": "opus"}`)
		require.NoError(t, os.MkdirAll(filepath.Join(w.home, ".claude"), 0o755))
		link := filepath.Join(w.home, ".claude", "settings.json")
		require.NoError(t, os.Symlink(filepath.Join(dotfiles, "claude-settings.json"), link))
		code, _, errOut := w.install(t)
		require.Equal(t, 0, code, errOut)
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		require.NotZero(t, fi.Mode()&os.ModeSymlink, "the link stays a link")
		require.Contains(t, readFile(t, filepath.Join(dotfiles, "claude-settings.json")), `"command": "loop-gate claude"`)
	})
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

// FuzzInstallClaudeHook: whatever the settings file holds, installing
// either refuses it or yields valid JSON that runs loop-gate exactly once on
// Stop, keeps every other top-level key, and is a fixed point.
func FuzzInstallClaudeHook(f *testing.F) {
	for _, s := range []string{"", "{}", claudeExisting, `{"hooks":{"Stop":[{"hooks":[{"command":"loop-gate"}]},{"hooks":[{"command":"loop-gate x"}]}]}}`,
		`{"hooks":null}`, `{"hooks":{"Stop":[1,"x",{"hooks":7},{"hooks":[null]}]}}`, `{"a":{"b":[1.5e3,"\u00e9"]}}`, `[`, `{"hooks":{"Stop":null}}`} {
		f.Add([]byte(s))
	}
	want := func(existing string) string { return "loop-gate claude" }
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, changes, err := installClaudeHook(data, want)
		if err != nil {
			return
		}
		if len(changes) == 0 && !bytes.Equal(out, data) {
			t.Fatal("no change reported but the content differs")
		}
		var before, after map[string]json.RawMessage
		if len(bytes.TrimSpace(data)) > 0 {
			if json.Unmarshal(data, &before) != nil {
				t.Fatalf("accepted invalid input %q", data)
			}
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("output is not a JSON object: %v\n%s", err, out)
		}
		for k, v := range before {
			if k == "hooks" {
				continue
			}
			if !bytes.Equal(compact(t, v), compact(t, after[k])) {
				t.Fatalf("key %q changed: %s → %s", k, v, after[k])
			}
		}
		// Counted with exact key names, as Claude Code reads them (Go's
		// struct decoding would fold case).
		var settings map[string]any
		_ = json.Unmarshal(out, &settings)
		n := 0
		hooks, _ := settings["hooks"].(map[string]any)
		groups, _ := hooks["Stop"].([]any)
		for _, g := range groups {
			group, _ := g.(map[string]any)
			entries, _ := group["hooks"].([]any)
			for _, e := range entries {
				entry, _ := e.(map[string]any)
				if s, ok := entry["command"].(string); ok && isGateCommand(s) {
					n++
				}
			}
		}
		if n != 1 {
			t.Fatalf("%d loop-gate hooks after install:\n%s", n, out)
		}
		again, _, changes, err := installClaudeHook(out, want)
		if err != nil || len(changes) != 0 || !bytes.Equal(again, out) {
			t.Fatalf("second install: err %v, changes %v", err, changes)
		}
	})
}

func compact(t *testing.T, v []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
