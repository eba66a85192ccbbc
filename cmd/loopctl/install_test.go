package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/plugin/install"
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
		want install.Options
		code int
	}{
		{nil, install.Options{Harness: "claude", Scope: "user", Command: "loop-gate"}, 0},
		{[]string{"--harness", "cursor", "--scope", "project", "--dry-run", "--command", "/opt/bin/loop-gate", "--repo", "/r"},
			install.Options{Harness: "cursor", Scope: "project", DryRun: true, Command: "/opt/bin/loop-gate", CommandSet: true, Repo: "/r"}, 0},
		{[]string{"--harness", "aider"}, install.Options{}, exitRefused},
		{[]string{"--scope", "system"}, install.Options{}, exitRefused},
		{[]string{"--command", ""}, install.Options{}, exitRefused},
		{[]string{"--command", "loop-gate\nrm -rf /"}, install.Options{}, exitRefused},
		{[]string{"--repo", "/r"}, install.Options{}, exitRefused},
		{[]string{"extra"}, install.Options{}, exitRefused},
		{[]string{"--bogus"}, install.Options{}, exitRefused},
	} {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			f, io := testFactory(t, t.TempDir(), nil)
			var got *install.Options
			app := newApp(f)
			for i, c := range app.Commands {
				if c.Name == "install" {
					app.Commands[i] = newInstallCmd(f, func(o *install.Options) error { got = o; return nil })
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
			got.IO, got.Env = install.IOStreams{}, nil
			require.Equal(t, tc.want, *got)
		})
	}
}

var cursorFresh = `{
  "version": 1,
  "hooks": {
    "stop": [
      {
        "command": "loop-gate cursor` + jsonGuard + `"
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
			name:     "cursor: version added, other events and keys kept",
			harness:  "cursor",
			existing: "{\n    \"hooks\": {\n        \"afterFileEdit\": [{\"command\": \"fmt\"}],\n        \"stop\": [{\"command\": \"/usr/local/bin/loop-gate cursor" + jsonGuard + "\", \"loop_limit\": 4}]\n    }\n}\n",
			want:     "{\n    \"version\": 1,\n    \"hooks\": {\n        \"afterFileEdit\": [{\"command\": \"fmt\"}],\n        \"stop\": [{\"command\": \"/usr/local/bin/loop-gate cursor" + jsonGuard + "\", \"loop_limit\": 4}]\n    }\n}\n",
			out:      `added "version": 1`,
		},
		{
			name:     "cursor: already installed",
			harness:  "cursor",
			existing: `{"version": 1, "hooks": {"stop": [{"command": "loop-gate cursor` + jsonGuard + `"}]}}`,
			out:      "nothing to do",
		},
		{
			name:     "cursor: an earlier install's line gains the crash guard",
			harness:  "cursor",
			existing: `{"version": 1, "hooks": {"stop": [{"command": "/usr/local/bin/loop-gate cursor"}]}}`,
			want:     "{\n  \"version\": 1,\n  \"hooks\": {\n    \"stop\": [\n      {\n        \"command\": \"/usr/local/bin/loop-gate cursor" + jsonGuard + "\"\n      }\n    ]\n  }\n}\n",
			out:      "stop hook",
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
	require.True(t, strings.HasPrefix(out, wantDiff+"\ndry run: "+path+" not written\n"), out)
	rule := filepath.Join(w.repo, ".cursor", "rules", "the-loop.mdc")
	require.Contains(t, out, "--- /dev/null\n+++ "+rule+"\n")
	require.Contains(t, out, "dry run: "+rule+" not written\n")
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
		require.Equal(t, claudeProjectFresh, readFile(t, filepath.Join(other.repo, ".claude", "settings.json")))
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
		require.Contains(t, readFile(t, filepath.Join(dotfiles, "claude-settings.json")), `"the-loop@theloop": true`)
	})
}

// A relative --command is written as an absolute path (the harness runs
// hooks from the agent's directory), and the user is told. At project scope
// a path inside the repository is named relative to the project where the
// harness says where that is, and refused where it does not.
func TestInstallMakesARelativeCommandAbsolute(t *testing.T) {
	w := newInstallWorld(t)
	code, _, errOut := w.install(t, "--harness", "cursor", "--scope", "project", "--command", "./bin/loop-gate")
	require.Equal(t, exitRefused, code, errOut)
	require.Contains(t, errOut, "put loop-gate on PATH")
	code, _, errOut = w.install(t, "--harness", "gemini", "--scope", "project", "--command", "./bin/loop-gate")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, readFile(t, filepath.Join(w.repo, ".gemini", "settings.json")), `"$GEMINI_PROJECT_DIR/docs/specs/bin/loop-gate gemini`+jsonGuard+`"`)

	code, _, errOut = w.install(t, "--harness", "cursor", "--command", "./bin/loop-gate")
	require.Equal(t, 0, code, errOut)
	want := filepath.Join(w.sub, "bin", "loop-gate")
	require.Contains(t, errOut, "writing "+want)
	require.Contains(t, readFile(t, filepath.Join(w.home, ".cursor", "hooks.json")), want)
	require.NotContains(t, readFile(t, filepath.Join(w.home, ".cursor", "hooks.json")), "./bin/loop-gate")
}
