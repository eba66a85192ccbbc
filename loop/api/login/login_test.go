package login

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The round trip loopctl dashboard relies on, without a dashboard: the
// file loopd writes, the URL minted from it, a token only its key signs.
func TestLoginFileRoundTrip(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)

	_, err := URL(root, now)
	require.ErrorIs(t, err, ErrNoDashboard)

	require.NoError(t, WriteFile(root, "http://127.0.0.1:7000/", key))
	fi, err := os.Stat(filepath.Join(root, File))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	u, err := URL(root, now)
	require.NoError(t, err)
	tok, ok := strings.CutPrefix(u, "http://127.0.0.1:7000/login?token=")
	require.True(t, ok, u)
	tok, err = url.QueryUnescape(tok)
	require.NoError(t, err)
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	require.Equal(t, MAC(key, parts[0]+"."+parts[1]), parts[2])
	require.NotEqual(t, MAC([]byte("another key of thirty-two bytes!"), parts[0]+"."+parts[1]), parts[2])

	RemoveFile(root, []byte("not the writer's key............"))
	require.FileExists(t, filepath.Join(root, File), "only the writer removes its file")
	RemoveFile(root, key)
	require.NoFileExists(t, filepath.Join(root, File))
}
