//go:build unix

package loop

import (
	"bytes"
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
