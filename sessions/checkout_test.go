package sessions

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseGitConfig(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		text    string
		key     string
		want    []string
		wantErr bool
	}{
		"plain":               {"[remote \"origin\"]\n\turl = https://x/o/r.git\n", "remote.origin.url", []string{"https://x/o/r.git"}, false},
		"last of several":     {"[remote \"origin\"]\nurl=a\n[Remote \"origin\"]\n  URL = b ; comment\n", "remote.origin.url", []string{"a", "b"}, false},
		"quoted and escaped":  {"[core]\n\tx = \"a # b\" \\\"c\\\\ \\\n d\n", "core.x", []string{"a # b \"c\\  d"}, false},
		"old subsection":      {"[remote.Origin]\nurl = u\n", "remote.origin.url", []string{"u"}, false},
		"boolean":             {"[core]\nbare\n", "core.bare", []string{"true"}, false},
		"subsection is exact": {"[remote \"Origin\"]\nurl = u\n", "remote.origin.url", nil, false},
		"include refused":     {"[include]\npath = /x\n", "", nil, true},
		"includeIf refused":   {"[includeIf \"gitdir:/x\"]\npath = /x\n", "", nil, true},
		"unterminated quote":  {"[core]\nx = \"a\n", "", nil, true},
		"key before section":  {"url = u\n", "", nil, true},
		"NUL":                 {"[core]\nx = a\x00\n", "", nil, true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGitConfig([]byte(tc.text))
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got[tc.key])
		})
	}
}

func FuzzParseGitConfig(f *testing.F) {
	for _, s := range []string{"[remote \"origin\"]\n\turl = x\n", "[a.b]\nc\n", "[x \"y\\\"z\"]\nk = \"v\\n\" # c\n", "[include]\npath=x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseGitConfig(b) // never panics
	})
}

func TestCheckoutReadersRefuseLinksAndSizes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	git := filepath.Join(dir, ".git")
	require.NoError(t, os.MkdirAll(git, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(git, "HEAD"), []byte("ref: refs/heads/issue-4\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(git, "config"), []byte("[remote \"origin\"]\n\turl = git@github.com:octo/repo.git\n"), 0o644))
	b, err := CheckedOutBranch(dir)
	require.NoError(t, err)
	require.Equal(t, "issue-4", b)
	u, err := OriginURL(dir)
	require.NoError(t, err)
	require.Equal(t, "git@github.com:octo/repo.git", u)

	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("ref: refs/heads/x\n[remote \"origin\"]\nurl=x\n"), 0o600))
	for name, tc := range map[string]func(){
		"HEAD is a link": func() { _ = os.Remove(filepath.Join(git, "HEAD")); _ = os.Symlink(secret, filepath.Join(git, "HEAD")) },
		"detached HEAD": func() {
			_ = os.WriteFile(filepath.Join(git, "HEAD"), []byte("0123456789abcdef0123456789abcdef01234567\n"), 0o644)
		},
		"HEAD not branch": func() { _ = os.WriteFile(filepath.Join(git, "HEAD"), []byte("ref: refs/tags/--x\n"), 0o644) },
		"huge HEAD":       func() { _ = os.WriteFile(filepath.Join(git, "HEAD"), make([]byte, maxHeadBytes+1), 0o644) },
		"config is a link": func() {
			_ = os.Remove(filepath.Join(git, "config"))
			_ = os.Symlink(secret, filepath.Join(git, "config"))
		},
	} {
		tc()
		_, berr := CheckedOutBranch(dir)
		_, uerr := OriginURL(dir)
		require.True(t, berr != nil || uerr != nil, name)
		if name == "config is a link" {
			require.ErrorIs(t, uerr, ErrCheckoutUnreadable, name)
		} else {
			require.ErrorIs(t, berr, ErrCheckoutUnreadable, name)
		}
	}
}
