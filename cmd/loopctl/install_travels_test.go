package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// committedRepo is a real repository with one commit (a tracked file in .claude,
// so that install edits a directory git knows).
func committedRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-q", "--allow-empty", "-m", "init"}} {
		if args[0] == "add" {
			write(t, repo, "README.md", "hi\n")
		}
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return repo
}

func gitStatus(t *testing.T, repo string) string {
	t.Helper()
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all", "--ignored")
	cmd.Dir = repo
	out, err := cmd.Output()
	require.NoError(t, err)
	return string(out)
}

// fileTree lists every file and directory under dir with its content.
func fileTree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := rel + "/"
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line = rel + " " + string(b)
		}
		lines = append(lines, line)
		return nil
	}))
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestProjectInstallTravelsAndUninstallLeavesNoTrace: for every harness,
// `install --scope project` writes into the repository no path of the
// installer's home; `uninstall` leaves `git status` clean and HOME as it
// was; both are idempotent.
func TestProjectInstallTravelsAndUninstallLeavesNoTrace(t *testing.T) {
	for _, harness := range []string{"claude", "cursor", "codex", "gemini"} {
		t.Run(harness, func(t *testing.T) {
			repo := committedRepo(t)
			w := installWorld{repo: repo, sub: repo}
			w.install(t, "--dry-run", "--harness", harness) // fixes w.home
			homeBefore := fileTree(t, w.home)
			require.Empty(t, gitStatus(t, repo))

			for i := 0; i < 2; i++ {
				code, _, errOut := w.install(t, "--harness", harness, "--scope", "project")
				require.Equal(t, 0, code, errOut)
			}
			status := gitStatus(t, repo)
			require.NotEmpty(t, status, "install wrote the hook file")
			for _, line := range strings.Split(strings.TrimSpace(status), "\n") {
				b, err := os.ReadFile(filepath.Join(repo, strings.TrimSpace(line[3:])))
				require.NoError(t, err, line)
				require.NotContains(t, string(b), w.home, "%s: a committed file names the installer's home", line)
			}

			code, out, errOut := w.uninstall(t, "--harness", harness, "--scope", "project")
			require.Equal(t, 0, code, errOut)
			require.Empty(t, gitStatus(t, repo), "uninstall leaves the checkout as it was:\n%s", out)
			require.Equal(t, homeBefore, fileTree(t, w.home), "uninstall leaves HOME as it was:\n%s", out)

			code, out, errOut = w.uninstall(t, "--harness", harness, "--scope", "project")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "nothing of theloop's to remove")
			require.Empty(t, gitStatus(t, repo))
		})
	}
}

// TestUninstallFinishesWhatAFirstLeft: the Gemini extension lives in HOME;
// an uninstall whose hook is already gone still removes it, and says so.
func TestUninstallFinishesWhatAFirstLeft(t *testing.T) {
	for _, scope := range []string{"user", "project"} {
		t.Run(scope, func(t *testing.T) {
			repo := committedRepo(t)
			w := installWorld{repo: repo, sub: repo}
			code, _, errOut := w.install(t, "--harness", "gemini", "--scope", scope)
			require.Equal(t, 0, code, errOut)
			ext := filepath.Join(w.home, ".gemini", "extensions", "the-loop")
			require.DirExists(t, ext)
			settings := filepath.Join(w.home, ".gemini", "settings.json")
			if scope == "project" {
				settings = filepath.Join(repo, ".gemini", "settings.json")
			}
			require.NoError(t, os.WriteFile(settings, []byte("{}\n"), 0o644)) // the hook removed by hand

			code, out, errOut := w.uninstall(t, "--harness", "gemini", "--scope", scope)
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "removed "+ext)
			require.NoDirExists(t, ext)
		})
	}
	t.Run("a project uninstall keeps what the user-scope install uses", func(t *testing.T) {
		repo := committedRepo(t)
		w := installWorld{repo: repo, sub: repo}
		for _, scope := range []string{"user", "project"} {
			code, _, errOut := w.install(t, "--harness", "gemini", "--scope", scope)
			require.Equal(t, 0, code, errOut)
		}
		code, out, errOut := w.uninstall(t, "--harness", "gemini", "--scope", "project")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "stays: your user-scope install still uses it")
		require.DirExists(t, filepath.Join(w.home, ".gemini", "extensions", "the-loop"))
	})
}

// Both scopes for Claude Code run the gate twice per stop: install says so,
// whichever comes second.
func TestInstallWarnsOfTwoClaudeGates(t *testing.T) {
	repo := committedRepo(t)
	w := installWorld{repo: repo, sub: repo}
	code, _, errOut := w.install(t)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = w.install(t, "--scope", "project")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "runs the gate too")
	code, _, errOut = w.install(t)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "runs the gate as a Stop hook too")
}
