//go:build unix

package loop

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Lend answers as ReadFile does — content, refusals — and a buffer given
// back serves the next loan cleared: nothing of the previous file shows.
func TestLendAgreesWithReadFileAndReusesBuffers(t *testing.T) {
	dir := t.TempDir()
	a := NewFileArtifacts(dir, "docs/specs/issue-1")
	write := func(name string, b []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	write("long.md", bytes.Repeat([]byte("x"), 3000))
	write("short.md", []byte("# short\n"))
	write("empty.md", nil)
	write("big.md", bytes.Repeat([]byte("b"), 2<<20))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.md"), 0o600))
	for _, name := range []string{"long.md", "short.md", "empty.md", "big.md"} {
		want, err := a.ReadFile(name)
		require.NoError(t, err)
		got, err := a.Lend(name)
		require.NoError(t, err)
		require.Equal(t, want, got, name)
		a.GiveBack(got)
	}
	long, err := a.Lend("long.md")
	require.NoError(t, err)
	a.GiveBack(long)
	short, err := a.Lend("short.md")
	require.NoError(t, err)
	require.Equal(t, "# short\n", string(short))
	require.Zero(t, bytes.Count(short[:cap(short)], []byte("x")), "a reused buffer holds nothing of the file before")

	for _, tc := range []struct {
		name string
		want error
	}{{"fifo.md", ErrUnsafePath}, {"missing.md", os.ErrNotExist}, {"../escape.md", os.ErrInvalid}} {
		_, lerr := a.Lend(tc.name)
		_, rerr := a.ReadFile(tc.name)
		require.True(t, errors.Is(lerr, tc.want), "%s: %v", tc.name, lerr)
		require.Equal(t, rerr.Error(), lerr.Error())
	}
}

// Resolve reads the specification's front matter as a loan and the check's
// first Lend of it takes those bytes; a write in between drops them, so a
// check never sees a specification older than the last write through the
// artifacts.
func TestResolveHandsItsSpecificationToTheCheck(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "docs", "specs", "issue-7")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	spec := "---\ntags: [auth]\nriskTier: 1\n---\n# Requirements\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "requirements.md"), []byte(spec), 0o600))
	items := &fileItems{repoRoot: root, specRoot: "docs/specs"}
	for _, write := range []bool{false, true} {
		wi, arts, err := items.Resolve(context.Background(), "issue-7")
		require.NoError(t, err)
		require.Equal(t, []string{"auth"}, wi.Tags)
		require.Equal(t, 1, wi.RiskTier)
		a := arts.(*FileArtifacts)
		want := spec
		if write {
			want = "# rewritten\n"
			require.NoError(t, a.WriteFile("requirements.md", []byte(want)))
		}
		got, err := a.Lend("requirements.md")
		require.NoError(t, err)
		require.Equal(t, want, string(got))
		_, held := a.take("requirements.md")
		require.False(t, held, "the bytes are handed over once")
		a.GiveBack(got)
	}
}
