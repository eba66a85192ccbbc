package loop

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every read of a spec directory's files — ReadFile, Lend, Open, ReadDir
// (and Stat of a link) — stays beneath the checkout: a symbolic link the agent planted
// in its place or as a directory on the way to it, pointing at loopd's own
// files on the host, is refused; a link that stays inside still works.
func TestArtifactReadsStayBeneathTheCheckout(t *testing.T) {
	checkout := t.TempDir()
	host := t.TempDir() // loopd's side: a key it must never read for the agent
	require.NoError(t, os.WriteFile(filepath.Join(host, "requirements.md"), []byte("SECRET KEY\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(host, "sub"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(host, "sub", "design.md"), []byte("SECRET KEY\n"), 0o600))

	spec := filepath.Join(checkout, "docs", "specs", "issue-1")
	require.NoError(t, os.MkdirAll(spec, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(host, "requirements.md"), filepath.Join(spec, "requirements.md")))
	require.NoError(t, os.Symlink(filepath.Join(host, "sub"), filepath.Join(spec, "notes")))
	require.NoError(t, os.WriteFile(filepath.Join(checkout, "shared.md"), []byte("# Shared\n"), 0o644))
	require.NoError(t, os.Symlink("../../../shared.md", filepath.Join(spec, "design.md")))

	a := NewFileArtifacts(spec, "docs/specs/issue-1")
	for _, name := range []string{"requirements.md", "notes/design.md"} {
		_, err := a.ReadFile(name)
		require.ErrorIs(t, err, ErrUnsafePath, "ReadFile %s", name)
		_, err = a.Lend(name)
		require.ErrorIs(t, err, ErrUnsafePath, "Lend %s", name)
		_, err = a.Open(name)
		require.ErrorIs(t, err, ErrUnsafePath, "Open %s", name)
	}
	// A stat tells metadata only; the file's own place as a link out is
	// refused all the same.
	_, err := a.Stat("requirements.md")
	require.ErrorIs(t, err, ErrUnsafePath, "Stat of a link out")
	_, err = a.ReadDir("notes")
	require.ErrorIs(t, err, ErrUnsafePath, "ReadDir through a planted link")
	_, err = fs.ReadFile(a, "notes/design.md")
	require.Error(t, err)

	// A link inside the checkout is followed.
	b, err := a.ReadFile("design.md")
	require.NoError(t, err)
	require.Equal(t, "# Shared\n", string(b))

	// The spec directory itself planted as a link out of the checkout.
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "tasks.md"), []byte("SECRET\n"), 0o600))
	link := filepath.Join(checkout, "docs", "specs", "issue-2")
	require.NoError(t, os.Symlink(outside, link))
	_, err = NewFileArtifacts(link, "docs/specs/issue-2").ReadFile("tasks.md")
	require.ErrorIs(t, err, ErrUnsafePath, "a spec directory that is a link out of the checkout")
}
