package sessions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Claude Code's transcript is found by the session's cwd and id; its tail
// is returned from a whole line; a symbolic link in its place, another
// harness or an id that is no file name give ErrNoTranscript.
func TestHarnessTranscript(t *testing.T) {
	dir := t.TempDir()
	rec := Record{Harness: "claude", SessionID: "0b6c-11", Cwd: "/ws/.worktrees/github.com/o/r/github-o-r-1"}
	path := ClaudeTranscriptPath(dir, rec.Cwd, rec.SessionID)
	require.Equal(t, filepath.Join(dir, "projects", "-ws--worktrees-github-com-o-r-github-o-r-1", "0b6c-11.jsonl"), path)

	_, _, _, err := HarnessTranscript(rec, dir)
	require.ErrorIs(t, err, ErrNoTranscript, "not written yet")

	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte("{\"type\":\"user\"}\n{\"type\":\"assistant\"}\n"), 0o600))
	p, tail, cut, err := HarnessTranscript(rec, dir)
	require.NoError(t, err)
	require.Equal(t, path, p)
	require.False(t, cut)
	require.Equal(t, "{\"type\":\"user\"}\n{\"type\":\"assistant\"}\n", string(tail))

	big := strings.Repeat("{\"x\":\"yyyyyyyy\"}\n", MaxTranscriptBytes/16+100)
	require.NoError(t, os.WriteFile(path, []byte(big), 0o600))
	_, tail, cut, err = HarnessTranscript(rec, dir)
	require.NoError(t, err)
	require.True(t, cut)
	require.LessOrEqual(t, len(tail), MaxTranscriptBytes)
	require.True(t, strings.HasPrefix(string(tail), "{\"x\""), "the tail starts at a whole line")

	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("key"), 0o600))
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Symlink(secret, path))
	_, _, _, err = HarnessTranscript(rec, dir)
	require.ErrorIs(t, err, ErrNoTranscript, "a link the agent planted is not followed")

	// A directory on the way planted as a link to loopd's own files: the
	// read stays beneath the config dir.
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, rec.SessionID+".jsonl"), []byte("decision-signing key\n"), 0o600))
	require.NoError(t, os.RemoveAll(filepath.Dir(path)))
	require.NoError(t, os.Symlink(outside, filepath.Dir(path)))
	_, tail, _, err = HarnessTranscript(rec, dir)
	require.ErrorIs(t, err, ErrNoTranscript, "a planted directory link is not followed out of the config dir")
	require.Empty(t, tail)

	for _, r := range []Record{{Harness: "cursor", SessionID: "a", Cwd: "/w"}, {Harness: "claude", SessionID: "../x", Cwd: "/w"}} {
		_, _, _, err = HarnessTranscript(r, dir)
		require.ErrorIs(t, err, ErrNoTranscript)
	}
}
