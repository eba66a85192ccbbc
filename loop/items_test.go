package loop

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/workitem"
)

func TestWorkItemRef(t *testing.T) {
	tests := []struct{ id, origin, want string }{
		{"issue-12", "octo/repo", "github:octo/repo#12"},
		{"issue-012", "octo/repo", "github:octo/repo#12"},
		{"issue-12", "octo/.github", "github:octo/.github#12"},
		{"issue-12", "", "issue-12"},
		{"issue-12", "octo/-repo", "issue-12"},
		{"issue-12", "octo/..", "issue-12"},
		{"issue-12", "ghe.corp/octo/repo", "issue-12"},
		{"issue-0", "octo/repo", "issue-0"},
		{"issue-2147483648", "octo/repo", "issue-2147483648"},
		{"feature-x", "octo/repo", "feature-x"},
	}
	for _, tt := range tests {
		t.Run(tt.id+"@"+tt.origin, func(t *testing.T) {
			got := WorkItemRef(tt.id, tt.origin)
			require.Equal(t, tt.want, got)
			if got != tt.id {
				_, err := workitem.Parse(got)
				require.NoError(t, err, "a derived ref parses with the one parser")
			}
		})
	}
}

// FileArtifacts lists directories itself (fs.ReadDirFS) and answers as
// fs.ReadDir over its Open does: the same sorted entries and types, a
// missing directory as not existing, a file or an invalid name refused.
func TestFileArtifactsReadDirAgreesWithOpen(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.md", "a.md", "pr-loops/pr-2/graph-state.json", "pr-loops/pr-10/graph-state.json"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644))
	}
	arts := NewFileArtifacts(dir, "docs/specs/issue-1")
	viaOpen := struct{ fs.FS }{arts} // hides ReadDir: fs.ReadDir goes through Open
	for _, name := range []string{".", "pr-loops", "pr-loops/pr-2"} {
		got, err := arts.ReadDir(name)
		require.NoError(t, err, name)
		want, err := fs.ReadDir(viaOpen, name)
		require.NoError(t, err, name)
		require.Equal(t, len(want), len(got), name)
		for i := range want {
			require.Equal(t, want[i].Name(), got[i].Name())
			require.Equal(t, want[i].Type(), got[i].Type())
		}
	}
	_, err := arts.ReadDir("missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = arts.ReadDir("a.md")
	require.Error(t, err)
	_, err = arts.ReadDir("../x")
	require.ErrorIs(t, err, fs.ErrInvalid)
	matches, err := fs.Glob(arts, "pr-loops/*/graph-state.json")
	require.NoError(t, err)
	require.Equal(t, []string{"pr-loops/pr-10/graph-state.json", "pr-loops/pr-2/graph-state.json"}, matches)
}

// Resolve reads a work item's tags and risk tier from the front matter of
// its specification — from the first bytes when they hold it, from the
// whole file when it runs past them — and what it returns stays intact
// after the next work item is resolved (the head buffer is reused).
func TestResolveReadsTagsAndRiskTierFromTheSpecification(t *testing.T) {
	root := t.TempDir()
	write := func(id, name, text string) {
		dir := filepath.Join(root, "docs", "specs", id)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	long := strings.Repeat("Some body text that runs on.\n", 400) // ~11 KB
	write("issue-1", "requirements.md", "---\ntype: requirements\ntags: [cli, graph]\nriskTier: 4\n---\n# R\n")
	write("issue-2", "requirements.md", "---\ntags: [\"ui\", 'api']\nriskTier: 2\n---\n"+long)
	write("issue-3", "bugfix.md", "---\ntags:\n  - "+strings.Repeat("x", 5000)+"\n  - late\nriskTier: 5\n---\n"+long)
	write("issue-4", "design.md", "no front matter\n")
	it := &fileItems{repoRoot: root, specRoot: "docs/specs"}
	var got []graph.WorkItem
	for _, id := range []string{"issue-1", "issue-2", "issue-3", "issue-4"} {
		wi, _, err := it.Resolve(context.Background(), id)
		require.NoError(t, err)
		got = append(got, wi)
	}
	require.Equal(t, []string{"cli", "graph"}, got[0].Tags)
	require.Equal(t, 4, got[0].RiskTier)
	require.Equal(t, []string{"ui", "api"}, got[1].Tags)
	require.Equal(t, 2, got[1].RiskTier)
	require.Equal(t, []string{strings.Repeat("x", 5000), "late"}, got[2].Tags)
	require.Equal(t, 5, got[2].RiskTier)
	require.Equal(t, []string{}, got[3].Tags)
	require.Equal(t, 3, got[3].RiskTier)
}
