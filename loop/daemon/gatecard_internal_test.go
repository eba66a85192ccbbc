//go:build unix

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
)

// The gate card reads the agent's artifacts from its clone: nothing out
// of it, no link, no FIFO (which would hang the page), at most
// MaxGateArtifact bytes.
func TestReadArtifactIsConfinedToTheClone(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.md")
	require.NoError(t, os.WriteFile(secret, []byte("# loopd's secret\n"), 0o600))
	clone := t.TempDir()
	spec := filepath.Join(clone, "docs", "specs", "issue-1")
	require.NoError(t, os.MkdirAll(spec, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(spec, "requirements.md"), []byte("# Requirements\n"), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(spec, "design.md")))
	require.NoError(t, os.Symlink("requirements.md", filepath.Join(spec, "inside-link.md")))
	require.NoError(t, os.WriteFile(filepath.Join(spec, "big.md"), []byte(strings.Repeat("x", dashboard.MaxGateArtifact+10)), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(spec, "fifo.md"), 0o644))
	// A linked parent directory: docs/specs/issue-2 → outside.
	require.NoError(t, os.Symlink(outside, filepath.Join(clone, "docs", "specs", "issue-2")))

	root, err := os.OpenRoot(clone)
	require.NoError(t, err)
	defer root.Close()
	for _, tc := range []struct {
		rel, problem, content string
		truncated             bool
	}{
		{"docs/specs/issue-1/requirements.md", "", "# Requirements\n", false},
		{"docs/specs/issue-1/design.md", "a symbolic link: not followed", "", false},
		{"docs/specs/issue-1/inside-link.md", "a symbolic link: not followed", "", false},
		{"docs/specs/issue-1/fifo.md", "not a regular file: not read", "", false},
		{"docs/specs/issue-1/missing.md", "missing", "", false},
		{"docs/specs/issue-2/secret.md", "not readable:", "", false},
		{"../" + filepath.Base(outside) + "/secret.md", "not readable:", "", false},
	} {
		b, truncated, problem := readArtifact(root, tc.rel)
		if tc.problem == "" {
			require.Empty(t, problem, tc.rel)
		} else {
			require.True(t, strings.HasPrefix(problem, tc.problem), "%s: %q", tc.rel, problem)
		}
		require.Equal(t, tc.content, string(b), tc.rel)
		require.Equal(t, tc.truncated, truncated, tc.rel)
		require.NotContains(t, string(b), "secret", tc.rel)
	}
	b, truncated, problem := readArtifact(root, "docs/specs/issue-1/big.md")
	require.Empty(t, problem)
	require.True(t, truncated)
	require.Len(t, b, dashboard.MaxGateArtifact)
}

// The snapshot of a decision: kept by content hash, read back only when
// the bytes still hash to the name (a planted or changed blob is not
// believed).
func TestGateSnapshotsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	artDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(artDir, "requirements.md"), []byte("# R\n- R1\n"), 0o644))
	arts := os.DirFS(artDir)
	s := gateSnapshots{dir: dir}
	require.Nil(t, s.last("github:o/r#1", "requirements-approval"))
	d := graph.Decision{Outcome: "changes-requested", By: "@dana", At: "2026-01-02T03:04:05Z"}
	require.NoError(t, s.save("github:o/r#1", "requirements-approval", d, arts, []string{"requirements.md", "bugfix.md"}))
	snap := s.last("github:o/r#1", "requirements-approval")
	require.NotNil(t, snap)
	require.Equal(t, "changes-requested", snap.Outcome)
	require.Len(t, snap.Artifacts, 1, "a missing alternative is not recorded")
	b, ok := s.blob(snap.Artifacts[0].SHA256)
	require.True(t, ok)
	require.Equal(t, "# R\n- R1\n", string(b))
	require.Nil(t, s.last("github:o/r#1", "design-approval"), "per gate")
	require.Nil(t, s.last("github:o/r#2", "requirements-approval"), "per work item")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "blobs", snap.Artifacts[0].SHA256), []byte("tampered"), 0o600))
	_, ok = s.blob(snap.Artifacts[0].SHA256)
	require.False(t, ok, "a blob that no longer matches its hash is refused")
	_, ok = s.blob("../../etc/passwd")
	require.False(t, ok)
}
