package loop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestFindRootWalksUpLikeGit(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	mk := func(rel string) string {
		p := filepath.Join(tmp, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(p, 0o755))
		return p
	}
	touch := func(rel string) {
		p := filepath.Join(tmp, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
	}
	mk("git/.git")
	mk("git/docs/specs/issue-1")
	touch("cfg/.the-loop/harness-config.yaml")
	mk("cfg/a/b")
	touch("legacy/.the-loop/config.yaml")
	touch("worktree/.git") // a worktree's .git is a file
	mk("home/.the-loop/logs")
	mk("home/project/src")
	// A stray .the-loop/logs left in a subdirectory is not a root.
	mk("git/docs/.the-loop/logs")

	cases := []struct {
		from, want string
		ok         bool
	}{
		{"git/docs/specs/issue-1", "git", true},
		{"git/docs", "git", true},
		{"git", "git", true},
		{"cfg/a/b", "cfg", true},
		{"legacy", "legacy", true},
		{"worktree", "worktree", true},
		{"home/project/src", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.from, func(t *testing.T) {
			got, ok := FindRoot(filepath.Join(tmp, filepath.FromSlash(tc.from)))
			if tmpHasRootAbove(tmp) {
				t.Skip("a directory above the test's temp dir is itself a repository")
			}
			require.Equal(t, tc.ok, ok)
			if tc.ok {
				require.Equal(t, filepath.Join(tmp, tc.want), got)
			}
		})
	}
}

func tmpHasRootAbove(tmp string) bool {
	_, ok := FindRoot(filepath.Dir(tmp))
	return ok
}

func TestResolveRoot(t *testing.T) {
	dir := t.TempDir()
	if tmpHasRootAbove(dir) {
		t.Skip("a directory above the test's temp dir is itself a repository")
	}
	_, err := ResolveRoot("", dir)
	require.ErrorIs(t, err, ErrRepoNotFound)
	require.ErrorContains(t, err, "pass --repo")
	got, err := ResolveRoot(dir, "/elsewhere")
	require.NoError(t, err, "--repo is taken as is")
	require.Equal(t, dir, got)
	_, err = ResolveRoot(filepath.Join(dir, "missing"), "")
	require.ErrorIs(t, err, ErrRepoNotFound)
}

func TestRequireWorkItemNamesTheNearest(t *testing.T) {
	root := t.TempDir()
	for _, id := range []string{"issue-1", "issue-12", "issue-239"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "docs", "specs", id), 0o755))
	}
	r, err := OpenRepo(root, "")
	require.NoError(t, err)
	ids, err := r.WorkItems()
	require.NoError(t, err)
	require.Equal(t, []string{"issue-1", "issue-12", "issue-239"}, ids)

	require.NoError(t, r.RequireWorkItem("issue-239"))
	err = r.RequireWorkItem("isue-1")
	require.ErrorIs(t, err, ErrNoSuchWorkItem)
	require.ErrorContains(t, err, "did you mean issue-1")
	err = r.RequireWorkItem("issue-999")
	require.ErrorIs(t, err, ErrNoSuchWorkItem)
	require.ErrorContains(t, err, "issue-999")
	err = r.RequireWorkItem("feature-x")
	require.ErrorContains(t, err, "known work items: issue-1, issue-12, issue-239")
	require.ErrorIs(t, r.RequireWorkItem("issue-1 "), ErrInvalidID)

	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(root, "docs", "specs", "linked")))
	require.ErrorIs(t, r.RequireWorkItem("linked"), ErrUnsafePath)

	empty, err := OpenRepo(t.TempDir(), "")
	require.NoError(t, err)
	require.ErrorContains(t, empty.RequireWorkItem("issue-1"), "no work items yet")
	entries, err := os.ReadDir(empty.Root)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing is created")
}

// Any id ValidateWorkItemID accepts names exactly one visible directory
// directly under the spec root.
func FuzzValidateWorkItemID(f *testing.F) {
	for _, s := range []string{"issue-1", "issue-1 ", " ", "issue-1\n", "a/b", "..", ".hidden", "adhoc-2026", "\u00a0", "x\u200b", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if ValidateWorkItemID(id) != nil {
			return
		}
		if id != strings.TrimSpace(id) || strings.ContainsAny(id, "/\\\x00\n\r\t") || !utf8.ValidString(id) {
			t.Fatalf("accepted %q", id)
		}
		if filepath.Dir(filepath.Join("/specs", id)) != "/specs" {
			t.Fatalf("%q escapes the spec root", id)
		}
		for _, r := range id {
			if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("accepted %q with %U", id, r)
			}
		}
	})
}
