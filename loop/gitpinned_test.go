package loop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The git loop runs (ChangedWorkItems, the trust anchor read from a base
// revision) runs none of the programs a repository's configuration names:
// each key below, planted in .git/config (directly and through an
// include), would touch the marker if git honoured it.
func TestLoopGitRunsNothingTheRepositoryNames(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx := context.Background()
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".the-loop"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, TrustedKeysFile), []byte("# none\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("* diff=evil filter=evil\n"), 0o644))
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-q", "-m", "base")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "docs", "specs", "issue-1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "docs", "specs", "issue-1", "a.md"), []byte("a\n"), 0o644))
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-q", "-m", "work")

	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	evil := filepath.Join(dir, "evil")
	require.NoError(t, os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755))
	inc := filepath.Join(dir, "inc")
	require.NoError(t, os.WriteFile(inc, []byte("[core]\n\tpager = "+evil+"\n"), 0o644))
	hooks := filepath.Join(dir, "hooks")
	require.NoError(t, os.MkdirAll(hooks, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hooks, "reference-transaction"), []byte("#!/bin/sh\nexec "+evil+"\n"), 0o755))
	f, err := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("[core]\n\tfsmonitor = " + evil + "\n\thooksPath = " + hooks + "\n[diff]\n\texternal = " + evil + "\n[diff \"evil\"]\n\ttextconv = " + evil + "\n\tcommand = " + evil +
		"\n[filter \"evil\"]\n\tsmudge = " + evil + "\n\tclean = " + evil + "\n[include]\n\tpath = " + inc + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r, err := OpenRepo(repo, "")
	require.NoError(t, err)
	changed, err := r.ChangedWorkItems(ctx, nil, "HEAD~1")
	require.NoError(t, err)
	require.Equal(t, []string{"issue-1"}, changed.Present)
	_, err = LoadVerifier(ctx, TrustSource{Base: "HEAD~1", Repo: repo})
	require.ErrorIs(t, err, ErrNoTrustAnchor, "no key in the file, read as committed")
	require.NoFileExists(t, marker)

	// The plant is live for plain git.
	cmd := exec.Command("git", "-C", repo, "status")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	_, _ = cmd.CombinedOutput()
	require.FileExists(t, marker)
}
