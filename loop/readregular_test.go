//go:build unix

package loop

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadRegularAgreesWithThePortableRead: the system-call read that
// check --all uses for every state file and artifact answers as the
// package-os read does — content, a refused FIFO or directory (without
// blocking), a missing file, the cap.
func TestReadRegularAgreesWithThePortableRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		b := make([]byte, size)
		for i := range b {
			b[i] = byte('a' + i%26)
		}
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(write("target", 10), link))
	cases := []struct {
		name  string
		path  string
		limit int64
		want  error // nil: read; else errors.Is
	}{
		{"empty", write("empty", 0), 100, nil},
		{"small", write("small", 37), 100, nil},
		{"bigger than a page", write("big", 70_000), 100_000, nil},
		{"exactly the cap", write("cap", 100), 100, nil},
		{"over the cap", write("over", 101), 100, ErrTooLarge},
		{"a fifo", fifo, 100, ErrUnsafePath},
		{"a directory", dir, 100, ErrUnsafePath},
		{"missing", filepath.Join(dir, "nope"), 100, fs.ErrNotExist},
		{"a link to a file", link, 100, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readRegular(tc.path, tc.limit)
			want, werr := readCappedPortable(tc.path, tc.limit)
			if tc.want != nil {
				require.True(t, errors.Is(err, tc.want), "%v", err)
				require.True(t, errors.Is(werr, tc.want), "%v", werr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, werr)
			require.Equal(t, want, got)
		})
	}
}
